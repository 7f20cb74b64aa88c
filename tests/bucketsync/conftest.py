"""bucket-sync fixtures: a local-mode app on a temp data dir with a hand-moved clock, and
the Hub emulator holding the challenge's buckets for the hf adapters."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from agenthub.bucketsync.app import create_app
from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.core.limiter import CompoundLimiter, RateLimiter
from agenthub.bucketsync.identity.local import LocalIdentity
from agenthub.bucketsync.settings import BucketSyncSettings, load_settings
from agenthub.bucketsync.storage.local import LocalBucketStore
from agenthub.clock import FrozenClock
from tests.support.hub_emulator import HubEmulator, running_hub

ORG = "acme"
SLUG = "chal"
# The buckets `make_settings` names, on the Hub emulator (`hub`).
CENTRAL = "acme/chal-main-bucket"
AUDIT = "acme-admin/chal-audit"


def make_settings(data_dir: Path, **overrides: Any) -> BucketSyncSettings:
    values: dict[str, Any] = {
        "ORG": ORG,
        "COLLAB_SLUG": SLUG,
        "AUDIT_BUCKET": AUDIT,
        "BUCKETSYNC_DATA_DIR": str(data_dir),
        "BUCKETSYNC_STORAGE": "local",
    }
    values.update(overrides)
    return load_settings(**values)


class World:
    """Drives the app like its users do: people with tokens, agents with scratch buckets."""

    def __init__(self, client: TestClient, hub: Hub, identity: LocalIdentity) -> None:
        self.client = client
        self.hub = hub
        self.identity = identity
        self.tokens: dict[str, str] = {}

    def user(self, name: str, role: str = "contributor", email: str | None = None) -> str:
        token = self.identity.add_user(name, role=role, email=email)
        self.tokens[name] = token
        return token

    def auth(self, user: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[user]}"}

    def bucket(self, agent_id: str) -> str:
        return f"{ORG}/{SLUG}-{agent_id}"

    def uri(self, agent_id: str, path: str) -> str:
        return f"hf://buckets/{self.bucket(agent_id)}/{path}"

    def create_bucket(self, agent_id: str, user: str) -> None:
        response = self.client.post(
            f"/local/buckets/{self.bucket(agent_id)}", headers=self.auth(user)
        )
        assert response.status_code in (200, 201), response.text

    def put(self, agent_id: str, path: str, data: bytes | str, user: str | None = None) -> Any:
        payload = data.encode() if isinstance(data, str) else data
        owner = user or self._owner[agent_id]
        return self.client.put(
            f"/local/buckets/{self.bucket(agent_id)}/files/{path}",
            content=payload,
            headers=self.auth(owner),
        )

    _owner: dict[str, str] = {}

    def register(self, agent_id: str, user: str, **body: Any) -> Any:
        return self.client.post(
            "/v1/agents/register",
            json={"agent_id": agent_id, "model": "m1", "harness": "h1", **body},
            headers=self.auth(user),
        )

    def agent(self, agent_id: str, user: str | None = None) -> str:
        """Create the user (if needed), bucket and handshake, and register the agent."""
        user = user or f"user-{agent_id}"
        if user not in self.tokens:
            self.user(user)
        self._owner = {**self._owner, agent_id: user}
        self.create_bucket(agent_id, user)
        assert self.put(agent_id, ".bucket-sync-handshake", user).status_code == 201
        response = self.register(agent_id, user)
        assert response.status_code == 201, response.text
        return agent_id

    def promote(self, agent_id: str, path: str, text: str) -> Any:
        assert self.put(agent_id, path, text).status_code == 201
        return self.client.post("/v1/messages", json={"source": self.uri(agent_id, path)})

    def raw(self, agent_id: str, body: str, **extra: Any) -> Any:
        return self.client.post("/v1/messages", json={"agent_id": agent_id, "body": body, **extra})


@pytest.fixture
def hub() -> Iterator[HubEmulator]:
    """The Hub emulator with the central and audit buckets (modules needing another layout
    define their own `hub`)."""
    with running_hub(xet_timeout_s=3) as emulator:
        emulator.add_bucket(CENTRAL, author="acme")
        emulator.add_bucket(AUDIT, author="acme-admin", private=True)
        yield emulator


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock(datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC))


@pytest.fixture
def settings(tmp_path: Path) -> BucketSyncSettings:
    return make_settings(tmp_path / "data")


@pytest.fixture
def store(settings: BucketSyncSettings, clock: FrozenClock) -> LocalBucketStore:
    return LocalBucketStore(settings.data_dir, clock=clock)


@pytest.fixture
def world(
    settings: BucketSyncSettings, store: LocalBucketStore, clock: FrozenClock
) -> Iterator[World]:
    identity = LocalIdentity(settings.data_dir / "users.json", org=ORG)
    app = create_app(settings, store=store, identity=identity, clock=clock)
    with TestClient(app) as client:
        yield World(client, app.state.hub, identity)


def message(body: str, **frontmatter: Any) -> str:
    if not frontmatter:
        return body
    lines = "".join(f"{key}: {value}\n" for key, value in frontmatter.items())
    return f"---\n{lines}---\n{body}"


def in_process_limiter(limiter: RateLimiter) -> CompoundLimiter:
    """The in-process limiter behind a Hub's limiter port, for tests that read its tokens."""
    assert isinstance(limiter, CompoundLimiter)
    return limiter
