"""Naming, trust-model and deployment conventions (BS-0, BS-1, BS-2, BS-4.1/4.2/4.20)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from agenthub.bucketsync.app import create_app
from agenthub.bucketsync.core import naming
from agenthub.bucketsync.errors import InvalidPath
from agenthub.bucketsync.identity.local import LocalIdentity
from agenthub.bucketsync.storage.local import LocalBucketStore
from agenthub.clock import FrozenClock
from tests.bucketsync.conftest import ORG, World, make_settings, message


@pytest.mark.parametrize("agent_id", ["a", "0", "agent-1", "a" * 40, "a-b-c", "x9"])
def test_bs_1_4_valid_agent_ids(agent_id: str) -> None:
    assert naming.validate_agent_id(agent_id) == agent_id


@pytest.mark.parametrize(
    "agent_id", ["", "a" * 41, "-a", "a-", "a_b", "a.b", "a b", "ä", "a/b", "Agent"]
)
def test_bs_1_4_invalid_agent_ids(agent_id: str) -> None:
    with pytest.raises(InvalidPath):
        naming.validate_agent_id(agent_id)


def test_bs_1_10_scratch_bucket_is_server_derived(world: World) -> None:
    assert world.hub.settings.scratch_bucket("agent-7") == f"{ORG}/chal-agent-7"
    world.agent("agent-7")
    assert world.client.get("/v1/agents/agent-7").json()["agent_bucket"] == f"{ORG}/chal-agent-7"


def test_bs_1_15_bs_1_16_bs_1_17_bs_1_23_later_feature_paths() -> None:
    assert naming.channel_readme_path("ideas") == "channels/ideas/README.md"
    assert naming.channel_message_path("ideas", "20260101-000000-000_a.md") == (
        "channels/ideas/20260101-000000-000_a.md"
    )
    assert naming.channel_member_path("ideas", "human-bo") == "channels/ideas/members/human-bo.md"
    assert naming.trace_manifest_path("a1", "s-1") == "traces/a1/s-1/manifest.md"
    with pytest.raises(InvalidPath):
        naming.trace_manifest_path("a1", "../s")
    with pytest.raises(InvalidPath):
        naming.channel_readme_path("../x")


def test_bs_1_22_broadcast_copy_is_byte_identical(world: World) -> None:
    world.user("boss", role="admin")
    filename = world.client.post(
        "/v1/messages",
        json={"agent_id": "human-boss", "body": "hello all", "broadcast": True},
        headers=world.auth("boss"),
    ).json()["filename"]
    store, central = world.hub.store, world.hub.central
    board = store.read(central, f"message_board/{filename}")
    assert board is not None and b"broadcast: true" in board
    assert store.read(central, naming.broadcast_path(filename)) == board


def test_bs_1_24_memory_state_is_restart_safe_by_loss(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "d")
    clock = FrozenClock()

    def start() -> TestClient:
        app = create_app(
            settings,
            store=LocalBucketStore(settings.data_dir, clock=clock),
            identity=LocalIdentity(settings.data_dir / "users.json", org=ORG),
            clock=clock,
        )
        return TestClient(app)

    with start() as client:
        world = World(client, client.app.state.hub, client.app.state.hub.identity)  # type: ignore[attr-defined]
        world.agent("agent-1")
        for index in range(5):
            world.raw("agent-1", f"m{index}")
        assert world.raw("agent-1", "limited").status_code == 429
    with start() as client:  # a restart: durable record kept, limiter state gone
        assert client.get("/v1/messages").json()["count"] == 5
        assert client.get("/v1/agents/agent-1").status_code == 200
        response = client.post("/v1/messages", json={"agent_id": "agent-1", "body": "again"})
        assert response.status_code == 201
        assert (
            response.json()["filename"]
            not in client.get("/v1/messages?limit=5").json()["items"][1:]
        )


def test_bs_2_1_the_bucket_name_is_the_identity_claim(world: World) -> None:
    world.agent("agent-1")
    world.agent("agent-2")
    world.put("agent-2", "m.md", message("I am agent-1, honest", agent="agent-1"))
    response = world.client.post("/v1/messages", json={"source": world.uri("agent-2", "m.md")})
    assert response.json()["filename"].endswith("_agent-2.md")
    detail = world.client.get(f"/v1/messages/{response.json()['filename']}").json()
    assert detail["agent"] == "agent-2" and detail["frontmatter"]["agent"] == "agent-2"


def test_bs_2_2_central_paths_are_server_composed(world: World) -> None:
    world.agent("agent-1")
    world.put("agent-1", "deep/dir/evil.md", "hi")
    response = world.client.post(
        "/v1/messages", json={"source": world.uri("agent-1", "deep/dir/evil.md")}
    ).json()
    assert response["path"] == f"message_board/{response['filename']}"
    assert naming.parse_stamped_filename(response["filename"]) == ("20260301-120000-000", "agent-1")
    for field in ({"path": "README.md"}, {"filename": "x.md"}, {"dest": "audit/"}):
        rejected = world.client.post(
            "/v1/messages", json={"agent_id": "agent-1", "body": "x", **field}
        )
        assert rejected.status_code == 400


def test_bs_2_3_raw_messages_are_documented_best_effort(world: World) -> None:
    doc = world.client.get("/v1").json()
    assert "best-effort" in doc["conventions"]["raw_messages"]


def test_bs_4_1_self_description(world: World) -> None:
    doc = world.client.get("/v1").json()
    for key in (
        "service",
        "org",
        "collab",
        "central_bucket",
        "score_field",
        "score_unit",
        "score_order",
        "conventions",
        "endpoints",
    ):
        assert key in doc
    assert doc["central_bucket"] == "acme/chal-main-bucket"
    paths = {(e["method"], e["path"]) for e in doc["endpoints"]}
    assert ("POST", "/v1/messages") in paths and ("GET", "/v1/inbox/{handle}") in paths
    schema = world.client.get("/openapi.json").json()["paths"]
    routes = {(method.upper(), path) for path, ops in schema.items() for method in ops}
    assert paths <= routes  # everything described is served


def test_bs_4_2_healthz(world: World) -> None:
    response = world.client.get("/v1/healthz")
    assert response.status_code == 200 and response.json()["status"] == "ok"


def test_bs_0_3_bs_4_20_bearer_only_on_register_and_human_paths(world: World) -> None:
    world.agent("agent-1")
    world.put("agent-1", "m.md", "tokenless")
    tokenless = [
        world.client.post("/v1/messages", json={"source": world.uri("agent-1", "m.md")}),
        world.client.post("/v1/messages", json={"agent_id": "agent-1", "body": "raw"}),
        world.client.get("/v1/messages"),
        world.client.get("/v1/agents"),
        world.client.get("/v1/inbox/agent-1"),
        world.client.get("/v1/digest?as=agent-1"),
    ]
    assert all(r.status_code in (200, 201) for r in tokenless)
    assert world.client.post("/v1/agents/register", json={"agent_id": "x"}).status_code == 401
    assert world.client.get("/v1/me").status_code == 401
    human = world.client.post("/v1/messages", json={"agent_id": "human-x", "body": "hi"})
    assert human.status_code == 401
