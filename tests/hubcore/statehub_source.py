"""A real State Hub as the capture source: a realistic inbox written through its HTTP API."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Protocol

from agenthub.clock import FrozenClock

READER = "state-hub"


class Response(Protocol):
    @property
    def status_code(self) -> int: ...
    @property
    def text(self) -> str: ...
    def json(self, **kwargs: Any) -> Any: ...


class HttpClient(Protocol):
    """What `populate` needs of a client. Structural, because Starlette's TestClient is built
    on `httpx2` when that is installed, so it is not always an `httpx.Client`."""

    def post(
        self, url: str, *, json: Any = ..., params: dict[str, str] | None = ...
    ) -> Response: ...
    def patch(self, url: str, *, params: dict[str, str] | None = ...) -> Response: ...


def _ok(response: Response) -> dict[str, Any]:
    assert response.status_code in (200, 201), response.text
    body: dict[str, Any] = response.json()
    return body


def populate(client: HttpClient, clock: FrozenClock) -> dict[str, str]:
    """Write a realistic `state-hub` inbox; return the ids worth naming in assertions."""

    def send(**fields: Any) -> str:
        clock.advance(1)
        return str(_ok(client.post("/messages/", json=fields))["id"])

    ids: dict[str, str] = {}
    ids["plan"] = send(from_agent="alice", to_agent=READER, subject="plan", body="the plan body")
    clock.advance(1)
    ids["plan_reply"] = str(
        _ok(
            client.post(f"/messages/{ids['plan']}/reply", json={"from_agent": READER, "body": "ok"})
        )["id"]
    )
    clock.advance(1)
    ids["plan_followup"] = str(
        _ok(
            client.post(
                f"/messages/{ids['plan_reply']}/reply", json={"from_agent": "alice", "body": "thx"}
            )
        )["id"]
    )
    ids["freeze_v1"] = send(from_agent="ops", to_agent="*", subject="freeze", body="freeze v1")
    _ok(client.patch(f"/messages/{ids['freeze_v1']}/read", params={"reader": READER}))
    ids["freeze_v2"] = send(
        from_agent="ops",
        to_agent="*",
        subject="freeze",
        body="freeze v2",
        supersedes_id=ids["freeze_v1"],
    )
    ids["runner"] = send(from_agent="ops", to_agent="*", subject="runner", body="new runner")
    _ok(client.post(f"/messages/{ids['runner']}/ack", params={"agent": "bob"}))
    ids["read_broadcast"] = send(from_agent="ops", to_agent="*", subject="notice", body="notice")
    _ok(client.patch(f"/messages/{ids['read_broadcast']}/read", params={"reader": READER}))
    ids["replied_broadcast"] = send(from_agent="carol", to_agent="*", subject="poll", body="poll")
    clock.advance(1)
    _ok(
        client.post(
            f"/messages/{ids['replied_broadcast']}/reply",
            json={"from_agent": READER, "body": "yes"},
        )
    )
    ids["archived"] = send(from_agent="bob", to_agent=READER, subject="old", body="old news")
    _ok(client.patch(f"/messages/{ids['archived']}/archive"))
    ids["read_direct"] = send(from_agent="bob", to_agent=READER, subject="fyi", body="fyi body")
    _ok(client.patch(f"/messages/{ids['read_direct']}/read"))
    expiry = (clock.now() + timedelta(minutes=30)).isoformat()
    ids["expiring"] = send(
        from_agent="carol",
        to_agent=READER,
        subject="short",
        body="brief",
        kind="news",
        expires_at=expiry,
    )
    ids["news"] = send(from_agent="carol", to_agent=READER, subject="weekly", body="n", kind="news")
    # Two messages in the same instant: the order falls back to the id.
    clock.advance(1)
    ids["tie_a"] = str(
        _ok(
            client.post(
                "/messages/",
                json={"from_agent": "dave", "to_agent": READER, "subject": "tie", "body": "a"},
            )
        )["id"]
    )
    ids["tie_b"] = str(
        _ok(
            client.post(
                "/messages/",
                json={"from_agent": "dave", "to_agent": READER, "subject": "tie", "body": "b"},
            )
        )["id"]
    )
    ids["outgoing"] = send(from_agent=READER, to_agent="alice", subject="out", body="outgoing")
    for n in range(5):
        ids[f"bulk{n}"] = send(
            from_agent="alice" if n % 2 else "dave", to_agent=READER, subject=f"bulk {n}", body="x"
        )
    return ids
