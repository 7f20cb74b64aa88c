"""Registration: bearer whoami + `.bucket-sync-handshake` (seed §4), agents read side."""

from __future__ import annotations

import json

from agenthub.bucketsync.core import naming
from tests.bucketsync.conftest import ORG, SLUG, World


def _ready(world: World, agent_id: str, user: str) -> None:
    if user not in world.tokens:
        world.user(user)
    world._owner = {**world._owner, agent_id: user}
    world.create_bucket(agent_id, user)
    world.put(agent_id, ".bucket-sync-handshake", user)


def test_bs_4_3_register_returns_filename_bucket_and_user(world: World) -> None:
    _ready(world, "agent-1", "alice")
    response = world.register("agent-1", "alice", tools=["bash", "python"])
    assert response.status_code == 201
    assert response.json() == {
        "filename": "agent-1.md",
        "agent_bucket": f"{ORG}/{SLUG}-agent-1",
        "hf_user": "alice",
    }


def test_bs_1_11_bs_3_2_registration_file_is_server_stamped(world: World) -> None:
    _ready(world, "agent-1", "alice")
    world.register("agent-1", "alice", model="gpt-x", harness="codex")
    data = world.hub.store.read(world.hub.central, "agents/agent-1.md")
    assert data is not None
    text = data.decode()
    for line in (
        "agent_name: agent-1",
        "hf_user: alice",
        f"agent_bucket: {ORG}/{SLUG}-agent-1",
        "joined: '2026-03-01T12:00:00.000Z'",
        "agent_model: gpt-x",
        "agent_harness: codex",
    ):
        assert line in text


def test_bs_4_21_missing_bucket_is_412_with_create_command(world: World) -> None:
    world.user("alice")
    response = world.register("agent-1", "alice")
    assert response.status_code == 412
    error = response.json()["error"]
    assert error["code"] == "BUCKET_MISSING"
    assert error["hint"] == f"agenthub buckets create {ORG}/{SLUG}-agent-1"


def test_bs_4_22_missing_handshake_is_403_with_upload_hint(world: World) -> None:
    world.user("alice")
    world._owner = {**world._owner, "agent-1": "alice"}
    world.create_bucket("agent-1", "alice")
    response = world.register("agent-1", "alice")
    assert response.status_code == 403
    error = response.json()["error"]
    assert error["code"] == "BUCKET_NOT_OWNED_BY_CALLER"
    assert "agenthub buckets cp" in error["hint"] and naming.HANDSHAKE_FILE in error["hint"]


def test_bs_4_22_forged_handshake_naming_someone_else_is_refused(world: World) -> None:
    world.user("alice")
    _ready(world, "agent-1", "mallory")  # mallory created the bucket...
    world.put("agent-1", ".bucket-sync-handshake", "alice")  # ...and names alice in it
    as_mallory = world.register("agent-1", "mallory")
    assert as_mallory.json()["error"]["code"] == "BUCKET_NOT_OWNED_BY_CALLER"
    # alice's token matches the handshake, but the local store knows who created the bucket
    as_alice = world.register("agent-1", "alice")
    assert as_alice.status_code == 403
    assert as_alice.json()["error"]["code"] == "BUCKET_NOT_OWNED_BY_CALLER"


def test_bs_4_22_bystander_cannot_write_another_agents_handshake(world: World) -> None:
    _ready(world, "agent-1", "alice")
    world.user("mallory")
    forged = world.put("agent-1", ".bucket-sync-handshake", "mallory", user="mallory")
    assert forged.status_code == 403
    assert world.register("agent-1", "mallory").json()["error"]["code"] == (
        "BUCKET_NOT_OWNED_BY_CALLER"
    )


def test_bs_4_23_missing_or_malformed_bearer_is_401(world: World) -> None:
    _ready(world, "agent-1", "alice")
    body = {"agent_id": "agent-1"}
    missing = world.client.post("/v1/agents/register", json=body)
    basic = world.client.post(
        "/v1/agents/register", json=body, headers={"Authorization": "Basic abc"}
    )
    unknown = world.client.post(
        "/v1/agents/register", json=body, headers={"Authorization": "Bearer nope"}
    )
    for response in (missing, basic, unknown):
        assert response.status_code == 401
        assert response.json()["error"]["code"] == "UNAUTHORIZED"


def test_bs_4_24_reregistering_needs_force(world: World) -> None:
    world.agent("agent-1", "alice")
    again = world.register("agent-1", "alice")
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "AGENT_ID_TAKEN"
    forced = world.register("agent-1", "alice", model="m2", force=True)
    assert forced.status_code == 201
    assert world.client.get("/v1/agents/agent-1").json()["model"] == "m2"


def test_bs_1_8_another_user_cannot_take_a_registered_id(world: World) -> None:
    world.agent("agent-1", "alice")
    world.user("bob")
    world.put("agent-1", ".bucket-sync-handshake", "bob", user="alice")
    response = world.register("agent-1", "bob", force=True)
    assert response.status_code == 403  # the local store knows alice created the bucket
    assert world.client.get("/v1/agents/agent-1").json()["hf_user"] == "alice"


def test_bs_1_9_one_user_registers_many_agents(world: World) -> None:
    world.agent("agent-1", "alice")
    world.agent("agent-2", "alice")
    users = {item["hf_user"] for item in world.client.get("/v1/agents?expand=true").json()["items"]}
    assert users == {"alice"}


def test_bs_1_5_upper_case_id_is_refused_with_lowercase_hint(world: World) -> None:
    world.user("alice")
    response = world.register("Agent-1", "alice")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "INVALID_PATH"
    assert "'agent-1'" in error["hint"]


def test_bs_1_6_human_ids_are_reserved(world: World) -> None:
    world.user("alice")
    for agent_id in ("human", "human-alice"):
        response = world.register(agent_id, "alice")
        assert response.status_code == 400
        assert "reserved" in response.json()["error"]["message"]


def test_bs_4_25_bio_source_from_own_bucket_becomes_the_bio(world: World) -> None:
    _ready(world, "agent-1", "alice")
    world.put("agent-1", "bio.md", "---\nx: 1\n---\nI solve puzzles.\n")
    response = world.register("agent-1", "alice", bio_source=world.uri("agent-1", "bio.md"))
    assert response.status_code == 201
    assert world.client.get("/v1/agents/agent-1").json()["bio"] == "I solve puzzles."


def test_bs_4_25_bio_source_in_another_bucket_is_403(world: World) -> None:
    world.agent("agent-2", "bob")
    world.put("agent-2", "bio.md", "not mine")
    _ready(world, "agent-1", "alice")
    response = world.register("agent-1", "alice", bio_source=world.uri("agent-2", "bio.md"))
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "BUCKET_NOT_OWNED_BY_CALLER"


def test_bs_4_26_bs_5_5_registration_is_limited_to_3_per_minute(world: World) -> None:
    world.user("alice")
    codes = [world.register("agent-1", "alice").status_code for _ in range(4)]
    assert codes == [412, 412, 412, 429]
    limited = world.register("agent-1", "alice")
    assert int(limited.headers["Retry-After"]) >= 1


def test_bs_4_27_registration_is_write_through(world: World) -> None:
    world.client.get("/v1/agents")  # warm the listing cache; the TTL never passes here
    world.agent("agent-1", "alice")
    assert world.client.get("/v1/agents").json()["items"] == ["agent-1.md"]
    assert world.raw("agent-1", "hi").status_code == 201


def test_bs_4_28_registration_is_audited_with_hf_user(world: World) -> None:
    world.agent("agent-1", "alice")
    path = world.hub.audit.path_for_now()
    rows = world.hub.store.read(world.hub.settings.audit_bucket, path)
    assert rows is not None
    row = json.loads(rows.decode().splitlines()[-1])
    assert row["route"] == "/v1/agents/register"
    assert row["hf_user"] == "alice"
    assert row["target_path"] == "agents/agent-1.md"


def test_bs_4_4_agent_detail_and_not_registered(world: World) -> None:
    world.agent("agent-1", "alice")
    detail = world.client.get("/v1/agents/agent-1").json()
    assert set(detail) == {
        "agent_id",
        "hf_user",
        "model",
        "harness",
        "tools",
        "agent_bucket",
        "joined",
        "bio",
    }
    missing = world.client.get("/v1/agents/agent-9")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "NOT_REGISTERED"


def test_bs_9_2_revoking_a_user_keeps_the_registration(world: World) -> None:
    world.agent("agent-1", "alice")
    users_file = world.hub.settings.data_dir / "users.json"
    data = json.loads(users_file.read_text())
    del data["users"]["alice"]
    users_file.write_text(json.dumps(data))
    assert world.client.get("/v1/agents/agent-1").status_code == 200
    assert world.hub.store.read(world.hub.central, "agents/agent-1.md") is not None


def test_agent_ids_whose_bucket_is_the_central_bucket_are_reserved(world: World) -> None:
    # CENTRAL_BUCKET defaults to {ORG}/{SLUG}-main-bucket: agent "main-bucket" would make the
    # central record its "scratch bucket" and every file in it attributable to that agent.
    world.user("alice")
    response = world.register("main-bucket", "alice")
    assert response.status_code == 400
    assert "reserved" in response.json()["error"]["message"]
    source = f"hf://buckets/{world.hub.central}/message_board/x.md"
    promoted = world.client.post("/v1/messages", json={"source": source})
    assert promoted.status_code == 400
    assert promoted.json()["error"]["code"] == "INVALID_PATH"
