"""`GET /ports/projections/statehub-inbox`: flag, auth, filters, headers, read-only."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import insert, select
from sqlalchemy.exc import DBAPIError

from agenthub.clock import FrozenClock
from agenthub.hubcore import import_snapshot
from agenthub.hubcore.app import create_app
from agenthub.hubcore.bundle_import import receiver_hashes
from agenthub.hubcore.errors import ConfigurationError
from agenthub.hubcore.models import ProjectedReceipt, ProjectedTombstone
from agenthub.hubcore.settings import HubCoreSettings
from agenthub.hubcore.store import Database
from tests.hubcore.bundles import T0, bundle, inbox_bundle, message, ts, uid

PATH = "/ports/projections/statehub-inbox"
TOKEN = "operator-s3cret"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def settings(url: str, **overrides: Any) -> HubCoreSettings:
    values: dict[str, Any] = {
        "database_url": url,
        "inbox_reads": True,
        "operator_token": TOKEN,
        "inbox_agent": "state-hub",
    }
    values.update(overrides)
    return HubCoreSettings(**values)


def load(db: Database, b: dict[str, Any]) -> None:
    with db.write() as session:
        import_snapshot(session, b, expected_hash=b["content_hash"], apply=True)


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock(T0 + timedelta(days=2))


@pytest.fixture
def client(hubcore_url: str, hubcore_db: Database, clock: FrozenClock) -> Iterator[TestClient]:
    load(hubcore_db, inbox_bundle())
    with TestClient(create_app(settings(hubcore_url), clock=clock)) as test_client:
        yield test_client


def receipt_rows(db: Database) -> list[tuple[Any, ...]]:
    with db.read_only() as session:
        rows = session.execute(select(ProjectedReceipt).order_by(ProjectedReceipt.message_id))
        return [
            (r.message_id, r.agent, r.delivered_at, r.read_at, r.acknowledged_at)
            for r in rows.scalars()
        ]


def ids(response: Any) -> list[str]:
    assert response.status_code == 200, response.text
    return [row["id"] for row in response.json()]


def test_endpoint_is_404_while_the_flag_is_off(hubcore_url: str) -> None:
    with TestClient(create_app(settings(hubcore_url, inbox_reads=False))) as client:
        assert client.get(PATH, params={"to_agent": "state-hub"}, headers=AUTH).status_code == 404
        assert client.post(PATH, headers=AUTH).status_code == 404


def test_a_request_without_a_token_is_401(client: TestClient) -> None:
    response = client.get(PATH, params={"to_agent": "state-hub"})
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert response.json()["code"] == "unauthenticated"


def test_a_wrong_token_is_401(client: TestClient) -> None:
    for header in (f"Bearer {TOKEN}x", f"Basic {TOKEN}", TOKEN, "Bearer "):
        response = client.get(
            PATH, params={"to_agent": "state-hub"}, headers={"Authorization": header}
        )
        assert response.status_code == 401, header


def test_the_server_refuses_to_enable_reads_without_a_token(hubcore_url: str) -> None:
    with pytest.raises(ConfigurationError, match="HUB_CORE_OPERATOR_TOKEN"):
        create_app(settings(hubcore_url, operator_token=None))
    with pytest.raises(ConfigurationError, match="HUB_CORE_OPERATOR_TOKEN"):
        create_app(settings(hubcore_url, operator_token=""))


def test_the_server_refuses_to_serve_the_broadcast_address_as_an_inbox(hubcore_url: str) -> None:
    with pytest.raises(ConfigurationError, match="name one agent"):
        create_app(settings(hubcore_url, inbox_agent="*"))
    with pytest.raises(ConfigurationError, match="name one agent"):
        create_app(settings(hubcore_url, inbox_agent=None))


def test_another_agents_inbox_is_403(client: TestClient) -> None:
    response = client.get(PATH, params={"to_agent": "alice"}, headers=AUTH)
    assert response.status_code == 403
    assert response.json()["code"] == "agent_not_served"


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE"])
def test_writes_are_405(client: TestClient, method: str) -> None:
    response = client.request(method, PATH, params={"to_agent": "state-hub"}, headers=AUTH)
    assert response.status_code == 405
    assert response.headers["allow"] == "GET"


@pytest.mark.parametrize("limit", [0, 1001, -5])
def test_a_limit_outside_1_to_1000_is_422(client: TestClient, limit: int) -> None:
    response = client.get(PATH, params={"to_agent": "state-hub", "limit": limit}, headers=AUTH)
    assert response.status_code == 422


def test_responses_are_uncacheable_and_say_they_are_a_snapshot(client: TestClient) -> None:
    response = client.get(PATH, params={"to_agent": "state-hub"}, headers=AUTH)
    assert response.headers["cache-control"] == "no-store"
    assert response.headers["x-hub-core-read-mode"] == "snapshot-pilot"
    assert response.headers["x-hub-core-source-instance"] == "statehub-test"
    assert response.headers["x-hub-core-source-time"].startswith("2026-03-02T04:40:00")
    assert float(response.headers["x-hub-core-lag-seconds"]) > 0


def test_inbox_holds_direct_and_broadcast_newest_first_without_archived(client: TestClient) -> None:
    got = ids(client.get(PATH, params={"to_agent": "state-hub"}, headers=AUTH))
    assert got == [uid(7), uid(4), uid(3), uid(1)]


def test_unread_broadcast_follows_the_readers_receipt(client: TestClient) -> None:
    got = ids(client.get(PATH, params={"to_agent": "state-hub", "unread_only": True}, headers=AUTH))
    # 3 is a broadcast state-hub read (its receipt); 4 was read only by bob; 7 is a read direct.
    assert got == [uid(4), uid(1)]


def test_peek_is_accepted_and_reads_the_same_unread_set(
    client: TestClient, hubcore_db: Database
) -> None:
    params: dict[str, str | bool] = {"to_agent": "state-hub", "unread_only": True}
    before = receipt_rows(hubcore_db)

    peeked = ids(client.get(PATH, params={**params, "peek": True}, headers=AUTH))

    assert peeked == ids(client.get(PATH, params=params, headers=AUTH)) == [uid(4), uid(1)]
    assert receipt_rows(hubcore_db) == before


def test_from_agent_is_an_exact_match(client: TestClient) -> None:
    params = {"to_agent": "state-hub", "from_agent": "ops"}
    assert ids(client.get(PATH, params=params, headers=AUTH)) == [uid(4), uid(3)]
    params["from_agent"] = "op"
    assert ids(client.get(PATH, params=params, headers=AUTH)) == []


def test_limit_keeps_the_newest(client: TestClient) -> None:
    params: dict[str, str | int] = {"to_agent": "state-hub", "limit": 1}
    assert ids(client.get(PATH, params=params, headers=AUTH)) == [uid(7)]


def test_rows_carry_every_message_read_field(client: TestClient) -> None:
    rows = client.get(PATH, params={"to_agent": "state-hub"}, headers=AUTH).json()
    assert rows[0] == {
        "id": uid(7),
        "from_agent": "bob",
        "to_agent": "state-hub",
        "subject": "subject 7",
        "body": "body 7",
        "thread_id": None,
        "read_at": "2026-03-01T12:08:00Z",
        "archived_at": None,
        "kind": "message",
        "expires_at": None,
        "supersedes_id": None,
        "created_at": "2026-03-01T12:07:00Z",
    }


def test_expired_messages_are_hidden_at_read_time(
    hubcore_url: str, hubcore_db: Database, clock: FrozenClock
) -> None:
    now = clock.now()
    load(
        hubcore_db,
        bundle(
            [
                message(1, kind="news", expires_at=ts(60 * 24 * 2 + 1)),
                message(2, kind="news", expires_at=ts(60 * 24 * 2)),
            ]
        ),
    )
    assert ts(60 * 24 * 2) == now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    with TestClient(create_app(settings(hubcore_url), clock=clock)) as client:
        assert ids(client.get(PATH, params={"to_agent": "state-hub"}, headers=AUTH)) == [uid(1)]
        clock.advance(61)
        assert ids(client.get(PATH, params={"to_agent": "state-hub"}, headers=AUTH)) == []


def test_created_at_ties_break_by_id_descending(
    hubcore_url: str, hubcore_db: Database, clock: FrozenClock
) -> None:
    load(hubcore_db, bundle([message(n, created_at=ts(5)) for n in (3, 1, 2)]))
    with TestClient(create_app(settings(hubcore_url), clock=clock)) as client:
        got = ids(client.get(PATH, params={"to_agent": "state-hub"}, headers=AUTH))
    assert got == [uid(3), uid(2), uid(1)]


def test_disable_then_reenable_serves_the_same_rows_and_hash(
    hubcore_url: str, hubcore_db: Database, clock: FrozenClock
) -> None:
    b = inbox_bundle()
    load(hubcore_db, b)
    params = {"to_agent": "state-hub"}
    with TestClient(create_app(settings(hubcore_url), clock=clock)) as client:
        before = client.get(PATH, params=params, headers=AUTH).json()
    with TestClient(create_app(settings(hubcore_url, inbox_reads=False), clock=clock)) as client:
        assert client.get(PATH, params=params, headers=AUTH).status_code == 404
    with TestClient(create_app(settings(hubcore_url), clock=clock)) as client:
        after = client.get(PATH, params=params, headers=AUTH).json()
    assert before == after and len(after) == 4
    with hubcore_db.read_only() as session:
        assert receiver_hashes(session)["content_hash"] == b["content_hash"]


def test_reads_run_in_a_transaction_the_database_refuses_to_write(hubcore_db: Database) -> None:
    row = {"message_id": uuid.uuid4(), "revision": 1, "deleted_at": T0}
    with pytest.raises(DBAPIError), hubcore_db.read_only() as session:
        session.execute(insert(ProjectedTombstone), [row])
    with hubcore_db.write() as session:
        session.execute(insert(ProjectedTombstone), [row])
