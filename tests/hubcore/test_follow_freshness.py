"""Freshness: the read mode and `/healthz` judge the copy by its lag, never call a stale
source fresh, and tell a one-time import apart from a followed copy."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from agenthub.clock import FrozenClock
from agenthub.hubcore.app import create_app
from agenthub.hubcore.apply import PageApplier
from agenthub.hubcore.settings import HubCoreSettings
from agenthub.hubcore.store import Database
from tests.hubcore.bundles import T0
from tests.hubcore.feedpages import m, page, start_cursor

TOKEN = "freshness-token"
PATH = "/ports/projections/statehub-inbox"


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock(T0)


@pytest.fixture
def client(hubcore_url: str, clock: FrozenClock) -> Iterator[TestClient]:
    settings = HubCoreSettings(
        database_url=hubcore_url,
        inbox_reads=True,
        operator_token=TOKEN,
        inbox_agent="state-hub",
        max_lag_s=30,
    )
    with TestClient(create_app(settings, clock=clock)) as test_client:
        yield test_client


def read(client: TestClient) -> dict[str, str]:
    response = client.get(
        PATH, params={"to_agent": "state-hub"}, headers={"Authorization": f"Bearer {TOKEN}"}
    )
    assert response.status_code == 200, response.text
    return dict(response.headers)


def followed(db: Database, clock: FrozenClock) -> None:
    """A copy a follower has brought to `source_time` = clock now."""
    start_cursor(db)
    source_time = clock.now().strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    PageApplier(db, clock).apply(page(m(1, 1), source_time=source_time))


def test_a_followed_copy_within_the_max_lag_reads_live(
    client: TestClient, hubcore_db: Database, clock: FrozenClock
) -> None:
    followed(hubcore_db, clock)
    clock.advance(12.5)
    headers = read(client)
    assert headers["x-hub-core-read-mode"] == "live"
    assert headers["x-hub-core-lag-seconds"] == "12.500"
    assert headers["x-hub-core-source-time"].startswith("2026-03-01T12:00:00")


def test_a_followed_copy_beyond_the_max_lag_reads_stale(
    client: TestClient, hubcore_db: Database, clock: FrozenClock
) -> None:
    followed(hubcore_db, clock)
    clock.advance(31)
    assert read(client)["x-hub-core-read-mode"] == "stale"
    health = client.get("/healthz").json()
    assert (health["mode"], health["status"], health["lag_seconds"]) == ("stale", "stale", 31.0)


def test_a_follower_error_turns_the_copy_stale_at_once(
    client: TestClient, hubcore_db: Database, clock: FrozenClock
) -> None:
    followed(hubcore_db, clock)
    PageApplier(hubcore_db, clock).record_error("falling_high_water: the source was restored")
    assert read(client)["x-hub-core-read-mode"] == "stale"
    assert client.get("/healthz").json()["last_error"].startswith("falling_high_water")


def test_healthz_reports_cursor_high_water_lag_and_mode(
    client: TestClient, hubcore_db: Database, clock: FrozenClock
) -> None:
    followed(hubcore_db, clock)
    clock.advance(2)
    health = client.get("/healthz").json()
    assert health["cursor"] == "v1:1" and health["high_water"] == "v1:1"
    assert health["source_epoch"] == "epoch-1" and health["source_instance"] == "hub-a"
    assert (health["mode"], health["lag_seconds"], health["last_error"]) == ("live", 2.0, None)


def test_a_copy_nobody_follows_is_neither_live_nor_stale_before_any_import(
    client: TestClient,
) -> None:
    assert read(client)["x-hub-core-read-mode"] == "snapshot-pilot"
    assert client.get("/healthz").json()["cursor"] is None
