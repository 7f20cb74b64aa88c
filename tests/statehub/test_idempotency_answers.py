"""An `Idempotency-Key` retry gets the first answer, byte for byte, even when the process
died between the write's commit and anything after it: the answer commits with the write.

The process's death is simulated in two ways on both databases (`record_answer`, the
after-commit store, never running; an exception right after the commit, so neither the
route's answer nor the record happens), and is real once on PostgreSQL: a served process
`kill -9`ed by itself right after a keyed commit. The broken variant (the answer stored
only after the commit, as before) is shown losing it."""

from __future__ import annotations

import os
import signal
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from httpx2 import Response
from sqlalchemy import Engine, text

import agenthub
from agenthub.statehub import idempotency, migrate
from agenthub.statehub.api.bodies import message_json
from agenthub.statehub.app import create_app
from agenthub.statehub.inbox import InboxService
from agenthub.statehub.settings import StateHubSettings
from agenthub.statehub.store import Database
from tests.support.databases import migrated, require_pg, temporary_pg_database
from tests.support.servers import live_server
from tests.support.service_process import free_port, running, wait_healthy

VALID = {"from_agent": "alice", "to_agent": "bob", "subject": "s", "body": "b é \u2028"}


def key() -> str:
    return f"answers-{uuid.uuid4()}"


def message_count(engine: Engine) -> int:
    with engine.connect() as conn:
        count: int = conn.execute(text("select count(*) from agent_messages")).scalar_one()
    return count


def database(client: TestClient) -> Database:
    db: Database = client.app.state.db  # type: ignore[attr-defined]
    return db


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """`record_answer` (the store after the commit) never runs, as when the process dies
    right after the commit; the keys it was called for."""
    calls: list[str] = []

    def killed(engine: Engine, key: str, *args: Any) -> None:
        calls.append(key)

    monkeypatch.setattr(idempotency, "record_answer", killed)
    return calls


@pytest.fixture
def original(client: TestClient) -> str:
    """A message from carol to bob, sent without a key: what reply and ack address."""
    response = client.post("/messages/", json={**VALID, "from_agent": "carol"})
    assert response.status_code == 201, response.text
    message_id: str = response.json()["id"]
    return message_id


def send(client: TestClient, k: str, original: str) -> Response:
    return client.post("/messages/", json=VALID, headers={"Idempotency-Key": k})


def reply(client: TestClient, k: str, original: str) -> Response:
    body = {"from_agent": "bob", "body": "r é"}
    return client.post(f"/messages/{original}/reply", json=body, headers={"Idempotency-Key": k})


def ack(client: TestClient, k: str, original: str) -> Response:
    return client.post(
        f"/messages/{original}/ack", params={"agent": "bob"}, headers={"Idempotency-Key": k}
    )


# Every State Hub POST route (the middleware takes the key on POST only).
ROUTES = {"send": (send, 201), "reply": (reply, 201), "ack": (ack, 200)}
POST_PATHS = {"/messages/", "/messages/{message_id}/reply", "/messages/{message_id}/ack"}


def test_the_routes_covered_here_are_every_post_route(client: TestClient) -> None:
    # A new POST route must report what its write made (`Database.made`) and join ROUTES.
    paths = client.get("/openapi.json").json()["paths"]
    assert {path for path, methods in paths.items() if "post" in methods} == POST_PATHS


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_with_the_record_after_commit_killed_a_retry_gets_the_first_answer_byte_for_byte(
    client: TestClient, engine: Engine, recorded: list[str], original: str, route: str
) -> None:
    post, status = ROUTES[route]
    k = key()
    first = post(client, k, original)
    count = message_count(engine)

    again = post(client, k, original)

    assert first.status_code == status, first.text
    assert (again.status_code, again.content) == (first.status_code, first.content)
    assert again.headers["content-type"] == first.headers["content-type"]
    assert again.headers["idempotent-replayed"] == "true"
    assert message_count(engine) == count


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_every_post_route_stores_its_answer_with_its_write(
    client: TestClient, engine: Engine, recorded: list[str], original: str, route: str
) -> None:
    post, _ = ROUTES[route]
    k = key()

    first = post(client, k, original)

    # Nothing was left for after the commit: the row committed holding the answer sent.
    assert recorded == []
    with engine.connect() as conn:
        row = conn.execute(
            text("select status_code, response_body from idempotency_keys where key = :k"),
            {"k": k},
        ).one()
    assert (row.status_code, bytes(row.response_body)) == (first.status_code, first.content)


def test_a_retry_gets_the_message_as_first_answered_not_as_it_is_now(
    client: TestClient, recorded: list[str]
) -> None:
    k = key()
    first = send(client, k, "")
    message_id = first.json()["id"]
    assert client.patch(f"/messages/{message_id}/read").status_code == 200
    assert client.patch(f"/messages/{message_id}/archive").status_code == 200

    again = send(client, k, "")

    # The first answer said unread and not archived; the retry says the same.
    assert again.content == first.content
    assert again.json()["read_at"] is None and again.json()["archived_at"] is None


class DiedAfterCommit(Exception):
    """Stands for the process dying right after a keyed write committed."""


def die_after_a_keyed_commit() -> None:
    if idempotency.claim_inserted():
        raise DiedAfterCommit


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_with_nothing_run_after_the_commit_a_retry_gets_the_answer_the_write_made(
    client: TestClient, engine: Engine, original: str, route: str
) -> None:
    post, status = ROUTES[route]
    k = key()
    db = database(client)
    db.after_commit.append(die_after_a_keyed_commit)
    lost = post(client, k, original)
    db.after_commit.remove(die_after_a_keyed_commit)
    assert lost.status_code == 500  # the client never saw the answer the write made
    count = message_count(engine)

    answers = [post(client, k, original) for _ in range(2)]

    assert [a.status_code for a in answers] == [status, status]
    assert answers[0].content == answers[1].content
    assert message_count(engine) == count
    if route != "ack":
        service: InboxService = client.app.state.inbox  # type: ignore[attr-defined]
        made = service.get(uuid.UUID(answers[0].json()["id"]))
        assert answers[0].content == message_json(made)


def test_broken_variant_an_answer_stored_only_after_the_commit_is_lost_with_the_process(
    client: TestClient, engine: Engine, recorded: list[str]
) -> None:
    # Today's store, before the fix: no answer goes with the write, so when `record_answer`
    # never runs the retry can only say "applied, answer lost". This is also the one case
    # that still gives the 409: a key claimed by an older State Hub that died there.
    database(client).on_made.clear()
    k = key()
    first = send(client, k, "")

    again = send(client, k, "")

    assert first.status_code == 201 and recorded == [k]
    assert again.status_code == 409
    assert again.json()["code"] == "idempotency_answer_lost"
    assert message_count(engine) == 1


# -- a real kill -9 on PostgreSQL -------------------------------------------------

# A served State Hub that SIGKILLs itself right after a keyed write commits: after the
# commit, before the route answers and before anything else is stored.
DYING_SERVER = """
import os, signal, sys
import uvicorn
from agenthub.statehub import app as statehub_app, idempotency
from agenthub.statehub.settings import StateHubSettings
from agenthub.statehub.store import Database

def die() -> None:
    if idempotency.claim_inserted():
        os.kill(os.getpid(), signal.SIGKILL)

class Dying(Database):
    def __init__(self, engine):
        super().__init__(engine)
        self.after_commit.append(die)

statehub_app.Database = Dying
settings = StateHubSettings(database_url=sys.argv[1], instance_label="kill-9-hub")
uvicorn.run(statehub_app.create_app(settings), host="127.0.0.1", port=int(sys.argv[2]))
"""


@pytest.fixture
def pg_url() -> Iterator[str]:
    with temporary_pg_database(require_pg(), prefix="agenthub_sh_answer") as url:
        yield migrated(url, migrate.upgrade)


@pytest.mark.pg
def test_a_process_killed_after_the_commit_loses_no_answer(pg_url: str, tmp_path: Path) -> None:
    port = free_port()
    # The server runs the `agenthub` this test imports (a worktree's `src`).
    env = {**os.environ, "PYTHONPATH": str(Path(agenthub.__file__).resolve().parents[1])}
    argv = [sys.executable, "-c", DYING_SERVER, pg_url, str(port)]
    log = tmp_path / "dying.log"
    k = key()
    with running(argv, env, cwd=Path.cwd(), log=log) as process:
        wait_healthy(f"http://127.0.0.1:{port}/state/health", process, log)
        with pytest.raises(httpx.TransportError):
            httpx.post(
                f"http://127.0.0.1:{port}/messages/",
                json=VALID,
                headers={"Idempotency-Key": k},
                timeout=30,
            )
        assert process.wait(30) == -signal.SIGKILL

    app = create_app(StateHubSettings(database_url=pg_url, instance_label="kill-9-hub"))
    with live_server(app) as base, httpx.Client(base_url=base, timeout=30) as http:
        answers = [
            http.post("/messages/", json=VALID, headers={"Idempotency-Key": k}) for _ in range(2)
        ]
        assert [a.status_code for a in answers] == [201, 201], answers[0].text
        service: InboxService = app.state.inbox
        made = service.get(uuid.UUID(answers[0].json()["id"]))
        assert answers[0].headers["idempotent-replayed"] == "true"
        # The answer the killed process would have sent, from the message it stored.
        assert answers[0].content == answers[1].content == message_json(made)
        listed = http.get("/messages/", params={"from_agent": "alice", "peek": "true"}).json()
        assert [m["id"] for m in listed] == [str(made.id)]
