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
# How long after the server starts the phase opens: more room on each try when a loaded
# machine's set-up (start, registration) outran the boundary.
AHEAD_S = (5.0, 15.0, 40.0)
PAST_S = 4.0  # the watch's long-poll runs this long past the boundary


def stamp(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


@contextmanager
def served(data_dir: Path, ahead_s: float) -> Iterator[tuple[World, datetime]]:
    """bucket-sync on the real clock, its one phase opening `ahead_s` after the start."""
    opens = datetime.now(UTC) + timedelta(seconds=ahead_s)
    phases = [{"name": "dev", "start": stamp(opens), "end": stamp(opens + timedelta(days=1))}]
    settings = make_settings(data_dir, CHALLENGE_PHASES=json.dumps(phases))
    clock = SystemClock()
    store = LocalBucketStore(settings.data_dir, clock=clock)
    identity = LocalIdentity(settings.data_dir / "users.json", org=ORG)
    app = create_app(settings, store=store, identity=identity, clock=clock)
    with TestClient(app) as client:
        yield World(client, app.state.hub, identity), opens


def watched_across_the_boundary(tmp_path: Path) -> dict[str, Any]:
    """The one request made after the agent joined: a watch parked before the boundary
    until PAST_S after it; its page, with `waited_s` and the `wait_s` it asked for."""
    for attempt, ahead_s in enumerate(AHEAD_S):
        with served(tmp_path / f"data{attempt}", ahead_s) as (world, opens):
            world.agent("ada")
            # Sent after the boundary, the watch itself would announce it (the request
            # path): try again with more room.
            left_s = (opens - datetime.now(UTC)).total_seconds()
            if left_s < 0.5:
                continue
            wait_s = left_s + PAST_S
            with ThreadPoolExecutor(1) as pool:
                started = time.monotonic()
                future = pool.submit(
                    world.client.get,
                    "/v1/updates",
                    params={"as": "ada", "wait": f"{wait_s:.1f}", "expand": "true"},
                )
                page: dict[str, Any] = future.result(timeout=wait_s + 30).json()
            return {**page, "waited_s": time.monotonic() - started, "wait_s": wait_s}
    raise AssertionError(f"set-up outran the boundary {len(AHEAD_S)} times")


def test_a_parked_watcher_hears_the_phase_open_at_the_boundary(tmp_path: Path) -> None:
    page = watched_across_the_boundary(tmp_path)

    assert [item["reasons"] for item in page["items"]] == [["phase:changed"]], page
    assert page["waited_s"] < page["wait_s"] - 2  # woken at the boundary, not at its end


def test_broken_variant_without_the_timer_the_watch_hears_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def idle(_hub: object) -> None:
        return None

    # Announced only by the first request after the boundary (issue 32's first form):
    # the parked watch came before it, so it runs out empty.
    monkeypatch.setattr(LIFESPAN, "announce_at_boundaries", idle)
    page = watched_across_the_boundary(tmp_path)

    assert page["items"] == []
