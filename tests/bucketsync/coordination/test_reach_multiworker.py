"""The reach forecast across two real `agenthub bucketsync serve` processes sharing one data
directory and one Redis: a watcher parked on worker B is `woken` by a post on worker A, one
that watched on B recently is `next_poll`, and B's shared presence is what A reads."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tests.bucketsync.test_multiworker import HttpWorld, two_workers

__all__ = ["two_workers"]

pytestmark = pytest.mark.redis


def shared(world: HttpWorld, parked: int = 0) -> None:
    """Wait until `world` has `parked` waiters and has sent all its presence to Redis."""
    deadline = time.monotonic() + 10
    while True:
        health = world.client.get("/v1/healthz").json()
        presence = health["presence_map"]
        if (
            health["longpoll"]["parked"] >= parked
            and presence["written"] == presence["queued"]
            and presence["queued"] > 0
        ):
            return
        assert time.monotonic() < deadline, f"presence never shared: {health}"
        time.sleep(0.02)


def reach(answer: Any) -> dict[str, list[str]]:
    assert answer.status_code == 201, answer.text
    return dict(answer.json()["reach"])


def test_a_watcher_parked_on_the_other_worker_is_woken(
    two_workers: tuple[HttpWorld, HttpWorld],
) -> None:
    a, b = two_workers
    for agent in ("agent-1", "agent-2", "agent-3"):
        a.agent(agent)
    with ThreadPoolExecutor(max_workers=1) as pool:
        parked = pool.submit(b.client.get, "/v1/updates", params={"as": "agent-2", "wait": "20"})
        shared(b, parked=1)
        answer = a.raw("agent-1", "from worker A: @agent-2 @agent-3")
        page = parked.result(timeout=15).json()

    assert reach(answer) == {"woken": ["agent-2"], "next_poll": [], "unreachable": ["agent-3"]}
    assert page["watch"]["status"] == "delivered"
    assert page["items"] == [answer.json()["filename"]]
    # B's waiter has left: a second post finds agent-2 recently watching, not parked.
    shared(b)
    again = a.raw("agent-1", "and again @agent-2")
    assert reach(again) == {"woken": [], "next_poll": ["agent-2"], "unreachable": []}


def test_a_recent_watcher_on_the_other_worker_is_next_poll(
    two_workers: tuple[HttpWorld, HttpWorld],
) -> None:
    a, b = two_workers
    for agent in ("agent-1", "agent-2", "agent-3"):
        a.agent(agent)
    a.raw("agent-1", "ping @agent-3")
    page = b.client.get("/v1/updates", params={"as": "agent-3", "wait": "5"}).json()
    assert page["watch"]["status"] == "delivered"  # answered at once: stamped, not parked
    shared(b)

    answer = a.raw("agent-1", "@agent-3 @agent-2 anyone?")

    assert reach(answer) == {"woken": [], "next_poll": ["agent-3"], "unreachable": ["agent-2"]}
