"""Helpers for the live tests: an app whose long-poll timer is moved by hand, and parked
requests run on threads so a test can post, advance time, and collect the answer."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from agenthub.bucketsync.app import create_app
from agenthub.bucketsync.core.timers import ManualTimer
from agenthub.bucketsync.core.waiters import WaiterRegistry
from agenthub.bucketsync.identity.local import LocalIdentity
from agenthub.bucketsync.storage.local import LocalBucketStore
from agenthub.clock import FrozenClock
from tests.bucketsync.conftest import ORG, World, make_settings


class LiveWorld(World):
    def __init__(self, client: TestClient, app: Any, identity: LocalIdentity, timer: ManualTimer):
        super().__init__(client, app.state.hub, identity)
        self.timer = timer
        self.pool = ThreadPoolExecutor(max_workers=16)

    @property
    def registry(self) -> WaiterRegistry:
        assert self.hub.longpoll is not None
        return self.hub.longpoll.registry

    def park(self, url: str) -> Future[Any]:
        """Start a GET that is expected to park; returns once it has parked."""
        before = self.registry.counters.parks
        future = self.pool.submit(self.client.get, url)
        wait_for(lambda: self.registry.counters.parks > before or future.done())
        return future

    def organizer(self, name: str = "boss") -> str:
        self.user(name, role="admin")
        return f"human-{name}"

    def channel(self, name: str, body: str = "a theme", by: str = "boss") -> Any:
        if by not in self.tokens:
            self.user(by, role="admin")
        return self.client.post(
            "/v1/channels",
            json={"name": name, "agent_id": f"human-{by}", "body": body},
            headers=self.auth(by),
        )

    def subscribe(self, channel: str, agent_id: str, **extra: Any) -> Any:
        path = "sub.md"
        if self.put(agent_id, path, "subscribe").status_code not in (200, 201):
            raise AssertionError("could not write the subscription proof")
        return self.client.post(
            f"/v1/channels/{channel}/subscribe",
            json={"source": self.uri(agent_id, path), **extra},
        )


def wait_for(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.005)


def build_live_world(tmp_path: Path, clock: FrozenClock, **overrides: Any) -> Iterator[LiveWorld]:
    settings = make_settings(tmp_path / "data", **overrides)
    store = LocalBucketStore(settings.data_dir, clock=clock)
    identity = LocalIdentity(settings.data_dir / "users.json", org=ORG)
    timer = ManualTimer(clock)
    app = create_app(settings, store=store, identity=identity, clock=clock, timer=timer)
    with TestClient(app) as client:
        world = LiveWorld(client, app, identity, timer)
        try:
            yield world
        finally:
            timer.advance(3600)  # release anything still parked
            world.pool.shutdown(wait=True, cancel_futures=True)


@pytest.fixture
def live(tmp_path: Path, clock: FrozenClock) -> Iterator[LiveWorld]:
    yield from build_live_world(tmp_path, clock)


def sleepers_at_least(world: LiveWorld, count: int) -> Callable[[], bool]:
    """A `wait_for` condition: at least `count` requests sleep on the world's timer."""
    return lambda: world.timer.sleepers >= count


def degradations_reach(world: LiveWorld, count: int) -> Callable[[], bool]:
    """A `wait_for` condition: the registry has degraded `count` requests."""
    return lambda: world.registry.counters.degradations == count
