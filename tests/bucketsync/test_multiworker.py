"""Two real `agenthub bucketsync serve` processes sharing one data directory and one Redis
(bucketsync.md "Scaling out"): a waiter on one is woken by a post on the other, and the
raw-message limit holds across both, its X-RateLimit-* headers counting one shared window."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from agenthub.bucketsync.identity.local import LocalIdentity
from tests.bucketsync.conftest import ORG, SLUG, World
from tests.support.redisdb import drop_prefix, require_redis, unique_prefix

pytestmark = pytest.mark.redis

SRC = str(Path(__file__).resolve().parents[2] / "src")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def serve(env: dict[str, str], log: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    out = log.open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "agenthub.cli", "bucketsync", "serve", "--port", str(port)],
        env=env,
        stdout=out,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    # Generous: on a loaded 2-core machine an interpreter start plus imports took over 30 s.
    deadline = time.monotonic() + 90
    while True:
        try:
            if httpx.get(f"{base}/v1/healthz", timeout=1).status_code == 200:
                return process, base
        except httpx.HTTPError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise AssertionError(f"server did not start:\n{log.read_text()}")
        time.sleep(0.1)


def stop(processes: list[subprocess.Popen[bytes]]) -> None:
    """Terminate `serve` processes, killing one that does not exit in 10 s."""
    for process in processes:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


def serve_env(data_dir: Path, **extra: str) -> dict[str, str]:
    """The environment of a `bucketsync serve` subprocess of these tests on `data_dir`
    (local storage unless `extra` says otherwise)."""
    return {
        **os.environ,
        "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "ORG": ORG,
        "COLLAB_SLUG": SLUG,
        "AUDIT_BUCKET": "acme-admin/chal-audit",
        "BUCKETSYNC_DATA_DIR": str(data_dir),
        "BUCKETSYNC_STORAGE": "local",
        **extra,
    }


class HttpWorld(World):
    def __init__(self, base: str, identity: LocalIdentity) -> None:
        super().__init__(httpx.Client(base_url=base, timeout=30), None, identity)  # type: ignore[arg-type]


@pytest.fixture
def two_workers(tmp_path: Path) -> Iterator[tuple[HttpWorld, HttpWorld]]:
    url = require_redis()
    prefix = unique_prefix()
    data = tmp_path / "data"
    env = serve_env(data, BUCKETSYNC_BUS_URL=url, BUCKETSYNC_BUS_PREFIX=prefix)
    first, base_a = serve(env, tmp_path / "a.log")
    processes = [first]
    try:
        second, base_b = serve(env, tmp_path / "b.log")
        processes.append(second)
        identity = LocalIdentity(data / "users.json", org=ORG)
        a, b = HttpWorld(base_a, identity), HttpWorld(base_b, identity)
        b.tokens = a.tokens
        yield a, b
        a.client.close()
        b.client.close()
    finally:
        stop(processes)
        drop_prefix(url, prefix)


def test_bs_13_33_two_serve_processes_share_wakes_and_limits(
    two_workers: tuple[HttpWorld, HttpWorld],
) -> None:
    a, b = two_workers
    a.agent("agent-1")
    a.agent("agent-2")
    with ThreadPoolExecutor(max_workers=1) as pool:
        started = time.monotonic()
        parked = pool.submit(b.client.get, "/v1/inbox/agent-2?wait=20")
        deadline = time.monotonic() + 10
        while b.client.get("/v1/healthz").json()["longpoll"]["parked"] < 1:
            assert time.monotonic() < deadline, "the waiter never parked on worker B"
            time.sleep(0.02)
        sent = a.raw("agent-1", "from worker A @agent-2").json()
        page = parked.result(timeout=15).json()
    assert page["watch"]["status"] == "delivered"
    assert page["items"] == [sent["filename"]]
    assert time.monotonic() - started < 10
    answers = [(a if i % 2 else b).raw("agent-1", f"n{i}") for i in range(5)]
    # One message was already sent above: 5/min across both workers.
    assert [r.status_code for r in answers] == [201, 201, 201, 201, 429]
    # The X-RateLimit-* headers count the shared window down, whichever worker answers.
    assert [r.headers["X-RateLimit-Limit"] for r in answers] == ["5"] * 5
    assert [r.headers["X-RateLimit-Remaining"] for r in answers] == ["3", "2", "1", "0", "0"]
    resets = [int(r.headers["X-RateLimit-Reset"]) for r in answers]
    assert all(0 < reset <= 60 for reset in resets)
    # The moving window frees its oldest hit first: the 429 waits no longer than the first.
    assert resets[-1] <= resets[0]
    assert answers[-1].headers["Retry-After"] == answers[-1].headers["X-RateLimit-Reset"]


def test_done_when_two_exec_watchers_on_two_workers_hear_each_other(
    two_workers: tuple[HttpWorld, HttpWorld], tmp_path: Path
) -> None:
    """The issue's acceptance: two agents running `collab_watch.sh --exec` receive each
    other's mentions, channel posts at notify: all and broadcasts, across two workers."""
    a, b = two_workers
    a.agent("agent-1")
    a.agent("agent-2")
    a.user("boss", role="admin")
    a.client.post(
        "/v1/channels",
        json={"name": "ideas", "agent_id": "human-boss", "body": "ideas"},
        headers=a.auth("boss"),
    )
    for agent in ("agent-1", "agent-2"):
        a.put(agent, "sub.md", "s")
        a.client.post(
            "/v1/channels/ideas/subscribe",
            json={"source": a.uri(agent, "sub.md"), "notify": "all"},
        )
    script = Path(SRC) / "agenthub/bucketsync/clients/collab_watch.sh"
    watchers = []
    received = {}
    for agent, world in (("agent-1", a), ("agent-2", b)):
        received[agent] = tmp_path / f"{agent}.pages"
        env = {
            **os.environ,
            "COLLAB_WATCH_STATE": str(tmp_path / f"state-{agent}"),
            "COLLAB_WATCH_WAIT": "20",
        }
        base = str(world.client.base_url).rstrip("/")
        watchers.append(
            subprocess.Popen(
                [
                    "sh",
                    str(script),
                    "--exec",
                    f"cat >> {received[agent]}; echo >> {received[agent]}",
                    base,
                    agent,
                ],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
    try:
        deadline = time.monotonic() + 15
        while sum(w.client.get("/v1/healthz").json()["longpoll"]["parked"] for w in (a, b)) < 2:
            assert time.monotonic() < deadline, "the watchers never parked"
            time.sleep(0.05)
        to_2 = a.raw("agent-1", "@agent-2 over to you").json()["filename"]
        to_1 = b.raw("agent-2", "@agent-1 back to you").json()["filename"]
        room = a.raw("agent-1", "room news", channel="ideas").json()["filename"]
        shout = b.client.post(
            "/v1/messages",
            json={"agent_id": "human-boss", "body": "all hands", "broadcast": True},
            headers=b.auth("boss"),
        ).json()["filename"]
        expected = {"agent-1": {to_1, shout}, "agent-2": {to_2, room, shout}}
        deadline = time.monotonic() + 20
        while True:
            got = {
                agent: set(re.findall(r'"filename":"([^"]+)"', path.read_text()))
                if path.exists()
                else set()
                for agent, path in received.items()
            }
            if all(expected[agent] <= got[agent] for agent in expected):
                break
            assert time.monotonic() < deadline, f"missing deliveries: {expected} vs {got}"
            time.sleep(0.05)
    finally:
        for watcher in watchers:
            watcher.terminate()
            watcher.wait(timeout=10)


def test_the_rate_limit_headers_reset_across_workers_when_the_window_gives_back(
    two_workers: tuple[HttpWorld, HttpWorld],
) -> None:
    """Waiting X-RateLimit-Reset seconds after a 429 on one worker is enough for the other
    to admit the next request: the reset is the shared window's, not a worker's. The raw
    window is a minute of wall-clock time in Redis, so this waits up to that long."""
    a, b = two_workers
    a.agent("agent-1")
    answers = [(a if i % 2 else b).raw("agent-1", f"n{i}") for i in range(6)]
    assert [r.status_code for r in answers] == [201] * 5 + [429]
    assert [r.headers["X-RateLimit-Remaining"] for r in answers] == ["4", "3", "2", "1", "0", "0"]
    time.sleep(1.5)
    again = b.raw("agent-1", "still too soon")
    assert again.status_code == 429
    first_reset = int(answers[-1].headers["X-RateLimit-Reset"])
    assert int(again.headers["X-RateLimit-Reset"]) < first_reset  # the reset counts down too

    time.sleep(int(again.headers["X-RateLimit-Reset"]) + 0.5)
    admitted = a.raw("agent-1", "after the reset")

    assert admitted.status_code == 201, admitted.text
    # The five hits came within a second, so they all left the minute together: the
    # window is whole again, less this request (the hourly window is looser).
    assert admitted.headers["X-RateLimit-Remaining"] == "4"
    assert admitted.headers["X-RateLimit-Limit"] == "5"
