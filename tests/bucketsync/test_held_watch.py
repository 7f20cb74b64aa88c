"""A watch held back by the streams' watermark (issue 31) is counted as parked, and its
hold is bounded: a stamp whose write never lands is settled when its request ends (a
refused write), or when its lease ends (a stamp issued outside any request). Time moves by
hand (`ManualTimer`); the broken variant (no settling at the request's end) stays held."""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any

import pytest

from agenthub.bucketsync.core import journal
from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.core.stamps import STAMP_LEASE_S, StampIssuer
from agenthub.bucketsync.errors import StorageUnavailable
from tests.bucketsync.live_support import LiveWorld, live, wait_for

__all__ = ["live"]

UPDATES = "/v1/updates?as=agent-1&wait=30&expand=true"


def stats(world: LiveWorld) -> dict[str, int]:
    counters: dict[str, int] = world.client.get("/v1/healthz").json()["longpoll"]
    return counters


def refused_after_its_stamp(
    world: LiveWorld, monkeypatch: pytest.MonkeyPatch
) -> tuple[threading.Event, Any]:
    """A post by agent-2 that is stamped, then waits for the returned event and is refused
    by the Hub before anything of it is written; returns (event, its future)."""
    release, entered = threading.Event(), threading.Event()
    begin = journal.begin

    def stalled_then_refused(hub: Hub, entry: journal.Entry) -> None:
        if entry.board_path.endswith("_agent-2.md"):
            entered.set()
            release.wait(10)
            raise StorageUnavailable("the Hub refused the write")
        begin(hub, entry)

    monkeypatch.setattr(journal, "begin", stalled_then_refused)
    refused = world.pool.submit(world.raw, "agent-2", "this never lands @agent-1")
    assert entered.wait(5)
    return release, refused


def held_watch(world: LiveWorld) -> tuple[str, Any]:
    """A mention of agent-1 stamped after the pending one, and agent-1's watch, held."""
    mention = str(world.raw("agent-3", "hello @agent-1").json()["filename"])
    watch = world.pool.submit(world.client.get, UPDATES)
    wait_for(lambda: stats(world)["held"] == 1)
    return mention, watch


@pytest.fixture
def trio(live: LiveWorld) -> LiveWorld:
    for handle in ("agent-1", "agent-2", "agent-3"):
        live.agent(handle)
    return live


def test_a_watch_held_by_a_refused_write_answers_when_its_request_ends(
    trio: LiveWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    release, refused = refused_after_its_stamp(trio, monkeypatch)
    mention, watch = held_watch(trio)
    assert stats(trio)["parked"] == 1  # held is listening: counted as parked
    assert not watch.done()

    release.set()
    started = time.monotonic()
    assert refused.result(timeout=5).status_code == 503
    page = watch.result(timeout=5).json()

    assert time.monotonic() - started < 2.0  # not the 30 s budget: time never moved
    assert page["watch"]["status"] == "delivered"
    assert [item["filename"] for item in page["items"]] == [mention]
    assert stats(trio)["held"] == 0


def test_a_stamp_issued_outside_a_request_holds_a_watch_only_for_its_lease(
    trio: LiveWorld,
) -> None:
    trio.hub.stamps.issue("agent-2")  # a write that will never come, outside a request
    mention, watch = held_watch(trio)
    trio.timer.advance(STAMP_LEASE_S - 1)
    time.sleep(0.2)
    assert not watch.done() and stats(trio)["parked"] == 1

    trio.timer.advance(1)
    page = watch.result(timeout=5).json()

    assert page["watch"]["status"] == "delivered"
    assert [item["filename"] for item in page["items"]] == [mention]


def test_broken_variant_without_settling_at_the_request_end_the_watch_stays_held(
    trio: LiveWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(StampIssuer, "settling", lambda _self: contextlib.nullcontext())
    release, refused = refused_after_its_stamp(trio, monkeypatch)
    _mention, watch = held_watch(trio)

    release.set()
    assert refused.result(timeout=5).status_code == 503
    time.sleep(1.0)

    assert not watch.done()  # held until the stamp's lease, as before issue 31
    assert stats(trio)["held"] == 1
