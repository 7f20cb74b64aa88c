"""Racing readers and ackers over real HTTP: one receipt row, first-write-wins fields.

A real uvicorn server runs on a loopback socket in a background thread, and each
client thread has its own HTTP connection, so requests really overlap inside the
server's thread pool and hit the database on separate connections.
"""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from sqlalchemy import Engine, text
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from agenthub.statehub import repository
from agenthub.statehub.app import create_app
from agenthub.statehub.models import MessageReceipt
from agenthub.statehub.settings import StateHubSettings
from tests.statehub.conftest import WITH_PGBOUNCER, parse_ts, statehub_database

THREADS = 8
ROUNDS = 4


@pytest.fixture(params=WITH_PGBOUNCER)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The races hold through pgbouncer too (each transaction on any server connection)."""
    return statehub_database(request, tmp_path)


class TickingClock:
    """Every call to `now()` returns a later, distinct instant, so each request's
    timestamp identifies it and first-write-wins can be told apart from last-write-wins."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._now = datetime(2026, 1, 1, tzinfo=UTC)

    def now(self) -> datetime:
        with self._lock:
            self._now += timedelta(milliseconds=1)
            return self._now

    def monotonic(self) -> float:
        return time.monotonic()


@pytest.fixture
def server_url(settings: StateHubSettings) -> Iterator[str]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    app = create_app(settings, clock=TickingClock())
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "server did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=20)
        sock.close()


def race(tasks: list[Callable[[httpx.Client], httpx.Response]], base_url: str) -> list[Any]:
    """Run every task at the same moment, each on its own HTTP connection."""
    barrier = threading.Barrier(len(tasks))

    def run(task: Callable[[httpx.Client], httpx.Response]) -> httpx.Response:
        with httpx.Client(base_url=base_url, timeout=60) as http:
            http.get("/state/health")  # open the connection before the start line
            barrier.wait()
            return task(http)

    with ThreadPoolExecutor(len(tasks)) as pool:
        return list(pool.map(run, tasks))


def receipt_rows(engine: Engine, message_id: str) -> list[Any]:
    key = message_id.replace("-", "") if engine.dialect.name == "sqlite" else message_id
    with engine.connect() as conn:
        return list(
            conn.execute(
                text(
                    "select agent, delivered_at, read_at, acknowledged_at"
                    " from message_receipts where message_id = :m"
                ),
                {"m": key},
            ).all()
        )


def broadcast(base_url: str) -> str:
    with httpx.Client(base_url=base_url) as http:
        response = http.post(
            "/messages/",
            json={"from_agent": "ops", "to_agent": "*", "subject": "deploy", "body": "now"},
        )
    assert response.status_code == 201, response.text
    message_id: str = response.json()["id"]
    return message_id


def test_racing_unread_reads_and_acks_leave_one_first_write_wins_receipt(
    server_url: str, engine: Engine
) -> None:
    for _ in range(ROUNDS):
        message_id = broadcast(server_url)

        def read(http: httpx.Client) -> httpx.Response:
            return http.get("/messages/", params={"to_agent": "bob", "unread_only": "true"})

        def ack(http: httpx.Client, message_id: str = message_id) -> httpx.Response:
            return http.post(f"/messages/{message_id}/ack", params={"agent": "bob"})

        responses = race([read, ack] * (THREADS // 2), server_url)

        assert [r.status_code for r in responses] == [200] * THREADS
        [row] = receipt_rows(engine, message_id)
        acks = [r.json() for r in responses[1::2]]
        # Every acker saw the receipt the first writer left: nothing was overwritten.
        assert len({(a["delivered_at"], a["read_at"], a["acknowledged_at"]) for a in acks}) == 1
        first = acks[0]
        # Only an ack sets read_at, and it sets both at once; a list only sets delivered_at.
        # (No order between delivered_at and acknowledged_at: a request reads the clock
        # before it waits for the write lock, so a later stamp can commit first.)
        assert parse_ts(first["read_at"]) == parse_ts(first["acknowledged_at"])
        stored = {
            "delivered_at": row.delivered_at,
            "read_at": row.read_at,
            "acknowledged_at": row.acknowledged_at,
        }
        for field, value in stored.items():
            if isinstance(value, str):  # SQLite hands back naive UTC text
                value = datetime.fromisoformat(value).replace(tzinfo=UTC)
            elif value.tzinfo is None:
                value = value.replace(tzinfo=UTC)
            assert value == parse_ts(first[field]), field


def racing_acks(server_url: str) -> list[httpx.Response]:
    message_id = broadcast(server_url)

    def ack(http: httpx.Client) -> httpx.Response:
        return http.post(f"/messages/{message_id}/ack", params={"agent": "bob"})

    return race([ack] * THREADS, server_url)


def all_agree_on_the_first_ack(responses: list[httpx.Response]) -> bool:
    return all(r.status_code == 200 for r in responses) and (
        len({r.json()["acknowledged_at"] for r in responses}) == 1
    )


def test_racing_acks_by_one_agent_all_report_the_first_ack(server_url: str, engine: Engine) -> None:
    responses = racing_acks(server_url)

    assert all_agree_on_the_first_ack(responses)
    assert len(receipt_rows(engine, responses[0].json()["message_id"])) == 1


def last_write_wins_upsert(
    session: Session, message_ids: Sequence[uuid.UUID], agent: str, **values: datetime | None
) -> None:
    """The broken variant: an upsert without COALESCE, so later writers overwrite."""
    insert = postgresql.insert if session.get_bind().dialect.name == "postgresql" else sqlite.insert
    given = {name: value for name, value in values.items() if value is not None}
    stmt = insert(MessageReceipt).values(
        [{"message_id": mid, "agent": agent, **given} for mid in message_ids]
    )
    stmt = stmt.on_conflict_do_update(
        index_elements=["message_id", "agent"], set_={k: stmt.excluded[k] for k in given}
    )
    session.execute(stmt)


def test_the_race_check_catches_a_last_write_wins_upsert(
    monkeypatch: pytest.MonkeyPatch, server_url: str
) -> None:
    monkeypatch.setattr(repository, "upsert_receipts", last_write_wins_upsert)

    responses = racing_acks(server_url)

    assert not all_agree_on_the_first_ack(responses)


def test_racing_readers_each_get_their_own_receipt(server_url: str, engine: Engine) -> None:
    message_id = broadcast(server_url)
    agents = [f"agent-{n}" for n in range(THREADS)]

    def reader(agent: str) -> Callable[[httpx.Client], httpx.Response]:
        def read(http: httpx.Client) -> httpx.Response:
            return http.get("/messages/", params={"to_agent": agent, "unread_only": "true"})

        return read

    responses = race([reader(a) for a in agents], server_url)

    assert all(r.status_code == 200 and len(r.json()) == 1 for r in responses)
    rows = receipt_rows(engine, message_id)
    assert sorted(r.agent for r in rows) == agents
    assert all(r.delivered_at is not None and r.read_at is None for r in rows)


def test_racing_archives_all_report_the_first_archived_at(server_url: str) -> None:
    message_id = broadcast(server_url)

    def archive(http: httpx.Client) -> httpx.Response:
        return http.patch(f"/messages/{message_id}/archive")

    responses = race([archive] * THREADS, server_url)

    assert [r.status_code for r in responses] == [200] * THREADS
    assert len({r.json()["archived_at"] for r in responses}) == 1


def test_racing_direct_reads_all_report_the_first_read_at(server_url: str) -> None:
    with httpx.Client(base_url=server_url) as http:
        message_id = http.post(
            "/messages/", json={"from_agent": "a", "to_agent": "bob", "subject": "s", "body": "b"}
        ).json()["id"]

    def read(http: httpx.Client) -> httpx.Response:
        return http.patch(f"/messages/{message_id}/read")

    responses = race([read] * THREADS, server_url)

    assert [r.status_code for r in responses] == [200] * THREADS
    assert len({r.json()["read_at"] for r in responses}) == 1


def test_one_reader_reading_acking_and_listing_a_broadcast_at_once_never_fails(
    server_url: str, engine: Engine
) -> None:
    # The same agent's read mark, ack, reply and delivery stamp all write one receipt;
    # none of them may deadlock another (on PostgreSQL a row lock on the message
    # must not block the receipts' foreign-key checks).
    for _ in range(ROUNDS):
        message_id = broadcast(server_url)

        def mark_read(http: httpx.Client, message_id: str = message_id) -> httpx.Response:
            return http.patch(f"/messages/{message_id}/read", params={"reader": "bob"})

        def ack(http: httpx.Client, message_id: str = message_id) -> httpx.Response:
            return http.post(f"/messages/{message_id}/ack", params={"agent": "bob"})

        def reply(http: httpx.Client, message_id: str = message_id) -> httpx.Response:
            return http.post(
                f"/messages/{message_id}/reply", json={"from_agent": "bob", "body": "seen"}
            )

        def deliver(http: httpx.Client) -> httpx.Response:
            return http.get("/messages/", params={"to_agent": "bob", "unread_only": "true"})

        responses = race([mark_read, ack, reply, deliver] * (THREADS // 4), server_url)

        assert all(r.status_code < 300 for r in responses), [r.text for r in responses]
        [row] = receipt_rows(engine, message_id)
        assert row.read_at is not None and row.acknowledged_at is not None
