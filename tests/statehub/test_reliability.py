"""Every State Hub error is JSON in its shape; input JSON cannot carry is a 422, not a
500; 405 names the allowed methods; `Idempotency-Key` answers a POST once per key, on
both databases, across a restart and under concurrent duplicates."""

from __future__ import annotations

import http.client
import json
import threading
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text

from agenthub.clock import FrozenClock
from agenthub.statehub.app import create_app
from agenthub.statehub.inbox import InboxService
from agenthub.statehub.settings import StateHubSettings
from tests.support.servers import live_server

VALID = {"from_agent": "alice", "to_agent": "bob", "subject": "s", "body": "b"}
# What JSON text can say but a JSON answer cannot echo: a lone surrogate, NaN, and a
# number too large for a float (Python reads it as infinity).
UNSENDABLE = ['"\\ud800"', '"a\\udfffb"', "NaN", "-Infinity", "1e999"]
FIELDS = ["from_agent", "to_agent", "subject", "body", "kind", "thread_id", "expires_at", "extra"]


def raw_body(field: str, literal: str) -> bytes:
    pairs = [f'"{name}": "{value}"' for name, value in VALID.items() if name != field]
    pairs.append(f'"{field}": {literal}')
    return ("{" + ", ".join(pairs) + "}").encode()


def message_count(engine: Engine) -> int:
    with engine.connect() as conn:
        count: int = conn.execute(text("select count(*) from agent_messages")).scalar_one()
    return count


@pytest.mark.parametrize("literal", UNSENDABLE)
@pytest.mark.parametrize("field", FIELDS)
def test_input_json_cannot_echo_is_a_json_422(
    client: TestClient, engine: Engine, field: str, literal: str
) -> None:
    response = client.post(
        "/messages/", content=raw_body(field, literal), headers={"content-type": "application/json"}
    )

    assert response.status_code == 422, response.text
    body = response.json()
    assert body["code"] == "invalid_request"
    assert body["detail"][0]["loc"] == ["body", field]
    assert message_count(engine) == 0


@pytest.mark.parametrize("literal", UNSENDABLE)
def test_a_reply_with_unsendable_input_is_a_json_422(client: TestClient, literal: str) -> None:
    sent = client.post("/messages/", json=VALID).json()

    response = client.post(
        f"/messages/{sent['id']}/reply",
        content=f'{{"from_agent": "bob", "body": {literal}}}'.encode(),
        headers={"content-type": "application/json"},
    )

    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "body"]


# Fixed, not drawn per run: parallel workers must collect the same test ids.
ABSENT_ID = "5e1f0c2a-7b3d-4e8f-9a60-1c2d3e4f5a6b"


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("DELETE", "/messages/", "GET, POST"),
        ("PUT", f"/messages/{ABSENT_ID}", "GET"),
        ("POST", f"/messages/{ABSENT_ID}/read", "PATCH"),
        ("GET", f"/messages/{ABSENT_ID}/ack", "POST"),
        ("POST", "/messages/feed", "GET"),
    ],
)
def test_a_wrong_method_is_a_json_405_naming_every_allowed_method(
    client: TestClient, method: str, path: str, allow: str
) -> None:
    response = client.request(method, path)

    assert response.status_code == 405
    assert response.headers["allow"] == allow
    assert response.json()["code"] == "method_not_allowed"


def test_an_unknown_route_is_a_json_404(client: TestClient) -> None:
    response = client.get("/nowhere")

    assert response.status_code == 404
    assert response.json() == {"detail": "Not Found", "code": "not_found"}


def test_an_unexpected_failure_is_a_json_500_and_the_connection_stays_usable(
    settings: StateHubSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(_self: InboxService, *_args: Any) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(InboxService, "send", broken)
    with live_server(create_app(settings)) as base:
        conn = http.client.HTTPConnection(base.removeprefix("http://"), timeout=10)
        conn.request("POST", "/messages/", json.dumps(VALID), {"content-type": "application/json"})
        failed = conn.getresponse()
        failed_body = json.loads(failed.read())
        socket_before = conn.sock
        # The same keep-alive connection carries the next request.
        conn.request("GET", "/messages/?to_agent=bob")
        after = conn.getresponse()
        after.read()
        socket_after = conn.sock
        conn.close()

    assert failed.status == 500
    assert failed_body["code"] == "internal_error"
    assert after.status == 200
    assert socket_after is socket_before


# -- Idempotency-Key -------------------------------------------------------------


def key() -> str:
    # The PostgreSQL database is shared by the session and keys are not emptied per test.
    return f"test-{uuid.uuid4()}"


def test_the_same_key_and_body_get_the_first_answer(client: TestClient, engine: Engine) -> None:
    k = key()
    first = client.post("/messages/", json=VALID, headers={"Idempotency-Key": k})
    again = client.post("/messages/", json=VALID, headers={"Idempotency-Key": k})

    assert first.status_code == again.status_code == 201
    assert again.json() == first.json()
    assert again.headers["idempotent-replayed"] == "true"
    assert message_count(engine) == 1


def test_the_same_key_with_another_body_is_409(client: TestClient, engine: Engine) -> None:
    k = key()
    client.post("/messages/", json=VALID, headers={"Idempotency-Key": k})

    response = client.post(
        "/messages/", json={**VALID, "body": "other"}, headers={"Idempotency-Key": k}
    )

    assert response.status_code == 409
    assert response.json()["code"] == "idempotency_key_reused"
    assert message_count(engine) == 1


def test_every_post_route_takes_a_key(client: TestClient, engine: Engine) -> None:
    sent = client.post("/messages/", json=VALID).json()
    reply_key, ack_key = key(), key()
    reply = {"from_agent": "bob", "body": "r"}

    replies = [
        client.post(
            f"/messages/{sent['id']}/reply", json=reply, headers={"Idempotency-Key": reply_key}
        )
        for _ in range(2)
    ]
    acks = [
        client.post(
            f"/messages/{sent['id']}/ack",
            params={"agent": "bob"},
            headers={"Idempotency-Key": ack_key},
        )
        for _ in range(2)
    ]

    assert replies[0].status_code == 201 and replies[1].json() == replies[0].json()
    assert acks[0].status_code == 200 and acks[1].json() == acks[0].json()
    assert message_count(engine) == 2


def test_a_key_is_kept_across_a_restart(settings: StateHubSettings, engine: Engine) -> None:
    k = key()
    with TestClient(create_app(settings)) as first_run:
        first = first_run.post("/messages/", json=VALID, headers={"Idempotency-Key": k})
    with TestClient(create_app(settings)) as second_run:
        again = second_run.post("/messages/", json=VALID, headers={"Idempotency-Key": k})

    assert again.json() == first.json()
    assert message_count(engine) == 1


def test_a_key_is_forgotten_after_24_hours(
    client: TestClient, clock: FrozenClock, engine: Engine
) -> None:
    k = key()
    first = client.post("/messages/", json=VALID, headers={"Idempotency-Key": k})
    clock.advance(timedelta(hours=24, seconds=1).total_seconds())

    later = client.post("/messages/", json=VALID, headers={"Idempotency-Key": k})

    assert later.status_code == 201
    assert later.json()["id"] != first.json()["id"]
    assert message_count(engine) == 2


def test_a_malformed_key_is_a_json_422(client: TestClient, engine: Engine) -> None:
    response = client.post("/messages/", json=VALID, headers={"Idempotency-Key": "x" * 256})

    assert response.status_code == 422
    assert response.json()["code"] == "invalid_request"
    assert message_count(engine) == 0


@pytest.fixture
def served(settings: StateHubSettings) -> Iterator[str]:
    with live_server(create_app(settings)) as base:
        yield base


def test_concurrent_duplicates_are_answered_once(served: str, engine: Engine) -> None:
    k = key()
    barrier = threading.Barrier(8)
    answers: list[httpx.Response] = []

    def post() -> None:
        with httpx.Client(base_url=served, timeout=30) as http:
            barrier.wait()
            answers.append(http.post("/messages/", json=VALID, headers={"Idempotency-Key": k}))

    threads = [threading.Thread(target=post) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert [a.status_code for a in answers] == [201] * 8
    assert len({a.json()["id"] for a in answers}) == 1
    assert message_count(engine) == 1
