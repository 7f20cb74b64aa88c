"""A worker of `serve --workers 2` (Redis) killed with -9 in the middle of a board post, its
board file already written: the client's retry with the same Idempotency-Key is answered
with the recorded answer within seconds (the surviving worker sees the key's holder is
gone, recovers its journal entry and replays), and the post is stored once. Before issue
31 the key stayed held for the gate's 120 s lease: that variant is run too, and fails."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.bucketsync.conftest import SLUG
from tests.bucketsync.reliability.processes import ServeProcess
from tests.bucketsync.test_multiworker import serve_env
from tests.support.redisdb import drop_prefix, require_redis, unique_prefix

pytestmark = pytest.mark.redis

HOOKS = str(Path(__file__).resolve().parent / "stall_site")
STALLER = "staller"
KEY = "retry-after-kill-1"
ANSWERED_WITHIN_S = 5.0


@pytest.fixture
def redis_env(tmp_path: Path) -> Iterator[dict[str, str]]:
    url = require_redis()
    prefix = unique_prefix()
    yield serve_env(
        tmp_path / "data",
        BUCKETSYNC_BUS_URL=url,
        BUCKETSYNC_BUS_PREFIX=prefix,
        PYTHONPATH=HOOKS + os.pathsep + os.environ.get("PYTHONPATH", ""),
        AGENTHUB_TEST_STALL_AUTHOR=STALLER,
        AGENTHUB_TEST_STALL_MARKER=str(tmp_path / "stalled"),
    )
    drop_prefix(url, prefix)


def stalled_pid(marker: Path, timeout_s: float) -> int:
    deadline = time.monotonic() + timeout_s
    while not marker.exists():
        assert time.monotonic() < deadline, "the post never reached the stall"
        time.sleep(0.02)
    return int(marker.read_text())


def kill_mid_post(server: ServeProcess, marker: Path) -> None:
    """POST with KEY, and kill -9 the worker running it once its board file is written."""
    first: list[httpx.Response | Exception] = []

    def send() -> None:
        try:
            first.append(server.post(STALLER, "a post whose worker dies", KEY, timeout_s=120))
        except httpx.HTTPError as exc:
            first.append(exc)

    sender = threading.Thread(target=send)
    sender.start()
    os.kill(stalled_pid(marker, 60), signal.SIGKILL)
    sender.join(timeout=30)
    assert first and isinstance(first[0], httpx.HTTPError), "the first answer must be lost"


def retry_answered(server: ServeProcess) -> tuple[float, httpx.Response | None]:
    """Retry with KEY: (seconds taken, the answer, None when none came in time)."""
    started = time.monotonic()
    try:
        answer = server.post(
            STALLER, "a post whose worker dies", KEY, timeout_s=ANSWERED_WITHIN_S + 1
        )
    except httpx.TimeoutException:
        return time.monotonic() - started, None
    return time.monotonic() - started, answer


def stored(server: ServeProcess) -> list[str]:
    items = httpx.get(f"{server.base}/v1/messages", params={"limit": 100}, timeout=30).json()
    return [name for name in items["items"] if name.endswith(f"_{STALLER}.md")]


def run(env: dict[str, str], tmp_path: Path) -> tuple[float, httpx.Response | None, list[str]]:
    server = ServeProcess(env, tmp_path / "serve.log", workers=2)
    server.start()
    try:
        server.wait_healthy(120)
        server.wait_workers(2, 120)  # so one survives the kill to take the retry
        server.register(STALLER, org=env["ORG"], slug=SLUG)
        kill_mid_post(server, tmp_path / "stalled")
        took, answer = retry_answered(server)
        return took, answer, stored(server)
    finally:
        server.stop()


def test_a_retry_after_a_worker_is_killed_mid_post_replays_the_recorded_answer(
    redis_env: dict[str, str], tmp_path: Path
) -> None:
    took, answer, board = run(redis_env, tmp_path)

    assert answer is not None, f"no answer within {ANSWERED_WITHIN_S + 1} s"
    assert answer.status_code == 201, answer.text
    assert took <= ANSWERED_WITHIN_S, took
    assert answer.headers.get("Idempotent-Replayed") == "true"
    assert board == [answer.json()["filename"]]


def test_broken_variant_a_gate_blind_to_its_dead_holder_holds_the_retry(
    redis_env: dict[str, str], tmp_path: Path
) -> None:
    """The gate before issue 31 (a lease only): the same kill, and the retry is still
    waiting on the dead worker's key when the client gives up."""
    took, answer, board = run({**redis_env, "AGENTHUB_TEST_GATE_LEASE_ONLY": "1"}, tmp_path)

    assert answer is None
    assert took > ANSWERED_WITHIN_S
    assert len(board) == 1
