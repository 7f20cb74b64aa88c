"""The reach forecast of `POST /v1/messages` over real HTTP on the local store: a parked
watcher is `woken`, one that long-polled recently but is not parked is `next_poll`, a
never-watching or stale one is `unreachable` — for mentions, broadcasts and channel posts —
and the registry decides "parked" at the instant of the wake, not before it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from agenthub.bucketsync.core.timers import LoopTimer
from agenthub.bucketsync.core.waiters import WaiterRegistry
from agenthub.bucketsync.storage.base import FileEntry
from agenthub.clock import FrozenClock
from tests.bucketsync.coordination.conftest import ORGANIZER, Site


def post(site: Site, agent: str, body: str, **extra: Any) -> dict[str, Any]:
    answer = site.http.post("/v1/messages", json={"agent_id": agent, "body": body, **extra})
    assert answer.status_code == 201, answer.text
    return dict(answer.json())


def reach(answer: dict[str, Any]) -> dict[str, list[str]]:
    return dict(answer["reach"])


def park(site: Site, pool: ThreadPoolExecutor, handle: str) -> Future[httpx.Response]:
    """`handle` long-polls /v1/updates from its current cursor until the server parks it."""
    cursor = site.http.get("/v1/updates", params={"as": handle}).json()["cursor"]
    params = {"as": handle, "wait": "20"} | ({"after": cursor} if cursor else {})
    before = site.http.get("/v1/healthz").json()["longpoll"]["parked"]
    parked = pool.submit(site.http.get, "/v1/updates", params=params)
    site.parked(before + 1)
    return parked


def watch_once(site: Site, handle: str) -> None:
    """A `wait>0` read answered at once (mail is pending): presence is stamped, and the
    handle is not parked afterwards."""
    post(site, "agent-1" if handle != "agent-1" else "agent-2", f"ping @{handle}")
    page = site.http.get("/v1/updates", params={"as": handle, "wait": "5"}).json()
    assert page["watch"]["status"] == "delivered"


def test_a_parked_watcher_is_woken_and_gets_the_post(site: Site) -> None:
    with ThreadPoolExecutor(max_workers=1) as pool:
        parked = park(site, pool, "agent-2")
        answer = post(site, "agent-1", "@agent-2 the split is ready")
        page = parked.result(timeout=15).json()

    assert reach(answer) == {"woken": ["agent-2"], "next_poll": [], "unreachable": []}
    assert page["watch"]["status"] == "delivered"
    assert page["items"] == [answer["filename"]]


def test_a_recent_watcher_is_next_poll_and_a_stale_or_silent_one_unreachable(
    site: Site,
) -> None:
    watch_once(site, "agent-3")
    site.clock.advance(site.hub.settings.watch_fresh_s + 1)  # agent-3's stamp goes stale
    watch_once(site, "agent-2")

    answer = post(site, "agent-1", "@agent-2 @agent-3 @human-boss who is around?")

    assert answer["mentions_delivered"] == ["agent-2", "agent-3", "human-boss"]
    assert reach(answer) == {
        "woken": [],
        "next_poll": ["agent-2"],
        "unreachable": ["agent-3", "human-boss"],
    }


def test_a_board_post_without_recipients_reaches_nobody(site: Site) -> None:
    assert reach(post(site, "agent-1", "a note to the board")) == {
        "woken": [],
        "next_poll": [],
        "unreachable": [],
    }


def test_a_broadcast_reaches_every_registered_agent(site: Site) -> None:
    watch_once(site, "agent-2")
    with ThreadPoolExecutor(max_workers=1) as pool:
        parked = park(site, pool, "agent-1")
        answer = site.http.post(
            "/v1/messages",
            json={"agent_id": f"human-{ORGANIZER}", "body": "freeze at noon", "broadcast": True},
            headers=site.world.auth(ORGANIZER),
        )
        assert answer.status_code == 201, answer.text
        page = parked.result(timeout=15).json()

    assert reach(answer.json()) == {
        "woken": ["agent-1"],
        "next_poll": ["agent-2"],
        "unreachable": ["agent-3"],
    }
    assert answer.json()["filename"] in page["items"]


def test_a_directive_answer_carries_its_reach(site: Site) -> None:
    watch_once(site, "agent-3")
    answer = site.directive("report three decimals").json()
    assert reach(answer) == {
        "woken": [],
        "next_poll": ["agent-3"],
        "unreachable": ["agent-1", "agent-2"],
    }


def subscribe(site: Site, agent: str, channel: str, notify: str | None) -> None:
    assert site.world.put(agent, "sub.md", "join").status_code == 201
    body: dict[str, Any] = {"source": site.world.uri(agent, "sub.md")}
    if notify is not None:
        body["notify"] = notify
    answer = site.http.post(f"/v1/channels/{channel}/subscribe", json=body)
    assert answer.status_code == 200, answer.text


def test_a_channel_post_reaches_its_recipients_and_its_notify_all_members(site: Site) -> None:
    created = site.http.post(
        "/v1/channels",
        json={"name": "ideas", "agent_id": f"human-{ORGANIZER}", "body": "ideas"},
        headers=site.world.auth(ORGANIZER),
    )
    assert created.status_code == 201, created.text
    subscribe(site, "agent-2", "ideas", "all")
    subscribe(site, "agent-3", "ideas", None)  # notify: mentions — not woken by chatter
    with ThreadPoolExecutor(max_workers=1) as pool:
        parked = park(site, pool, "agent-2")
        chatter = post(site, "agent-1", "try a wheel of 30", channel="ideas")
        page = parked.result(timeout=15).json()
    mention = post(site, "agent-1", "@agent-3 yours?", channel="ideas")

    assert reach(chatter) == {"woken": ["agent-2"], "next_poll": [], "unreachable": []}
    assert page["items"] == [chatter["filename"]]
    # agent-2 long-polled moments ago; agent-3 (a recipient now) never did.
    assert reach(mention) == {"woken": [], "next_poll": ["agent-2"], "unreachable": ["agent-3"]}


def test_a_watcher_that_hung_up_is_not_woken(site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    """The subtle one: the watcher is parked when the post starts and hangs up while the
    post is being written. A forecast taken before the delivery (what /v1/watching showed
    then) says a waiter was there; the answer, decided by the wake itself, says next_poll."""
    registry = site.hub.longpoll.registry  # type: ignore[union-attr]
    fresh_s = site.hub.settings.watch_fresh_s
    seen_before: dict[str, Any] = {}
    write = site.hub.write_central

    def hang_up_during_the_write(adds: list[tuple[str, bytes]]) -> list[FileEntry]:
        if any(path.startswith("message_board/") for path, _ in adds):
            seen_before.update(registry.watching(fresh_s))
            deadline = time.monotonic() + 10
            while registry.stats()["waiters"]:
                assert time.monotonic() < deadline, "the hung-up waiter kept its slot"
                time.sleep(0.02)
        return write(adds)

    def hang_up() -> None:
        with pytest.raises(httpx.ReadTimeout):
            httpx.get(f"{site.base}/v1/updates?as=agent-2&wait=30", timeout=2.0)

    with ThreadPoolExecutor(max_workers=1) as pool:
        left = pool.submit(hang_up)
        site.parked(1)
        monkeypatch.setattr(site.hub, "write_central", hang_up_during_the_write)
        answer = post(site, "agent-1", "@agent-2 still there?")
        left.result(timeout=15)

    assert seen_before["agent-2"]["waiters"] == 1  # the broken, before-delivery view
    assert reach(answer) == {"woken": [], "next_poll": ["agent-2"], "unreachable": []}


# -- the registry's decision, at the instant of the wake ---------------------------------------
def registry() -> WaiterRegistry:
    return WaiterRegistry(FrozenClock(datetime(2026, 3, 1, tzinfo=UTC)))


async def _until(condition: Callable[[], bool]) -> None:
    for _ in range(200):
        if condition():
            return
        await asyncio.sleep(0.005)
    raise AssertionError("never happened")


def test_the_wake_reports_the_owner_of_a_parked_waiter() -> None:
    async def scenario() -> tuple[frozenset[str], str]:
        waiters = registry()
        waiter = waiters.register("agent-2", {"inbox:agent-2"})
        assert waiter is not None
        parked = asyncio.create_task(waiters.park(waiter, LoopTimer(), 5))
        await _until(lambda: waiters.stats()["parked"] == 1)
        woken = waiters.deliver(frozenset({"inbox:agent-2"}))
        outcome, _delay = await parked
        return woken, outcome

    assert asyncio.run(scenario()) == (frozenset({"agent-2"}), "woken")


def test_a_waiter_still_checking_is_latched_but_not_reported_woken() -> None:
    """Registered, not parked (its first check is running): the latch keeps the wake — its
    park returns at once — but its current answer may predate the post, so it is not
    promised as `woken` (it is `next_poll`)."""

    async def scenario() -> tuple[frozenset[str], str]:
        waiters = registry()
        waiter = waiters.register("agent-2", {"inbox:agent-2"})
        assert waiter is not None
        woken = waiters.deliver(frozenset({"inbox:agent-2"}))
        outcome, _delay = await waiters.park(waiter, LoopTimer(), 5)
        return woken, outcome

    assert asyncio.run(scenario()) == (frozenset(), "woken")


def test_a_parked_waiter_on_other_keys_is_not_woken() -> None:
    async def scenario() -> frozenset[str]:
        waiters = registry()
        waiter = waiters.register("agent-2", {"inbox:agent-2"})
        assert waiter is not None
        parked = asyncio.create_task(waiters.park(waiter, LoopTimer(), 0.2))
        await _until(lambda: waiters.stats()["parked"] == 1)
        woken = waiters.deliver(frozenset({"channel:ideas"}))
        await parked
        return woken

    assert asyncio.run(scenario()) == frozenset()


def test_discovery_documents_the_reach_states(site: Site) -> None:
    documented = site.http.get("/v1").json()["conventions"]["reach"]
    guide = site.http.get("/llms.txt").text

    assert set(documented) >= {"delivered_to", "woken", "next_poll", "unreachable"}
    assert documented["fresh_s"] == site.hub.settings.watch_fresh_s
    assert "reach: {woken, next_poll, unreachable}" in guide
