"""Long-poll (seed §13): parking, waking, budgets, caps and presence — with time moved by
hand (`ManualTimer`), so no test sleeps for a real budget."""

from __future__ import annotations

import asyncio
import random
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from agenthub.bucketsync.core.longpoll import LongPoll
from agenthub.bucketsync.core.notify import wake_keys
from agenthub.bucketsync.core.timers import LoopTimer, ManualTimer, resolve_future
from agenthub.bucketsync.core.waiters import WaiterRegistry
from agenthub.clock import FrozenClock
from tests.bucketsync.live_support import (
    LiveWorld,
    build_live_world,
    degradations_reach,
    live,
    sleepers_at_least,
    wait_for,
)

__all__ = ["live"]


def _newest(world: LiveWorld, handle: str) -> str:
    return str(world.client.get(f"/v1/inbox/{handle}").json()["cursor"] or "0")


@pytest.fixture
def pair(live: LiveWorld) -> LiveWorld:
    live.agent("agent-1")
    live.agent("agent-2")
    return live


def test_bs_13_1_wait_parks_the_inbox_until_a_mention_arrives(pair: LiveWorld) -> None:
    parked = pair.park("/v1/inbox/agent-2?wait=30&expand=true")
    assert not parked.done()
    posted = pair.raw("agent-1", "hi @agent-2").json()
    page = parked.result(timeout=5).json()
    assert [item["filename"] for item in page["items"]] == [posted["filename"]]
    assert page["watch"]["status"] == "delivered"


def test_bs_13_1_wait_is_accepted_on_feed_and_updates(pair: LiveWorld) -> None:
    pair.channel("ideas")
    pair.subscribe("ideas", "agent-2", notify="all")
    feed = pair.park("/v1/channels/feed?as=agent-2&wait=30")
    updates = pair.park("/v1/updates?as=agent-2&wait=30")
    pair.raw("agent-1", "in the room", channel="ideas")
    assert feed.result(timeout=5).json()["watch"]["status"] == "delivered"
    assert updates.result(timeout=5).json()["watch"]["status"] == "delivered"


def test_bs_13_2_wait_is_clamped_to_the_max_never_rejected(pair: LiveWorld) -> None:
    parked = pair.park("/v1/inbox/agent-2?wait=999")
    pair.timer.advance(54.9)
    wait_for(lambda: pair.timer.sleepers > 0)
    assert not parked.done()
    pair.timer.advance(0.2)
    page = parked.result(timeout=5).json()
    assert page["watch"]["status"] == "timeout"
    assert 55_000 <= page["watch"]["waited_ms"] <= 55_200


def test_bs_13_2_negative_wait_is_a_plain_poll(pair: LiveWorld) -> None:
    response = pair.client.get("/v1/inbox/agent-2?wait=-5")
    assert response.status_code == 200
    assert response.json()["watch"] is None
    assert pair.client.get("/v1/inbox/agent-2?wait=soon").json()["error"]["code"] == (
        "INVALID_QUERY"
    )


def test_bs_13_3_wait_with_before_is_invalid_but_before_alone_works(pair: LiveWorld) -> None:
    bad = pair.client.get("/v1/inbox/agent-2?wait=5&before=20260301-120000-000_x.md")
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "INVALID_QUERY"
    assert pair.client.get("/v1/inbox/agent-2?before=20260301-120000-000_x.md").status_code == 200


def test_bs_13_4_same_shape_with_a_watch_block_only_when_waiting(pair: LiveWorld) -> None:
    plain = pair.client.get("/v1/inbox/agent-2").json()
    assert plain["watch"] is None
    parked = pair.park("/v1/inbox/agent-2?wait=10")
    pair.timer.advance(10)
    watched = parked.result(timeout=5).json()
    assert set(watched) == set(plain)
    assert watched["watch"] == {"status": "timeout", "waited_ms": 10_000}


def test_bs_13_5_bs_13_11_fifth_waiter_evicts_the_owners_oldest(pair: LiveWorld) -> None:
    first = pair.park("/v1/inbox/agent-2?wait=30")
    others = [pair.park("/v1/inbox/agent-2?wait=30") for _ in range(3)]
    assert not first.done()
    fifth = pair.pool.submit(pair.client.get, "/v1/inbox/agent-2?wait=30")
    evicted = first.result(timeout=5)
    assert evicted.status_code == 200
    assert evicted.json()["items"] == [] and evicted.json()["watch"]["status"] == "evicted"
    assert all(not f.done() for f in others)
    assert pair.registry.counters.evictions == 1
    pair.timer.advance(31)
    assert fifth.result(timeout=5).json()["watch"]["status"] == "timeout"


async def _lost_wakeup_scenario(*, register_first: bool) -> str:
    """A write lands after the first check and before the park (the classic lost wakeup)."""
    clock = FrozenClock(datetime(2026, 3, 1, tzinfo=UTC))
    timer = ManualTimer(clock)
    registry = WaiterRegistry(clock)
    longpoll = LongPoll(registry, timer, clock)
    inbox: list[str] = []
    checks = 0

    async def check() -> dict[str, Any]:
        nonlocal checks
        checks += 1
        page = {"items": list(inbox)}
        if checks == 1:
            inbox.append("20260301-000000-000_agent-1.md")  # W1: the write…
            registry.wake({"inbox:agent-2"})  # W2: …then its wake, before we park
        return page

    if register_first:
        task = asyncio.create_task(
            longpoll.watch(owner="agent-2", keys=["inbox:agent-2"], wait_s=30, check=check)
        )
    else:
        # The broken order: check, then register and park.
        async def broken() -> dict[str, Any]:
            page = await check()
            if page["items"]:
                return {**page, "watch": {"status": "delivered"}}
            waiter = registry.register("agent-2", ["inbox:agent-2"])
            assert waiter is not None
            outcome, _ = await registry.park(waiter, timer, 30)
            return {"items": list(inbox), "watch": {"status": outcome}}

        task = asyncio.create_task(broken())
    for _ in range(50):
        await asyncio.sleep(0)
    if not task.done():
        timer.advance(30)
    page = await task
    return str(page["watch"]["status"])


def test_bs_13_6_a_wake_between_check_and_park_is_not_lost() -> None:
    assert asyncio.run(_lost_wakeup_scenario(register_first=True)) == "delivered"


def test_bs_13_6_the_check_then_register_variant_loses_the_wake() -> None:
    assert asyncio.run(_lost_wakeup_scenario(register_first=False)) == "timeout"


def test_bs_13_7_the_writer_wakes_only_after_the_write_through(pair: LiveWorld) -> None:
    seen: list[int] = []

    def listener(keys: frozenset[str]) -> None:
        seen.append(pair.client.get("/v1/inbox/agent-2").json()["count"])

    pair.hub.notifier.subscribe(listener)  # type: ignore[union-attr]
    pair.raw("agent-1", "hi @agent-2")
    assert seen == [1]


def test_bs_13_8_wake_keys_by_kind_of_post() -> None:
    assert wake_keys(broadcast=True, recipients=["a"], channel=None) == ["*"]
    assert wake_keys(broadcast=False, recipients=["a"], channel="ideas") == [
        "inbox:a",
        "channel:ideas",
    ]
    assert wake_keys(broadcast=False, recipients=["a", "b"], channel=None) == [
        "inbox:a",
        "inbox:b",
    ]
    assert wake_keys(broadcast=False, recipients=[], channel=None) == []


def test_bs_13_8_a_board_post_without_recipients_wakes_nobody(pair: LiveWorld) -> None:
    parked = pair.park("/v1/inbox/agent-2?wait=30")
    pair.raw("agent-1", "nobody in particular")
    assert pair.registry.counters.wakes == 0 and not parked.done()
    pair.timer.advance(30)
    assert parked.result(timeout=5).json()["watch"]["status"] == "timeout"


def test_bs_13_8_a_broadcast_wakes_every_waiter(pair: LiveWorld) -> None:
    pair.organizer("boss")
    waiting = [pair.park(f"/v1/inbox/{h}?wait=30") for h in ("agent-1", "agent-2")]
    sent = pair.client.post(
        "/v1/messages",
        json={"agent_id": "human-boss", "body": "all hands", "broadcast": True},
        headers=pair.auth("boss"),
    )
    assert sent.status_code == 201
    for parked in waiting:
        assert parked.result(timeout=5).json()["watch"]["status"] == "delivered"


def test_bs_13_9_a_spurious_wake_reparks_on_the_remaining_budget(pair: LiveWorld) -> None:
    parked = pair.park("/v1/inbox/agent-2?wait=30&type=question")
    pair.timer.advance(10)
    pair.raw("agent-1", "fyi @agent-2", type="note")
    wait_for(lambda: pair.registry.counters.parks == 2)
    assert not parked.done()
    pair.timer.advance(19.9)
    wait_for(lambda: pair.timer.sleepers > 0)
    assert not parked.done()
    pair.timer.advance(0.1)
    page = parked.result(timeout=5).json()
    assert page["watch"] == {"status": "timeout", "waited_ms": 30_000}


def test_bs_13_10_posting_works_without_a_notifier(pair: LiveWorld) -> None:
    pair.hub.notifier = None
    response = pair.raw("agent-1", "offline @agent-2")
    assert response.status_code == 201
    assert pair.client.get("/v1/inbox/agent-2").json()["count"] == 1


def test_bs_13_12_over_the_total_cap_requests_are_held_then_degraded(
    tmp_path: Path, clock: FrozenClock
) -> None:
    for world in build_live_world(tmp_path, clock, LONGPOLL_MAX_WAITERS_TOTAL="1"):
        world.agent("agent-1")
        world.agent("agent-2")
        holder = world.park("/v1/inbox/agent-1?wait=50")
        shed = world.pool.submit(world.client.get, "/v1/inbox/agent-2?wait=50")
        wait_for(degradations_reach(world, 1))
        wait_for(sleepers_at_least(world, 2))
        world.timer.advance(4.9)  # the hold is at least 5 s
        wait_for(sleepers_at_least(world, 2))
        assert not shed.done()
        world.timer.advance(10.2)  # and at most 15 s
        page = shed.result(timeout=5).json()
        assert page["watch"]["status"] == "degraded"
        assert 5_000 <= page["watch"]["waited_ms"] <= 15_100
        assert world.registry.stats()["waiters"] == 1  # no slot was given
        world.timer.advance(60)
        holder.result(timeout=5)


def test_bs_13_13_a_feed_with_no_subscriptions_never_parks(pair: LiveWorld) -> None:
    page = pair.client.get("/v1/channels/feed?as=agent-2&wait=30").json()
    assert page["watch"]["status"] == "no_streams"
    assert pair.registry.counters.parks == 0


async def _spread_delays(waiters: int) -> list[float]:
    clock = FrozenClock()
    registry = WaiterRegistry(clock, max_per_owner=100, max_total=1000, rng=random.Random(7))
    parked = [registry.register(f"agent-{i}", ["inbox:x"]) for i in range(waiters)]
    timer = ManualTimer(clock)
    tasks = [asyncio.create_task(registry.park(w, timer, 30)) for w in parked if w]
    await asyncio.sleep(0)
    registry.wake({"*"})
    outcomes = await asyncio.gather(*tasks)
    assert {outcome for outcome, _ in outcomes} == {"woken"}
    return [delay for _, delay in outcomes]


def test_bs_13_14_wakes_past_the_threshold_are_spread() -> None:
    assert asyncio.run(_spread_delays(20)) == [0.0] * 20
    delays = asyncio.run(_spread_delays(21))
    assert all(0.0 <= d <= 8.0 for d in delays)
    assert len(set(delays)) == 21 and max(delays) > 4.0


def test_bs_13_14_a_spread_wake_answers_after_its_delay(tmp_path: Path, clock: FrozenClock) -> None:
    for world in build_live_world(tmp_path, clock, LONGPOLL_WAKE_SPREAD_THRESHOLD="0"):
        world.agent("agent-1")
        world.agent("agent-2")
        parked = world.park("/v1/inbox/agent-2?wait=30")
        world.raw("agent-1", "hey @agent-2")
        wait_for(sleepers_at_least(world, 1))
        assert not parked.done()
        world.timer.advance(8)
        assert parked.result(timeout=5).json()["watch"]["status"] == "delivered"


def test_bs_13_15_healthz_exposes_longpoll_counters(pair: LiveWorld) -> None:
    parked = pair.park("/v1/inbox/agent-2?wait=30")
    counters = pair.client.get("/v1/healthz").json()["longpoll"]
    assert {"waiters", "owners", "parks", "wakes", "evictions", "degradations"} <= set(counters)
    assert counters["waiters"] == 1 and counters["owners"] == 1 and counters["parks"] == 1
    pair.raw("agent-1", "@agent-2 hi")
    parked.result(timeout=5)
    assert pair.client.get("/v1/healthz").json()["longpoll"]["wakes"] == 1


def test_bs_13_16_a_fabricated_handle_is_refused_before_parking(pair: LiveWorld) -> None:
    response = pair.client.get("/v1/inbox/ghost-agent?wait=30")
    assert response.status_code == 404
    assert pair.registry.stats()["waiters"] == 0 and pair.registry.counters.parks == 0
    assert pair.client.get("/v1/watching").json()["watching"] == {}


def test_bs_13_19_updates_always_holds_the_inbox_key(pair: LiveWorld) -> None:
    parked = pair.park("/v1/updates?as=agent-2&wait=20")
    pair.timer.advance(20)
    assert parked.result(timeout=5).json()["watch"]["status"] == "timeout"


def test_bs_13_24_no_read_receipts_the_cursor_is_the_only_position(pair: LiveWorld) -> None:
    sent = pair.raw("agent-1", "@agent-2 once").json()["filename"]
    first = pair.client.get("/v1/inbox/agent-2?wait=5").json()
    again = pair.client.get("/v1/inbox/agent-2?wait=5").json()
    assert first["items"] == again["items"] == [sent]
    parked = pair.park(f"/v1/inbox/agent-2?wait=5&after={first['cursor']}")
    pair.timer.advance(5)
    assert parked.result(timeout=5).json()["items"] == []


def test_bs_13_25_bs_13_28_compact_json_with_items_before_cursor(pair: LiveWorld) -> None:
    pair.raw("agent-1", "@agent-2 a")
    newest = pair.raw("agent-1", "@agent-2 b").json()["filename"]
    text = pair.client.get("/v1/inbox/agent-2?wait=5").text
    assert "\n" not in text and ", " not in text.split('"items"')[0]
    assert text.index('"items":') < text.index('"cursor":')
    assert f'"cursor":"{newest}"' in text


def test_bs_13_29_digest_watching_block_reports_presence(pair: LiveWorld) -> None:
    assert pair.client.get("/v1/digest?as=agent-2").json()["watching"] is None
    parked = pair.park("/v1/inbox/agent-2?wait=30")
    pair.timer.advance(30)
    parked.result(timeout=5)
    watching = pair.client.get("/v1/digest?as=agent-2").json()["watching"]
    assert watching == {"last_poll_age_s": 30, "mode": "parked", "stream": "inbox"}
    assert isinstance(watching["last_poll_age_s"], int)
    pair.timer.advance(241)
    assert pair.client.get("/v1/digest?as=agent-2").json()["watching"] is None


def test_bs_13_31_watching_lists_every_handle_with_counters(pair: LiveWorld) -> None:
    parked = pair.park("/v1/updates?as=agent-2&wait=30")
    body = pair.client.get("/v1/watching").json()
    assert body["max_wait_s"] == 55.0 and body["fresh_s"] == 240.0
    assert body["watching"] == {
        "agent-2": {"last_poll_age_s": 0, "mode": "parked", "stream": "updates", "waiters": 1}
    }
    assert body["longpoll"]["waiters"] == 1
    pair.timer.advance(30)
    parked.result(timeout=5)


def test_bs_13_41_non_goals_no_push_transports_and_no_wait_above_55(pair: LiveWorld) -> None:
    from starlette.routing import WebSocketRoute

    app = pair.client.app
    assert not any(isinstance(route, WebSocketRoute) for route in app.routes)  # type: ignore[attr-defined]
    paths = {e["path"] for e in pair.client.get("/v1").json()["endpoints"]}
    assert not any(word in p for p in paths for word in ("sse", "events", "webhook", "ws"))
    assert pair.hub.longpoll is not None and pair.hub.longpoll.clamp(3600) == 55.0


# -- the loop timer ----------------------------------------------------------------------
def test_the_loop_timer_tells_a_rung_future_from_its_deadline() -> None:
    """`LoopTimer.wait` awaits the doorbell itself: True when it is rung, False at the
    deadline, and nothing left scheduled either way."""

    async def scenario() -> tuple[bool, bool, bool, float]:
        loop = asyncio.get_running_loop()
        timer = LoopTimer()
        rung: asyncio.Future[None] = loop.create_future()
        loop.call_later(0.01, rung.set_result, None)
        started = loop.time()
        woken = await timer.wait(rung, 30)
        took = loop.time() - started
        expired = await timer.wait(loop.create_future(), 0.01)
        done: asyncio.Future[None] = loop.create_future()
        done.set_result(None)
        already = await timer.wait(done, 0)
        return woken, expired, already, took

    woken, expired, already, took = asyncio.run(scenario())
    assert (woken, expired, already) == (True, False, True)
    assert took < 5  # rung, not waited out


def test_a_cancelled_loop_timer_wait_cancels_its_future_and_its_deadline() -> None:
    """A client hanging up cancels the parked task: its doorbell future is cancelled (a
    later ring skips it) and its deadline does not fire afterwards."""

    async def scenario() -> tuple[bool, int]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        task = asyncio.create_task(LoopTimer().wait(future, 0.05))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        resolve_future(future)  # a ring after the hang-up is a no-op
        await asyncio.sleep(0.1)  # past the deadline: nothing fires
        return future.cancelled(), len(loop._scheduled)  # type: ignore[attr-defined]

    cancelled, scheduled = asyncio.run(scenario())
    assert cancelled
    assert scheduled == 0


def test_the_registry_counts_its_waiters_as_they_come_and_go() -> None:
    """The total behind the process cap is kept as waiters register, are evicted and
    leave (it was a sum over every owner on each registration)."""
    registry = WaiterRegistry(FrozenClock(datetime(2026, 1, 1, tzinfo=UTC)), max_per_owner=2)
    rng = random.Random(7)

    def brute() -> int:
        return sum(len(ws) for ws in registry._by_owner.values())

    async def scenario() -> None:
        held: list[Any] = []
        for _ in range(400):
            if held and rng.random() < 0.4:
                registry.unregister(held.pop(rng.randrange(len(held))))
            else:
                waiter = registry.register(f"agent-{rng.randrange(6)}", ["k"])
                if waiter is not None:
                    held.append(waiter)
            assert registry.stats()["waiters"] == brute()
        for waiter in held:  # evicted ones included: unregistering twice is harmless
            registry.unregister(waiter)
        assert registry.stats()["waiters"] == brute() == 0

    asyncio.run(scenario())
