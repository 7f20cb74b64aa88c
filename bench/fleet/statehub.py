"""The State Hub side of the fleet: writers sending with `Idempotency-Key` retries, and the
end checks read from the two databases (each acknowledged send stored once; hub-core's
projection equal to State Hub's rows)."""

from __future__ import annotations

import functools
import random
import threading
import time
from typing import Any

import httpx
from sqlalchemy import create_engine, text

from agenthub.db import normalize_url
from bench.fleet.ledger import Ledger, Write
from bench.fleet.send import GaveUp, acknowledged

ANSWER_LOST = "idempotency_answer_lost"
READERS = [f"reader-{i}" for i in range(5)]
ROW = "id::text, from_agent, to_agent, subject, body"


class Writer(threading.Thread):
    def __init__(
        self, base: str, ledger: Ledger, index: int, seed: int, stop: threading.Event
    ) -> None:
        super().__init__(daemon=True, name=f"sh-writer-{index}")
        self.base, self.ledger, self.stop = base, ledger, stop
        self.agent = f"sh-writer-{index}"
        self.rng = random.Random(f"{seed}-{self.agent}")

    def run(self) -> None:
        count = 0
        with httpx.Client(base_url=self.base, timeout=30) as client:
            while not self.stop.wait(self.rng.uniform(0.1, 0.4)):
                count += 1
                op = f"op-{self.agent}-{count:05d}"
                body = {
                    "from_agent": self.agent,
                    "to_agent": self.rng.choice(READERS),
                    "subject": op,
                    "body": f"{op} body",
                }
                sent = acknowledged(
                    client,
                    self.ledger,
                    "statehub",
                    "/messages/",
                    op=op,
                    kind="statehub",
                    body=body,
                    recover=functools.partial(self.find, client, body),
                )
                if sent is None:
                    continue
                self.ledger.acked(
                    Write(
                        op,
                        "statehub",
                        self.agent,
                        sent[0]["id"],
                        frozenset(),
                        time.monotonic(),
                        sent[1],
                    )
                )

    def find(
        self, client: httpx.Client, body: dict[str, str], error: GaveUp
    ) -> dict[str, Any] | None:
        """A retry answered "applied, but its answer was not recorded"
        (`idempotency_answer_lost`) instead of the first answer is a failure (the answer
        commits with the write, so a kill loses none); as the hint says, list to see what
        it made, so the end checks still count the write (the ledger marks it lost)."""
        if ANSWER_LOST not in str(error):
            return None
        listed = client.get(
            "/messages/",
            params={
                "to_agent": body["to_agent"],
                "from_agent": self.agent,
                "limit": "1000",
                "peek": "true",
            },
        )
        self.ledger.answer("statehub", listed.status_code, "/messages/")
        mine = [m for m in listed.json() if m["subject"] == body["subject"]]
        return mine[0] if len(mine) == 1 else None


def rows(url: str, table: str) -> set[tuple[Any, ...]]:
    engine = create_engine(normalize_url(url))
    try:
        with engine.connect() as conn:
            return {tuple(r) for r in conn.execute(text(f"SELECT {ROW} FROM {table}"))}
    finally:
        engine.dispose()


def subjects(url: str) -> dict[str, list[str]]:
    """State Hub's stored sends of the fleet: subject -> ids."""
    found: dict[str, list[str]] = {}
    for row in rows(url, "agent_messages"):
        found.setdefault(row[3], []).append(row[0])
    return found


def converge(statehub_url: str, hubcore_url: str, timeout_s: float) -> tuple[int, int, float]:
    """Wait until hub-core's projection holds exactly State Hub's rows: (State Hub rows,
    rows that differ, seconds waited)."""
    started = time.monotonic()
    while True:
        source = rows(statehub_url, "agent_messages")
        target = rows(hubcore_url, "projected_messages")
        if source == target or time.monotonic() - started > timeout_s:
            return len(source), len(source ^ target), time.monotonic() - started
        time.sleep(0.2)
