"""What keeps a broadcast wake cheap: cached reads answered on the event loop (a thread
only for a read that needs the bucket), and the post's own answer going out before the
doorbells of the waiters it woke ring."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from agenthub.bucketsync.api import live as live_routes
from agenthub.bucketsync.api.answers import json_answer
from agenthub.bucketsync.api.live import cached_or_threaded
from agenthub.bucketsync.board import read as board
from agenthub.bucketsync.core.longpoll import LongPoll
from agenthub.bucketsync.core.readmodel import NotCached, ReadModel, cached_only
from agenthub.bucketsync.core.timers import ManualTimer
from agenthub.bucketsync.core.waiters import WaiterRegistry
from agenthub.bucketsync.storage.base import Batch
from agenthub.bucketsync.storage.local import LocalBucketStore
from agenthub.clock import FrozenClock
from tests.bucketsync.live_support import LiveWorld, live

__all__ = ["live"]

BUCKET = "acme/central"
BOARD = "message_board/"


@pytest.fixture
def model(tmp_path: Path, clock: FrozenClock) -> ReadModel:
    store = LocalBucketStore(tmp_path / "store", clock=clock)
    store.create(BUCKET, creator="bucket-sync")
    store.write_batch(BUCKET, Batch(adds=[(f"{BOARD}a.md", b"a"), (f"{BOARD}b.md", b"b")]))
    return ReadModel(store, BUCKET, clock, ttl_s=30, content_cache_max_bytes=1 << 20)


def _bodies(model: ReadModel) -> list[str]:
    records = model.records(sorted(model.entries(BOARD)), BOARD)
    return [record.body for _path, record in sorted(records.items())]


# -- cached-only reads -------------------------------------------------------------------
def test_a_warm_read_is_answered_from_the_caches(model: ReadModel) -> None:
    assert _bodies(model) == ["a", "b"]
    with cached_only():
        assert _bodies(model) == ["a", "b"]


def test_a_cold_listing_stops_before_listing(model: ReadModel, clock: FrozenClock) -> None:
    with cached_only(), pytest.raises(NotCached):
        model.entries(BOARD)
    assert model.listings == 0
    _bodies(model)
    clock.advance(31)  # past the TTL: the next read would list again
    with cached_only(), pytest.raises(NotCached):
        model.entries(BOARD)
    assert model.listings == 1


def test_a_cold_record_stops_before_reading(model: ReadModel) -> None:
    model.entries(BOARD)
    store = model._store
    with cached_only(), pytest.raises(NotCached):
        model.records([f"{BOARD}a.md"], BOARD)
    assert store.read_many_calls == 0  # type: ignore[attr-defined]
    assert model.record(f"{BOARD}a.md", BOARD) is not None  # outside the block it reads


def test_the_loop_answers_warm_reads_and_hands_cold_ones_to_a_thread(model: ReadModel) -> None:
    threads: list[int] = []

    def read() -> list[str]:
        threads.append(threading.get_ident())
        return _bodies(model)

    async def twice() -> tuple[list[str], list[str], int]:
        cold = await cached_or_threaded(read)  # stops at NotCached, then runs in a thread
        warm = await cached_or_threaded(read)
        return cold, warm, threading.get_ident()

    cold, warm, loop_thread = asyncio.run(twice())
    assert cold == warm == ["a", "b"]
    first_try, in_thread, warm_try = threads
    assert first_try == loop_thread and in_thread != loop_thread
    assert warm_try == loop_thread


# -- held doorbells ----------------------------------------------------------------------
def _longpoll() -> tuple[WaiterRegistry, ManualTimer, LongPoll]:
    clock = FrozenClock(datetime(2026, 3, 1, tzinfo=UTC))
    timer = ManualTimer(clock)
    registry = WaiterRegistry(clock)
    return registry, timer, LongPoll(registry, timer, clock)


async def _parked(registry: WaiterRegistry, count: int) -> None:
    for _ in range(200):
        if registry.stats()["parked"] >= count:
            return
        await asyncio.sleep(0)
    raise AssertionError("the waiters never parked")


@pytest.mark.parametrize("held", [True, False])
def test_a_held_wake_latches_at_once_and_rings_after_the_writers_bookkeeping(
    held: bool,
) -> None:
    """The writer's bookkeeping after the wake (a post records its answer) takes 0.3 s
    here. Held, the woken waiter answers only once the writer's block has ended; the
    broken variant (no hold) lets it answer in the middle of the bookkeeping. The mark
    is made by the writer itself, inside its block: a mark queued on the loop after the
    block would race the doorbells the block's end rings."""

    woken: frozenset[str] = frozenset()

    async def scenario() -> list[str]:
        registry, _timer, longpoll = _longpoll()
        inbox: list[str] = []
        order: list[str] = []

        async def check() -> dict[str, Any]:
            return {"items": list(inbox)}

        async def watch() -> None:
            page = await longpoll.watch(
                owner="agent-2", keys=["inbox:agent-2"], wait_s=30, check=check
            )
            order.append(f"answered {page['watch']['status']}")

        task = asyncio.create_task(watch())
        await _parked(registry, 1)

        def writer() -> None:
            nonlocal woken
            with registry.wakes_held() if held else contextlib.nullcontext():
                inbox.append("20260301-000000-000_agent-1.md")
                woken = registry.deliver(frozenset({"inbox:agent-2"}))
                time.sleep(0.3)  # the journal entry completing
                order.append("writer's bookkeeping done")

        await asyncio.to_thread(writer)
        await asyncio.wait_for(task, 5)
        return order

    order = asyncio.run(scenario())
    assert woken == {"agent-2"}  # decided by the wake, inside the block
    answers = ["writer's bookkeeping done", "answered delivered"]
    assert order == (answers if held else answers[::-1])


def test_a_waiter_whose_budget_ends_before_the_doorbell_still_answers_woken() -> None:
    async def scenario() -> str:
        registry, timer, longpoll = _longpoll()
        inbox: list[str] = []

        async def check() -> dict[str, Any]:
            return {"items": list(inbox)}

        task = asyncio.create_task(
            longpoll.watch(owner="agent-2", keys=["inbox:agent-2"], wait_s=30, check=check)
        )
        await _parked(registry, 1)
        with registry.wakes_held():
            inbox.append("20260301-000000-000_agent-1.md")
            registry.deliver(frozenset({"inbox:agent-2"}))
            timer.advance(31)  # the budget ends while the doorbell is held
            for _ in range(20):
                await asyncio.sleep(0)
        page = await asyncio.wait_for(task, 5)
        return str(page["watch"]["status"])

    assert asyncio.run(scenario()) == "delivered"


# -- one step per woken waiter -----------------------------------------------------------
@pytest.mark.parametrize("own_task", [False, True])
def test_each_woken_waiter_re_reads_and_answers_in_one_step(
    live: LiveWorld, monkeypatch: pytest.MonkeyPatch, own_task: bool
) -> None:
    """A broadcast wakes three parked inbox reads. The watch runs in the request's own
    task, so each waiter's re-read is followed at once by its answer: the first page goes
    out before the other waiters are read. The broken variant (the watch in a task of its
    own, awaited from the request's, as before) reads all three before it answers any."""
    handles = [live.agent(f"agent-{i}") for i in range(3)]
    organizer = live.organizer()
    events: list[tuple[str, int]] = []
    inbox = board.inbox_page

    def recorded_inbox(hub: Any, handle: str, query: Any) -> dict[str, Any]:
        page = inbox(hub, handle, query)
        if page["items"]:
            events.append(("read", threading.get_ident()))
        return page

    def recorded_answer(payload: dict[str, Any], status_code: int = 200) -> Any:
        if payload["items"]:
            events.append(("answer", threading.get_ident()))
        return json_answer(payload, status_code)

    monkeypatch.setattr(board, "inbox_page", recorded_inbox)
    monkeypatch.setattr(live_routes, "json_answer", recorded_answer)
    if own_task:
        watch = LongPoll.read

        async def in_its_own_task(self: LongPoll, **kwargs: Any) -> dict[str, Any]:
            return await asyncio.create_task(watch(self, **kwargs))

        monkeypatch.setattr(LongPoll, "read", in_its_own_task)
    parked = [live.park(f"/v1/inbox/{handle}?wait=30") for handle in handles]
    sent = live.client.post(
        "/v1/messages",
        json={"agent_id": organizer, "body": "all hands", "broadcast": True},
        headers=live.auth("boss"),
    )
    assert sent.status_code == 201, sent.text
    pages = [future.result(timeout=5).json() for future in parked]
    assert [page["watch"]["status"] for page in pages] == ["delivered"] * 3
    assert len({thread for _step, thread in events}) == 1  # all on the loop: warm reads
    steps = [step for step, _thread in events]
    one_step = ["read", "answer"] * 3
    assert steps == (["read"] * 3 + ["answer"] * 3 if own_task else one_step)
