"""A bucket-sync served on loopback, driven over real HTTP like agent-collabs' clients."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from agenthub.bucketsync.app import create_app
from agenthub.bucketsync.identity.local import LocalIdentity
from agenthub.bucketsync.storage.local import LocalBucketStore
from agenthub.clock import FrozenClock
from tests.bucketsync.conftest import ORG, World, make_settings
from tests.support.servers import live_server


@pytest.fixture
def served(tmp_path: Path, clock: FrozenClock) -> Iterator[World]:
    settings = make_settings(tmp_path / "data")
    identity = LocalIdentity(settings.data_dir / "users.json", org=ORG)
    store = LocalBucketStore(settings.data_dir, clock=clock)
    app = create_app(settings, store=store, identity=identity, clock=clock)
    with live_server(app) as base, httpx.Client(base_url=base, timeout=30) as client:
        yield World(client, app.state.hub, identity)  # type: ignore[arg-type]
