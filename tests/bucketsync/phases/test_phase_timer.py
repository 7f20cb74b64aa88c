"""A phase boundary is announced when it passes: a watcher parked on /v1/updates hears
`phase:changed` at the boundary though no other request comes (real clock, real sleep)."""

from __future__ import annotations

import importlib
import json
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from agenthub.bucketsync.app import create_app
from agenthub.bucketsync.identity.local import LocalIdentity
from agenthub.bucketsync.storage.local import LocalBucketStore
from agenthub.clock import SystemClock
from tests.bucketsync.conftest import ORG, World, make_settings

# The module (the package exports its function under the same name).
LIFESPAN = importlib.import_module("agenthub.bucketsync.app.lifespan")
AHEAD_S = 5.0  # the phase opens this long after the server starts
WAIT_S = AHEAD_S + 4  # the watch's long-poll


def stamp(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


@contextmanager
def served(tmp_path: Path) -> Iterator[tuple[World, datetime]]:
    """bucket-sync on the real clock, its one phase opening AHEAD_S after the start."""
    opens = datetime.now(UTC) + timedelta(seconds=AHEAD_S)
    phases = [{"name": "dev", "start": stamp(opens), "end": stamp(opens + timedelta(days=1))}]
    settings = make_settings(tmp_path / "data", CHALLENGE_PHASES=json.dumps(phases))
    clock = SystemClock()
    store = LocalBucketStore(settings.data_dir, clock=clock)
    identity = LocalIdentity(settings.data_dir / "users.json", org=ORG)
    app = create_app(settings, store=store, identity=identity, clock=clock)
    with TestClient(app) as client:
        yield World(client, app.state.hub, identity), opens


def parked_watch(world: World, opens: datetime) -> dict[str, Any]:
    """The one request made after the agent joined: a watch parked past the boundary."""
    world.agent("ada")
    # Sent after the boundary, the watch itself would announce it (the request path).
    assert datetime.now(UTC) < opens - timedelta(seconds=0.5), "set-up outran the boundary"
    with ThreadPoolExecutor(1) as pool:
        started = time.monotonic()
        future = pool.submit(
            world.client.get,
            "/v1/updates",
            params={"as": "ada", "wait": str(WAIT_S), "expand": "true"},
        )
        page: dict[str, Any] = future.result(timeout=30).json()
    page["waited_s"] = time.monotonic() - started
    return page


def test_a_parked_watcher_hears_the_phase_open_at_the_boundary(tmp_path: Path) -> None:
    with served(tmp_path) as (world, opens):
        page = parked_watch(world, opens)

    assert [item["reasons"] for item in page["items"]] == [["phase:changed"]], page
    assert page["waited_s"] < WAIT_S - 2  # woken at the boundary, not at the wait's end


def test_broken_variant_without_the_timer_the_watch_hears_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def idle(_hub: object) -> None:
        return None

    # Announced only by the first request after the boundary (issue 32's first form):
    # the parked watch came before it, so it runs out empty.
    monkeypatch.setattr(LIFESPAN, "announce_at_boundaries", idle)
    with served(tmp_path) as (world, opens):
        page = parked_watch(world, opens)

    assert page["items"] == []
