"""Two real `agenthub bucketsync serve` processes sharing one data directory and one Redis
(bucketsync.md "Scaling out"): a waiter on one is woken by a post on the other, and the
raw-message limit holds across both."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from agenthub.bucketsync.identity import LocalIdentity
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
    deadline = time.monotonic() + 30
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


class HttpWorld(World):
    def __init__(self, base: str, identity: LocalIdentity) -> None:
        super().__init__(httpx.Client(base_url=base, timeout=30), None, identity)  # type: ignore[arg-type]


@pytest.fixture
def two_workers(tmp_path: Path) -> Iterator[tuple[HttpWorld, HttpWorld]]:
    url = require_redis()
    prefix = unique_prefix()
    data = tmp_path / "data"
    env = {
        **os.environ,
        "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "ORG": ORG,
        "COLLAB_SLUG": SLUG,
        "AUDIT_BUCKET": "acme-admin/chal-audit",
        "BUCKETSYNC_DATA_DIR": str(data),
        "BUCKETSYNC_BUS_URL": url,
        "BUCKETSYNC_BUS_PREFIX": prefix,
    }
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
        for process in processes:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
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
    statuses = [(a if i % 2 else b).raw("agent-1", f"n{i}").status_code for i in range(5)]
    # One message was already sent above: 5/min across both workers.
    assert statuses == [201, 201, 201, 201, 429]
