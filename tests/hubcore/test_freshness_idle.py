"""Freshness against a real, idle State Hub: the empty page that ends each long-poll is
contact, so a healthy idle source stays `live` even when the max lag is shorter than the
follower's configured wait; a source that stops answering turns `stale` within max lag."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

import httpx

from agenthub.hubcore import migrate as hubcore_migrate
from agenthub.hubcore.app import create_app as create_hubcore
from agenthub.hubcore.follower import FollowOptions
from agenthub.hubcore.settings import HubCoreSettings
from agenthub.statehub import migrate as statehub_migrate
from agenthub.statehub.app import create_app as create_statehub
from agenthub.statehub.settings import StateHubSettings
from tests.support.databases import migrated
from tests.support.servers import live_server

MAX_LAG_S = 2.0


def health(client: httpx.Client) -> dict[str, Any]:
    response = client.get("/healthz")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def wait_for_mode(client: httpx.Client, mode: str, within_s: float) -> float:
    """Seconds until `/healthz` says `mode`; fails the test after `within_s`."""
    start = time.monotonic()
    while (elapsed := time.monotonic() - start) < within_s:
        if health(client)["mode"] == mode:
            return elapsed
        time.sleep(0.1)
    raise AssertionError(f"not {mode} within {within_s}s: {health(client)}")


def test_an_idle_healthy_source_stays_live_and_a_silent_one_turns_stale(tmp_path: Path) -> None:
    statehub = create_statehub(
        StateHubSettings(
            database_url=migrated(f"sqlite:///{tmp_path / 'sh.db'}", statehub_migrate.upgrade),
            instance_label="idle-hub",
        )
    )
    with contextlib.ExitStack() as statehub_running:
        statehub_base = statehub_running.enter_context(live_server(statehub))
        settings = HubCoreSettings(
            database_url=migrated(f"sqlite:///{tmp_path / 'hc.db'}", hubcore_migrate.upgrade),
            statehub_url=statehub_base,
            max_lag_s=MAX_LAG_S,
            follow_wait_s=20,
        )
        with (
            live_server(create_hubcore(settings)) as hubcore_base,
            httpx.Client(base_url=hubcore_base) as client,
        ):
            wait_for_mode(client, "live", within_s=10)
            # Idle for several max lags (nothing is written), sampled often.
            until = time.monotonic() + 3 * MAX_LAG_S
            modes: list[str] = []
            while time.monotonic() < until:
                modes.append(health(client)["mode"])
                time.sleep(0.1)
            assert set(modes) == {"live"}, modes

            statehub_running.close()

            assert wait_for_mode(client, "stale", within_s=MAX_LAG_S + 1.5) <= MAX_LAG_S + 1.5


def test_the_long_poll_ends_within_half_the_max_lag() -> None:
    assert FollowOptions(wait_s=20, max_lag_s=2).poll_wait_s == 1
    assert FollowOptions(wait_s=0.5, max_lag_s=30).poll_wait_s == 0.5
    assert FollowOptions(wait_s=20).poll_wait_s == 20
