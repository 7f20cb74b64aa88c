"""Errors: unknown ids 404, malformed ids and bodies 422, bad slugs 422, no DELETE (405).

Every failed write must leave the database exactly as it was.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, text

from tests.statehub.conftest import Send

MISSING = str(uuid.uuid4())


def count_rows(engine: Engine) -> tuple[int, int]:
    with engine.connect() as conn:
        messages: int = conn.execute(text("select count(*) from agent_messages")).scalar_one()
        receipts: int = conn.execute(text("select count(*) from message_receipts")).scalar_one()
    return messages, receipts


def call(client: TestClient, method: str, path: str, **kwargs: Any) -> Any:
    return client.request(method, path, **kwargs)


ID_ROUTES = [
    ("GET", "/messages/{id}", {}),
    ("GET", "/messages/{id}/thread", {}),
    ("POST", "/messages/{id}/reply", {"json": {"from_agent": "bob", "body": "x"}}),
    ("PATCH", "/messages/{id}/read", {}),
    ("PATCH", "/messages/{id}/read", {"params": {"reader": "bob"}}),
    ("POST", "/messages/{id}/ack", {"params": {"agent": "bob"}}),
    ("PATCH", "/messages/{id}/archive", {}),
]


@pytest.mark.parametrize(("method", "path", "kwargs"), ID_ROUTES)
def test_unknown_id_is_404_with_a_hint(
    client: TestClient, engine: Engine, method: str, path: str, kwargs: dict[str, Any]
) -> None:
    response = call(client, method, path.format(id=MISSING), **kwargs)

    assert response.status_code == 404
    body = response.json()
    assert body["code"] == "not_found"
    assert MISSING in body["detail"]
    assert body["hint"]
    assert count_rows(engine) == (0, 0)


@pytest.mark.parametrize(("method", "path", "kwargs"), ID_ROUTES)
def test_malformed_id_is_422(
    client: TestClient, method: str, path: str, kwargs: dict[str, Any]
) -> None:
    response = call(client, method, path.format(id="not-a-uuid"), **kwargs)

    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["path", "message_id"]


VALID = {"from_agent": "alice", "to_agent": "bob", "subject": "s", "body": "b"}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"from_agent": None}, "from_agent"),
        ({"body": None}, "body"),
        ({"subject": None}, "subject"),
        ({"to_agent": None}, "to_agent"),
        ({"body": 7}, "body"),
        ({"thread_id": "nope"}, "thread_id"),
        ({"supersedes_id": "nope"}, "supersedes_id"),
        ({"expires_at": "tomorrow"}, "expires_at"),
        ({"kind": "Not A Kind"}, "kind"),
        ({"subject": "s" * 501}, "subject"),
        ({"priority": "high"}, "priority"),
    ],
)
def test_malformed_send_body_is_422_and_writes_nothing(
    client: TestClient, engine: Engine, change: dict[str, Any], field: str
) -> None:
    body = {k: v for k, v in {**VALID, **change}.items() if v is not None}

    response = client.post("/messages/", json=body)

    assert response.status_code == 422
    assert field in {part for error in response.json()["detail"] for part in error["loc"]}
    assert count_rows(engine) == (0, 0)


def test_non_json_body_is_422(client: TestClient) -> None:
    response = client.post(
        "/messages/", content=b"hello", headers={"content-type": "application/json"}
    )

    assert response.status_code == 422


@pytest.mark.parametrize("slug", ["Bob", "-bob", "bob-", "b ob", "bob!", "a" * 65, "", "*"])
def test_invalid_sender_slug_is_422_with_the_slug_rules(
    client: TestClient, engine: Engine, slug: str
) -> None:
    response = client.post("/messages/", json={**VALID, "from_agent": slug})

    assert response.status_code == 422
    assert "agent slugs are" in str(response.json()["detail"])
    assert count_rows(engine) == (0, 0)


@pytest.mark.parametrize("slug", ["Bob", "bob_", "**", "a" * 65, ""])
def test_invalid_recipient_slug_is_422(client: TestClient, engine: Engine, slug: str) -> None:
    response = client.post("/messages/", json={**VALID, "to_agent": slug})

    assert response.status_code == 422
    assert count_rows(engine) == (0, 0)


@pytest.mark.parametrize("slug", ["a", "a1", "agent.v2", "x_y-z", "a" * 64])
def test_valid_slugs_are_accepted(client: TestClient, slug: str) -> None:
    response = client.post("/messages/", json={**VALID, "from_agent": slug, "to_agent": slug})

    assert response.status_code == 201


def test_invalid_reader_slug_is_422_and_writes_nothing(
    client: TestClient, send: Send, engine: Engine
) -> None:
    broadcast = send(to_agent="*")

    response = client.patch(f"/messages/{broadcast['id']}/read", params={"reader": "Bob"})

    assert response.status_code == 422
    assert response.json()["hint"]
    assert count_rows(engine) == (1, 0)
    assert client.get(f"/messages/{broadcast['id']}").json()["read_at"] is None


def test_invalid_ack_agent_is_422_and_writes_nothing(
    client: TestClient, send: Send, engine: Engine
) -> None:
    broadcast = send(to_agent="*")

    response = client.post(f"/messages/{broadcast['id']}/ack", params={"agent": "*"})

    assert response.status_code == 422
    assert count_rows(engine) == (1, 0)


def test_ack_without_agent_is_422(client: TestClient, send: Send) -> None:
    broadcast = send(to_agent="*")

    assert client.post(f"/messages/{broadcast['id']}/ack").status_code == 422


def test_invalid_reply_sender_is_422_and_writes_nothing(
    client: TestClient, send: Send, engine: Engine
) -> None:
    original = send()

    response = client.post(
        f"/messages/{original['id']}/reply", json={"from_agent": "Bob!", "body": "x"}
    )

    assert response.status_code == 422
    assert count_rows(engine) == (1, 0)
    assert client.get(f"/messages/{original['id']}").json()["read_at"] is None


@pytest.mark.parametrize("param", ["to_agent", "from_agent"])
def test_invalid_list_slug_is_422(client: TestClient, param: str) -> None:
    response = client.get("/messages/", params={param: "Not Valid"})

    assert response.status_code == 422
    assert response.json()["hint"]


def test_list_without_to_or_from_agent_is_422_with_a_hint(client: TestClient) -> None:
    response = client.get("/messages/")

    assert response.status_code == 422
    assert "to_agent" in response.json()["detail"]
    assert "?to_agent=" in response.json()["hint"]


@pytest.mark.parametrize("limit", [0, 1001, -1, "many"])
def test_list_limit_out_of_range_is_422(client: TestClient, limit: int | str) -> None:
    response = client.get("/messages/", params={"to_agent": "bob", "limit": limit})

    assert response.status_code == 422


def test_list_limit_bounds_are_accepted(client: TestClient) -> None:
    for limit in (1, 1000):
        assert (
            client.get("/messages/", params={"to_agent": "bob", "limit": limit}).status_code == 200
        )


def test_thread_id_naming_a_missing_root_is_422_and_writes_nothing(
    client: TestClient, engine: Engine
) -> None:
    response = client.post("/messages/", json={**VALID, "thread_id": MISSING})

    assert response.status_code == 422
    assert response.json()["code"] == "invalid_request"
    assert "thread_id" in response.json()["detail"]
    assert response.json()["hint"]
    assert count_rows(engine) == (0, 0)


@pytest.mark.parametrize("path", ["/messages/{id}", "/messages/"])
def test_delete_is_405_and_the_message_stays(client: TestClient, send: Send, path: str) -> None:
    message = send()

    response = client.delete(path.format(id=message["id"]))

    assert response.status_code == 405
    assert client.get(f"/messages/{message['id']}").status_code == 200


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("PUT", "/messages/{id}"),
        ("POST", "/messages/{id}/read"),
        ("GET", "/messages/{id}/ack"),
        ("POST", "/messages/{id}/archive"),
        ("POST", "/state/health"),
    ],
)
def test_wrong_method_is_405(client: TestClient, send: Send, method: str, path: str) -> None:
    message = send()

    assert client.request(method, path.format(id=message["id"])).status_code == 405


def test_body_over_256_kib_is_422_and_writes_nothing(client: TestClient, engine: Engine) -> None:
    response = client.post("/messages/", json={**VALID, "body": "x" * (256 * 1024 + 1)})

    assert response.status_code == 422
    assert count_rows(engine) == (0, 0)


@pytest.mark.parametrize("field", ["subject", "body"])
def test_nul_character_in_text_is_422_on_every_database(
    client: TestClient, engine: Engine, field: str
) -> None:
    # PostgreSQL text cannot hold NUL; SQLite could, so both must refuse it up front.
    response = client.post("/messages/", json={**VALID, field: "before\x00after"})

    assert response.status_code == 422
    assert "NUL" in str(response.json()["detail"])
    assert count_rows(engine) == (0, 0)


@pytest.mark.parametrize("field", ["subject", "body"])
def test_nul_character_in_a_reply_is_422_and_writes_nothing(
    client: TestClient, send: Send, engine: Engine, field: str
) -> None:
    original = send()

    response = client.post(
        f"/messages/{original['id']}/reply",
        json={"from_agent": "bob", "body": "ok", field: "a\x00b"},
    )

    assert response.status_code == 422
    assert count_rows(engine) == (1, 0)


@pytest.mark.parametrize("expires_at", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:00:00-02:00"])
def test_expires_at_that_leaves_the_utc_calendar_is_422(
    client: TestClient, engine: Engine, expires_at: str
) -> None:
    response = client.post("/messages/", json={**VALID, "expires_at": expires_at})

    assert response.status_code == 422
    assert "expires_at" in {part for error in response.json()["detail"] for part in error["loc"]}
    assert count_rows(engine) == (0, 0)


@pytest.mark.parametrize("kind", ["a\x00b", "Not A Kind", "x" * 33])
def test_list_with_a_kind_no_message_can_have_is_422(client: TestClient, kind: str) -> None:
    response = client.get("/messages/", params={"to_agent": "bob", "kind": kind})

    assert response.status_code == 422
    assert response.json()["hint"]


# The design's slug rule, written out independently of the implementation's copy.
DESIGN_SLUG = re.compile(r"^[a-z0-9](?:[a-z0-9._-]{0,62}[a-z0-9])?$")


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(slug=st.text(alphabet="abz09._-A *\n\u00e9", max_size=70))
def test_a_sender_is_accepted_exactly_when_it_matches_the_design_slug_rule(
    client: TestClient, slug: str
) -> None:
    response = client.post("/messages/", json={**VALID, "from_agent": slug})

    assert response.status_code == (201 if DESIGN_SLUG.fullmatch(slug) else 422)
