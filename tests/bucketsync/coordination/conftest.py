"""Coordination fixtures: a bucket-sync on the local store served over real HTTP on
loopback, on a clock the test moves, with three agents and an organizer."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from agenthub.bucketsync.app import create_app
from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.identity.local import LocalIdentity
from agenthub.bucketsync.storage.local import LocalBucketStore
from agenthub.clock import FrozenClock
from tests.bucketsync.conftest import ORG, World, make_settings
from tests.support.servers import live_server

ORGANIZER = "boss"


@dataclass
class Site:
    base: str
    world: World
    clock: FrozenClock
    home: Path

    @property
    def http(self) -> httpx.Client:
        client: httpx.Client = self.world.client  # type: ignore[assignment]
        return client

    @property
    def hub(self) -> Hub:
        return self.world.hub

    def claim(self, agent: str, idea: str, path: str | None = None, **fm: Any) -> httpx.Response:
        header = {"idea": idea, **fm}
        text = "---\n" + "".join(f"{k}: {json.dumps(v)}\n" for k, v in header.items())
        text += "---\nwhat I will run\n"
        target = path or f"claims/{abs(hash((idea, json.dumps(fm)))):x}.md"
        assert self.world.put(agent, target, text).status_code == 201
        return self.http.post("/v1/claims", json={"source": self.world.uri(agent, target)})

    def negative_result(self, agent: str, method: str, description: str) -> str:
        fm = {"score": 0.5, "method": method, "status": "negative", "description": description}
        text = "---\n" + "".join(f"{k}: {json.dumps(v)}\n" for k, v in fm.items()) + "---\n"
        path = f"results/{abs(hash(method)):x}.md"
        assert self.world.put(agent, path, text).status_code == 201
        response = self.http.post("/v1/results", json={"source": self.world.uri(agent, path)})
        assert response.status_code == 201, response.text
        return str(response.json()["filename"])

    def directive(
        self, body: str, supersedes: str | None = None, user: str = ORGANIZER
    ) -> httpx.Response:
        payload: dict[str, Any] = {"agent_id": f"human-{user}", "body": body}
        if supersedes is not None:
            payload["supersedes"] = supersedes
        return self.http.post("/v1/directives", json=payload, headers=self.world.auth(user))

    def ack(self, agent: str, filename: str) -> httpx.Response:
        assert self.world.put(agent, "ack.md", "read it").status_code == 201
        return self.http.post(
            f"/v1/directives/{filename}/ack", json={"source": self.world.uri(agent, "ack.md")}
        )

    def parked(self, count: int = 1, timeout: float = 10) -> None:
        deadline = datetime.now(UTC).timestamp() + timeout
        while self.http.get("/v1/healthz").json()["longpoll"]["parked"] < count:
            assert datetime.now(UTC).timestamp() < deadline, "the request never parked"


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    clock = FrozenClock(datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC))
    settings = make_settings(tmp_path / "data")
    identity = LocalIdentity(settings.data_dir / "users.json", org=ORG)
    store = LocalBucketStore(settings.data_dir, clock=clock)
    app = create_app(settings, store=store, identity=identity, clock=clock)
    with live_server(app) as base, httpx.Client(base_url=base, timeout=30) as client:
        world = World(client, app.state.hub, identity)  # type: ignore[arg-type]
        for agent in ("agent-1", "agent-2", "agent-3"):
            world.agent(agent)
        world.user(ORGANIZER, role="admin")
        yield Site(base, world, clock, tmp_path)
