"""The bucket-sync side of the fleet: agents that post to the board with @-mentions, post
into channels, promote results and read digests (each write promoted from the agent's
scratch bucket, retried with one `Idempotency-Key`); an organizer who broadcasts; and one
`/v1/updates` watcher per agent, long-polling from a cursor persisted in a file."""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from agenthub.bucketsync.identity.local import LocalIdentity
from bench.fleet.ledger import Ledger, Write
from bench.fleet.send import GaveUp, acknowledged, until_acked

ORG = "fleet-org"
SLUG = "chal"
ORGANIZER = "boss"
CHANNELS = ("evals", "ideas")
WATCH_WAIT_S = 20


@dataclass(frozen=True)
class Fleet:
    base: str
    agents: list[str]
    tokens: dict[str, str]
    organizer_token: str
    loud: dict[str, frozenset[str]]  # channel -> handles subscribed at `notify: all`


def bucket(agent: str) -> str:
    return f"{ORG}/{SLUG}-{agent}"


def source(agent: str, path: str) -> str:
    return f"hf://buckets/{bucket(agent)}/{path}"


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def put_file(
    client: httpx.Client, ledger: Ledger, fleet: Fleet, agent: str, path: str, text: str
) -> None:
    until_acked(
        client,
        ledger,
        "bucketsync",
        f"/local/buckets/{bucket(agent)}/files/{path}",
        key=f"put-{agent}-{path}",
        content=text.encode(),
        method="PUT",
        headers=auth(fleet.tokens[agent]),
    )


def set_up(server: Any, ledger: Ledger, count: int, rng: random.Random) -> Fleet:
    """Register `count` agents, create the channels, subscribe some agents loudly."""
    agents = [f"fleet-{i:02d}" for i in range(1, count + 1)]
    identity = LocalIdentity(Path(server.env["BUCKETSYNC_DATA_DIR"]) / "users.json", org=ORG)
    tokens = {}
    for agent in agents:
        server.register(agent, org=ORG, slug=SLUG)
        # A fresh token for the same user (register_agent keeps its own to itself).
        tokens[agent] = identity.add_user(f"user-{agent}", role="contributor")
    boss = identity.add_user(ORGANIZER, role="admin")
    loud = {name: frozenset(a for a in agents if rng.random() < 0.5) for name in CHANNELS}
    fleet = Fleet(server.base, agents, tokens, boss, loud)
    with httpx.Client(base_url=server.base, timeout=30) as client:
        for name in CHANNELS:
            until_acked(
                client,
                ledger,
                "bucketsync",
                "/v1/channels",
                key=f"channel-{name}",
                body={"name": name, "agent_id": f"human-{ORGANIZER}", "body": f"room {name}"},
                headers=auth(boss),
            )
            for agent in sorted(loud[name]):
                put_file(client, ledger, fleet, agent, f"sub-{name}.md", "subscribe")
                until_acked(
                    client,
                    ledger,
                    "bucketsync",
                    f"/v1/channels/{name}/subscribe",
                    key=f"sub-{name}-{agent}",
                    body={"source": source(agent, f"sub-{name}.md"), "notify": "all"},
                )
    return fleet


def promoted(error: GaveUp) -> dict[str, Any] | None:
    """A retry answered `409 ALREADY_PROMOTED` instead of its first answer: the write
    landed, under the filename the error names (each op's source and body are unique)."""
    if error.answer is None or error.answer.status_code != 409:
        return None
    found = error.answer.json().get("error", {})
    if found.get("code") != "ALREADY_PROMOTED" or not found.get("filename"):
        return None
    return {"filename": found["filename"]}


class Agent(threading.Thread):
    """One agent's writes and reads until `stop` is set."""

    def __init__(
        self, fleet: Fleet, ledger: Ledger, agent: str, seed: int, stop: threading.Event
    ) -> None:
        super().__init__(daemon=True, name=agent)
        self.fleet, self.ledger, self.agent, self.stop = fleet, ledger, agent, stop
        self.rng = random.Random(f"{seed}-{agent}")
        self.others = [a for a in fleet.agents if a != agent]
        self.count = 0

    def run(self) -> None:
        with httpx.Client(base_url=self.fleet.base, timeout=30) as client:
            while not self.stop.is_set():
                roll = self.rng.random()
                if roll < 0.2:
                    self.read(client)
                    self.stop.wait(self.rng.uniform(0.5, 1.5))
                    continue
                if roll < 0.55:
                    self.board(client)
                elif roll < 0.85:
                    self.channel(client)
                else:
                    self.result(client)
                # The source-write limit is 20/min per bucket: stay under it.
                self.stop.wait(self.rng.uniform(2.5, 5.0))

    def op(self) -> str:
        self.count += 1
        return f"op-{self.agent}-{self.count:05d}"

    def mentions(self, most: int) -> list[str]:
        return self.rng.sample(self.others, k=min(len(self.others), self.rng.randint(1, most)))

    def board(self, client: httpx.Client) -> None:
        mentioned = frozenset(self.mentions(2))
        op = self.op()
        text = f"{op} board note for " + " ".join(f"@{m}" for m in sorted(mentioned)) + "\n"
        self.promote(client, op, "board", text, {}, addressed=mentioned, mentioned=mentioned)

    def channel(self, client: httpx.Client) -> None:
        name = self.rng.choice(CHANNELS)
        mentioned = frozenset(self.mentions(1) if self.rng.random() < 0.3 else [])
        op = self.op()
        text = f"{op} in #{name} " + " ".join(f"@{m}" for m in sorted(mentioned)) + "\n"
        addressed = mentioned | self.fleet.loud[name]
        extra = {"channel": name}
        self.promote(client, op, "channel", text, extra, addressed=addressed, mentioned=mentioned)

    def result(self, client: httpx.Client) -> None:
        op = self.op()
        score = round(self.rng.uniform(0.05, 1.0), 4)
        fields = {"score": score, "method": "m", "status": "agent-run", "description": op}
        text = "---\n" + "".join(f"{k}: {json.dumps(v)}\n" for k, v in fields.items())
        self.promote(client, op, "result", f"{text}---\n{op} notes\n", {}, score=score)

    def promote(
        self,
        client: httpx.Client,
        op: str,
        kind: str,
        text: str,
        extra: dict[str, Any],
        *,
        addressed: frozenset[str] = frozenset(),
        mentioned: frozenset[str] = frozenset(),
        score: float | None = None,
    ) -> None:
        """Write `text` to the scratch bucket, then promote it (a result, or a message)."""
        path = f"ops/{op}.md"
        route = "/v1/results" if kind == "result" else "/v1/messages"
        try:
            put_file(client, self.ledger, self.fleet, self.agent, path, text)
        except GaveUp as exc:
            self.ledger.gave_up(op, kind, str(exc))
            return
        body = {"source": source(self.agent, path), **extra}
        sent = acknowledged(
            client, self.ledger, "bucketsync", route, op=op, kind=kind, body=body, recover=promoted
        )
        if sent is None:
            return
        found, took = sent
        self.ledger.acked(
            Write(
                op,
                kind,
                self.agent,
                found["filename"],
                addressed,
                time.monotonic(),
                took,
                score=score,
                mentioned=mentioned,
                mentions_delivered=(
                    tuple(found["mentions_delivered"]) if "mentions_delivered" in found else None
                ),
            )
        )

    def read(self, client: httpx.Client) -> None:
        route = self.rng.choice(["/v1/digest", "/v1/leaderboard", "/v1/messages"])
        try:
            answer = client.get(route, params={"as": self.agent} if "digest" in route else {})
            self.ledger.answer("bucketsync", answer.status_code, route)
        except httpx.HTTPError:
            self.ledger.transport_error("bucketsync")


class Organizer(Agent):
    """Broadcasts every 20-30 s (the raw-message limit allows 30 an hour)."""

    def run(self) -> None:
        with httpx.Client(base_url=self.fleet.base, timeout=30) as client:
            while not self.stop.wait(self.rng.uniform(20, 30)):
                op = self.op()
                body = {"agent_id": f"human-{ORGANIZER}", "body": f"{op} broadcast"}
                sent = acknowledged(
                    client,
                    self.ledger,
                    "bucketsync",
                    "/v1/messages",
                    op=op,
                    kind="broadcast",
                    body={**body, "broadcast": True},
                    headers=auth(self.fleet.organizer_token),
                )
                if sent is None:
                    continue
                self.ledger.acked(
                    Write(
                        op,
                        "broadcast",
                        f"human-{ORGANIZER}",
                        sent[0]["filename"],
                        frozenset(self.fleet.agents),
                        time.monotonic(),
                        sent[1],
                    )
                )


class Watcher(threading.Thread):
    """`GET /v1/updates?as=` long-polled from a cursor kept in a file, as collab_watch.sh
    does: `expand=true&order=asc&wait=`, the server's `cursor` stored verbatim."""

    def __init__(self, fleet: Fleet, ledger: Ledger, agent: str, state: Path) -> None:
        super().__init__(daemon=True, name=f"watch-{agent}")
        self.fleet, self.ledger, self.agent = fleet, ledger, agent
        self.cursor_file = state / f"cursor.{agent}"
        self.stopping = threading.Event()
        ledger.watch(agent)

    def run(self) -> None:
        with httpx.Client(base_url=self.fleet.base, timeout=WATCH_WAIT_S + 30) as client:
            while not self.stopping.is_set():
                params = {"as": self.agent, "expand": "true", "order": "asc", "limit": "50"}
                params["wait"] = str(WATCH_WAIT_S)
                if self.cursor_file.exists():
                    params["after"] = self.cursor_file.read_text()
                try:
                    answer = client.get("/v1/updates", params=params)
                except httpx.HTTPError:
                    self.ledger.transport_error("bucketsync")
                    self.stopping.wait(0.5)
                    continue
                self.ledger.answer("bucketsync", answer.status_code, "/v1/updates")
                if answer.status_code != 200:
                    self.stopping.wait(0.5)
                    continue
                page = answer.json()
                for item in page["items"]:
                    self.ledger.delivered(self.agent, item["filename"], item["reasons"] or [])
                self.ledger.watch(self.agent).pages += 1
                if page.get("cursor"):
                    self.cursor_file.write_text(page["cursor"])


def listing(client: httpx.Client, route: str, **params: str) -> Iterator[dict[str, Any]]:
    """Every expanded item of a list-grammar route, oldest first, page by page."""
    after: str | None = None
    while True:
        query = {"expand": "true", "order": "asc", "limit": "200", **params}
        if after:
            query["after"] = after
        page = client.get(route, params=query, timeout=120)
        page.raise_for_status()
        found = page.json()
        if not found["items"]:
            return
        yield from found["items"]
        after = found["cursor"]
