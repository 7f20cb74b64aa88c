"""Cursors on the three streams over a real server on loopback: `/v1/updates` closes its
envelope with the top-level cursor as `/v1/inbox` and `/v1/channels/feed` do (issue 27.5),
and a cursor that is not one is 400 INVALID_QUERY naming the parameter (issue 28.2)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from agenthub.bucketsync.app import create_app
from agenthub.bucketsync.identity.local import LocalIdentity
from agenthub.bucketsync.storage.local import LocalBucketStore
from tests.bucketsync.conftest import ORG, World, make_settings
from tests.bucketsync.test_longpoll_hangup import join_a_channel
from tests.support.servers import live_server

STREAMS = ["/v1/updates?as=agent-1&", "/v1/inbox/agent-1?", "/v1/channels/feed?as=agent-1&"]


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    settings = make_settings(tmp_path / "data")
    identity = LocalIdentity(settings.data_dir / "users.json", org=ORG)
    app = create_app(settings, store=LocalBucketStore(settings.data_dir), identity=identity)
    with live_server(app) as base, httpx.Client(base_url=base, timeout=30) as client:
        served = World(client, app.state.hub, identity)  # type: ignore[arg-type]
        served.agent("agent-1")
        served.agent("agent-2")
        join_a_channel(served, "agent-1")
        yield served


def test_updates_closes_with_the_top_level_cursor_like_inbox_and_feed(world: World) -> None:
    sent = world.raw("agent-2", "hello @agent-1", channel="ideas").json()["filename"]
    for stream in STREAMS:
        text = world.client.get(f"{stream}limit=1&order=desc&expand=true").text
        assert text.endswith(f'"cursor":"{sent}","watch":null}}'), (stream, text[-120:])


@pytest.mark.parametrize("stream", STREAMS)
@pytest.mark.parametrize("name", ["after", "before"])
@pytest.mark.parametrize("value", ["garbage", "<cursor>", "20260101-120000-000_agent-1"])
def test_a_bad_cursor_is_400_naming_the_parameter(
    world: World, stream: str, name: str, value: str
) -> None:
    wait = "&wait=25" if name == "after" else ""  # a parked read would answer in 25 s
    answer = world.client.get(f"{stream}{name}={value}{wait}")
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["code"] == "INVALID_QUERY"
    assert f"{name}=" in error["message"], error
    assert "cursor" in error["hint"] and "verbatim" in error["hint"]


def test_the_feed_refuses_a_channel_suffix_that_is_no_channel_name(world: World) -> None:
    answer = world.client.get("/v1/channels/feed?as=agent-1&after=20260101-120000-000_a.md~NO!")
    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == "INVALID_QUERY"


def test_every_cursor_a_stream_answered_is_accepted_back(world: World) -> None:
    world.raw("agent-2", "one @agent-1", channel="ideas")
    for stream in STREAMS:
        page = world.client.get(f"{stream}limit=1&order=asc").json()
        again = world.client.get(f"{stream}after={page['cursor']}&before=20260101")
        assert again.status_code == 200, (stream, again.text)
