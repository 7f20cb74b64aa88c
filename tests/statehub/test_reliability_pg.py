"""PostgreSQL backends dying under a real State Hub: every answer is a success or a 503
with `Retry-After`, a keep-alive connection survives it, and with `Idempotency-Key`
resends nothing is lost, nothing doubled, and every retry gets the first answer (a
backend terminated after the commit loses no answer: it commits with the write)."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

import httpx
import psycopg
import pytest
from sqlalchemy import text

from agenthub.db import make_engine
from agenthub.statehub import migrate
from agenthub.statehub.app import create_app
from agenthub.statehub.settings import StateHubSettings
from tests.support.databases import migrated, require_pg, temporary_pg_database
from tests.support.servers import live_server

pytestmark = pytest.mark.pg

WRITERS = 4
SENDS_PER_WRITER = 25
KILL_EVERY_S = 0.25


@dataclass
class Tally:
    statuses: list[int] = field(default_factory=list)
    bad: list[str] = field(default_factory=list)
    transport_errors: int = 0
    ids: dict[str, str] = field(default_factory=dict)  # key -> message id
    lock: threading.Lock = field(default_factory=threading.Lock)


@pytest.fixture
def pg_url() -> Iterator[str]:
    with temporary_pg_database(require_pg(), prefix="agenthub_sh_kill") as url:
        yield migrated(url, migrate.upgrade)


def kill_backends(url: str, stop: threading.Event, kills: list[int]) -> None:
    """`pg_terminate_backend` every State Hub connection, every KILL_EVERY_S."""
    dsn = url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(dsn, autocommit=True) as conn:
        while not stop.wait(KILL_EVERY_S):
            row = conn.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid() "
                "AND backend_type = 'client backend'"
            ).fetchone()
            kills.append(int(row[0]) if row else 0)


def writer(base: str, n: int, tally: Tally) -> None:
    # One keep-alive connection per writer, as a real client keeps.
    with httpx.Client(base_url=base, timeout=30) as http:
        for i in range(SENDS_PER_WRITER):
            key = f"w{n}-{i}-{uuid.uuid4()}"
            body = {"from_agent": f"writer-{n}", "to_agent": "bob", "subject": str(i), "body": key}
            for _attempt in range(200):
                try:
                    response = http.post("/messages/", json=body, headers={"Idempotency-Key": key})
                except httpx.TransportError:
                    with tally.lock:
                        tally.transport_errors += 1
                    continue
                with tally.lock:
                    tally.statuses.append(response.status_code)
                if response.status_code == 201:
                    with tally.lock:
                        tally.ids[key] = response.json()["id"]
                    break
                if response.status_code == 503 and response.headers.get("retry-after"):
                    assert response.json()["code"] == "database_unavailable"
                    time.sleep(0.05)  # Retry-After says 1 s; the test keeps it short
                    continue
                with tally.lock:
                    tally.bad.append(f"{response.status_code} {response.headers} {response.text}")
                break


def test_backends_terminated_under_load_give_only_2xx_or_503_and_lose_nothing(
    pg_url: str,
) -> None:
    app = create_app(StateHubSettings(database_url=pg_url, instance_label="kill-hub"))
    tally = Tally()
    stop = threading.Event()
    kills: list[int] = []
    with live_server(app) as base:
        killer = threading.Thread(target=kill_backends, args=(pg_url, stop, kills))
        killer.start()
        writers = [threading.Thread(target=writer, args=(base, n, tally)) for n in range(WRITERS)]
        for thread in writers:
            thread.start()
        for thread in writers:
            thread.join()
        stop.set()
        killer.join()

    engine = make_engine(pg_url)
    with engine.connect() as conn:
        stored = {
            row.body: str(row.id)
            for row in conn.execute(text("select id, body from agent_messages"))
        }
    engine.dispose()

    assert sum(kills) > 0, "the test never terminated a backend"
    assert tally.bad == []
    # No 409 `idempotency_answer_lost`: a retry after a kill gets the 201 it would have.
    assert set(tally.statuses) <= {201, 503}
    assert tally.transport_errors == 0
    # Nothing lost, nothing doubled: one row per key, the id each 201 named.
    assert len(stored) == WRITERS * SENDS_PER_WRITER
    assert len(tally.ids) == WRITERS * SENDS_PER_WRITER
    for key, message_id in tally.ids.items():
        assert stored[key] == message_id
