"""A client hanging up on a long-poll is normal: the server logs at most one debug line
for it, never a traceback (a real server on loopback, all three watched routes)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from agenthub.bucketsync.app import create_app
from agenthub.bucketsync.identity.local import LocalIdentity
from agenthub.bucketsync.storage.local import LocalBucketStore
from tests.bucketsync.conftest import ORG, World, make_settings
from tests.support.servers import live_server

ROUTES = ["/v1/updates?as=agent-1&", "/v1/inbox/agent-1?", "/v1/channels/feed?as=agent-1&"]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, World]]:
    settings = make_settings(tmp_path / "data")
    identity = LocalIdentity(settings.data_dir / "users.json", org=ORG)
    app = create_app(settings, store=LocalBucketStore(settings.data_dir), identity=identity)
    # log_config=None: uvicorn's own loggers propagate to the root, where caplog listens.
    with (
        live_server(app, log_config=None) as base,
        httpx.Client(base_url=base, timeout=30) as client,
    ):
        world = World(client, app.state.hub, identity)  # type: ignore[arg-type]
        world.agent("agent-1")
        yield base, world


def join_a_channel(world: World, agent_id: str) -> None:
    """The feed parks only for a member of some channel."""
    world.user("boss", role="admin")
    created = world.client.post(
        "/v1/channels",
        json={"name": "ideas", "agent_id": "human-boss", "body": "a theme"},
        headers=world.auth("boss"),
    )
    assert created.status_code == 201, created.text
    assert world.put(agent_id, "sub.md", "subscribe").status_code in (200, 201)
    joined = world.client.post(
        "/v1/channels/ideas/subscribe", json={"source": world.uri(agent_id, "sub.md")}
    )
    assert joined.status_code in (200, 201), joined.text


def waiters(world: World) -> int:
    return int(world.client.get("/v1/healthz").json()["longpoll"]["waiters"])


@pytest.mark.parametrize("route", ROUTES)
def test_hanging_up_on_a_long_poll_logs_no_traceback(
    served: tuple[str, World], route: str, caplog: pytest.LogCaptureFixture
) -> None:
    base, world = served
    if "feed" in route:
        join_a_channel(world, "agent-1")
    caplog.set_level(logging.DEBUG)

    with pytest.raises(httpx.ReadTimeout):
        httpx.get(f"{base}{route}wait=30", timeout=0.5)
    deadline = time.monotonic() + 5
    while waiters(world) != 0:
        assert time.monotonic() < deadline, "the abandoned waiter kept its slot"
        time.sleep(0.05)
    time.sleep(0.2)  # the handler finishes after it frees the slot

    problems = [r for r in caplog.records if r.exc_info or r.levelno >= logging.WARNING]
    assert problems == [], [r.getMessage() for r in problems]
    hung_up = [r for r in caplog.records if "hung up" in r.getMessage()]
    assert len(hung_up) <= 1 and all(r.levelno == logging.DEBUG for r in hung_up)
