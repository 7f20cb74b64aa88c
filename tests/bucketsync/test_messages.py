"""Promoting messages: source and raw variants, stamping, limits, dedup, fan-out."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from agenthub.bucketsync.core.dedup import PromotionDedup
from agenthub.bucketsync.core.limiter import Rate
from agenthub.bucketsync.errors import AlreadyPromoted
from tests.bucketsync.conftest import World, in_process_limiter, message


def board_file(world: World, filename: str) -> str:
    data = world.hub.store.read(world.hub.central, f"message_board/{filename}")
    assert data is not None
    return data.decode()


def test_bs_4_5_promote_returns_the_documented_shape(world: World) -> None:
    world.agent("agent-1")
    response = world.promote("agent-1", "m.md", "hello")
    assert response.status_code == 201
    body = response.json()
    assert body == {
        "filename": "20260301-120000-000_agent-1.md",
        "via": "bucket",
        "path": "message_board/20260301-120000-000_agent-1.md",
        "mentions_delivered": [],
        "broadcast": False,
        "channel": None,
        "auto_subscribed": False,
        "reach": {"woken": [], "next_poll": [], "unreachable": []},
        "mentions_unknown": [],  # ours, beside the documented shape (issue 28)
    }


def test_bs_1_12_message_filename_is_utc_stamp_and_agent(world: World) -> None:
    world.agent("agent-1")
    first = world.raw("agent-1", "one").json()["filename"]
    world.hub.clock.advance(61.5)  # type: ignore[attr-defined]
    second = world.raw("agent-1", "two").json()["filename"]
    assert first == "20260301-120000-000_agent-1.md"
    assert second == "20260301-120101-500_agent-1.md"
    assert sorted([second, first]) == [first, second]


def test_bs_3_1_server_stamps_overwrite_client_values(world: World) -> None:
    world.agent("agent-1")
    text = message("body", agent="agent-9", timestamp="1999-01-01", via="raw", type="note")
    filename = world.promote("agent-1", "m.md", text).json()["filename"]
    stored = board_file(world, filename)
    assert "agent: agent-1" in stored and "via: bucket" in stored
    assert "timestamp: '2026-03-01T12:00:00.000Z'" in stored
    assert "agent-9" not in stored and "1999" not in stored


def test_bs_3_3_client_fields_are_preserved(world: World) -> None:
    world.agent("agent-1")
    filename = world.promote("agent-1", "m.md", message("body", type="question")).json()["filename"]
    record = world.client.get(f"/v1/messages/{filename}").json()
    assert record["frontmatter"]["type"] == "question"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("---\n- a\n- b\n---\nbody", "not a mapping"),
        ("---\nkey: [unclosed\n---\nbody", "not valid YAML"),
        ("---\n'just a string'\n---\nbody", "not a mapping"),
    ],
)
def test_bs_3_8_non_mapping_or_unparseable_frontmatter_is_400(
    world: World, text: str, expected: str
) -> None:
    world.agent("agent-1")
    response = world.promote("agent-1", "m.md", text)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "INVALID_FRONTMATTER"
    assert expected in error["message"]


def test_bs_3_8_non_utf8_source_is_400(world: World) -> None:
    world.agent("agent-1")
    world.put("agent-1", "m.md", b"\xff\xfe caf\xe9")
    response = world.client.post("/v1/messages", json={"source": world.uri("agent-1", "m.md")})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "INVALID_FRONTMATTER"


@pytest.mark.parametrize("key", ["filename", "cursor", "next", "watch", "items"])
def test_bs_13_26_response_shaped_frontmatter_keys_are_refused(world: World, key: str) -> None:
    world.agent("agent-1")
    response = world.promote("agent-1", "m.md", message("body", **{key: "zzzz.md"}))
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "INVALID_FRONTMATTER"
    assert repr(key) in error["message"]
    assert world.client.get("/v1/messages").json()["count"] == 0


def test_bs_13_27_nested_values_are_refused(world: World) -> None:
    world.agent("agent-1")
    nested = "---\ntype:\n  filename: zzz.md\n---\nbody"
    nested_refs = "---\nrefs:\n  - {filename: zzz.md}\n---\nbody"
    for text in (nested, nested_refs):
        response = world.promote("agent-1", "m.md", text)
        assert response.status_code == 400
        assert response.json()["error"]["code"] == "INVALID_FRONTMATTER"


def test_bs_4_29_source_outside_the_scratch_convention_is_invalid_path(world: World) -> None:
    world.agent("agent-1")
    for source in (
        "s3://buckets/acme/chal-agent-1/m.md",
        "hf://buckets/other/chal-agent-1/m.md",
        "hf://buckets/acme/wrong-agent-1/m.md",
        "hf://buckets/acme/chal-Agent-1/m.md",
    ):
        response = world.client.post("/v1/messages", json={"source": source})
        assert response.status_code == 400, source
        assert response.json()["error"]["code"] == "INVALID_PATH"


@pytest.mark.parametrize(
    "path",
    [
        "../agents/x.md",
        "a/../../m.md",
        "%2e%2e/m.md",
        "a%2fb.md",
        ".hidden.md",
        "dir/.git/config",
        "a//b.md",
        "./m.md",
        "a\x00b.md",
        "a\nb.md",
        "a\u202eb.md",
        "a\\..\\b.md",
    ],
)
def test_bs_4_30_hostile_source_paths_are_invalid_path(world: World, path: str) -> None:
    world.agent("agent-1")
    response = world.client.post("/v1/messages", json={"source": world.uri("agent-1", path)})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "INVALID_PATH"


def test_bs_4_31_source_of_unregistered_agent_is_404(world: World) -> None:
    response = world.client.post("/v1/messages", json={"source": world.uri("ghost", "m.md")})
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "NOT_REGISTERED"


def test_bs_4_32_missing_source_is_404_with_cp_hint(world: World) -> None:
    world.agent("agent-1")
    uri = world.uri("agent-1", "nope.md")
    response = world.client.post("/v1/messages", json={"source": uri})
    assert response.status_code == 404
    error = response.json()["error"]
    assert error["code"] == "SOURCE_NOT_FOUND"
    assert error["hint"] == f"agenthub buckets cp <local file> {uri}"


def test_bs_4_33_one_audit_row_per_promotion(world: World) -> None:
    world.agent("agent-1")
    before = world.hub.audit.written
    world.promote("agent-1", "m.md", "hello")
    assert world.hub.audit.written == before + 1


def test_bs_4_34_raw_post_needs_a_registered_agent(world: World) -> None:
    response = world.raw("ghost", "hi")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "NOT_REGISTERED"


def test_bs_4_35_raw_is_stamped_via_raw_and_cannot_override(world: World) -> None:
    world.agent("agent-1")
    response = world.client.post(
        "/v1/messages", json={"agent_id": "agent-1", "body": "hi", "via": "bucket"}
    )
    assert response.status_code == 400  # unknown request fields are refused, not honoured
    created = world.raw("agent-1", "hi")
    assert created.json()["via"] == "raw"
    assert "via: raw" in board_file(world, created.json()["filename"])


def test_bs_4_36_bs_5_4_raw_limiter_5_per_minute_then_refills(world: World) -> None:
    world.agent("agent-1")
    codes = [world.raw("agent-1", f"m{i}").status_code for i in range(6)]
    assert codes == [201] * 5 + [429]
    limited = world.raw("agent-1", "again")
    assert limited.json()["error"]["code"] == "RATE_LIMITED"
    assert int(limited.headers["Retry-After"]) >= 1
    world.hub.clock.advance(12)  # type: ignore[attr-defined]
    assert world.raw("agent-1", "after refill").status_code == 201


def test_bs_5_4_raw_hourly_bucket_refills_one_token_per_two_minutes(world: World) -> None:
    world.agent("agent-1")
    sent = 0
    for _ in range(7):  # 5 per minute drains the 30-token hourly bucket in the 7th minute
        for _ in range(5):
            if world.raw("agent-1", f"m{sent}").status_code == 201:
                sent += 1
        world.hub.clock.advance(60)  # type: ignore[attr-defined]
    # 30 initial tokens + 0.5 per minute over the 6 minutes before the last round
    assert sent == 33
    hourly = in_process_limiter(world.hub.limiters.raw_messages).tokens("agent-1")[1]
    assert hourly == pytest.approx(0.5)


def test_bs_5_9_compound_rejection_refunds_the_other_bucket(world: World) -> None:
    world.agent("agent-1")
    limiter = in_process_limiter(world.hub.limiters.raw_messages)
    for i in range(5):
        world.raw("agent-1", f"m{i}")
    assert limiter.tokens("agent-1")[1] == pytest.approx(25)
    assert world.raw("agent-1", "limited").status_code == 429
    assert limiter.tokens("agent-1")[1] == pytest.approx(25)


def test_bs_4_36_raw_limit_is_per_agent(world: World) -> None:
    world.agent("agent-1")
    world.agent("agent-2")
    for i in range(5):
        world.raw("agent-1", f"m{i}")
    assert world.raw("agent-1", "x").status_code == 429
    assert world.raw("agent-2", "x").status_code == 201


def test_bs_5_3_bucket_source_writes_burst_20_per_source_bucket(world: World) -> None:
    world.agent("agent-1")
    world.agent("agent-2")
    codes = [world.promote("agent-1", f"m{i}.md", f"n{i}").status_code for i in range(21)]
    assert codes == [201] * 20 + [429]
    assert world.promote("agent-2", "m.md", "other bucket").status_code == 201
    world.hub.clock.advance(3)  # type: ignore[attr-defined]
    assert world.promote("agent-1", "late.md", "refilled").status_code == 201


def test_bs_4_38_exactly_one_of_source_or_body(world: World) -> None:
    world.agent("agent-1")
    for payload in (
        {},
        {"agent_id": "agent-1"},
        {"body": "no agent"},
        {"source": world.uri("agent-1", "m.md"), "agent_id": "agent-1", "body": "both"},
    ):
        response = world.client.post("/v1/messages", json=payload)
        assert response.status_code == 400, payload
        assert response.json()["error"]["code"] == "BODY_OR_SOURCE_REQUIRED"


def test_bs_4_39_default_type_and_refs_normalisation(world: World) -> None:
    world.agent("agent-1")
    world.user("alice")
    raw = world.raw("agent-1", "hi", refs="a.md, b.md  c.md").json()["filename"]
    record = world.client.get(f"/v1/messages/{raw}").json()["frontmatter"]
    assert record["type"] == "agent"
    assert record["refs"] == "a.md, b.md  c.md"  # kept as written, as agent-collabs does
    human = world.client.post(
        "/v1/messages",
        json={"agent_id": "human-alice", "body": "hello"},
        headers=world.auth("alice"),
    )
    human_fm = world.client.get(f"/v1/messages/{human.json()['filename']}").json()["frontmatter"]
    assert human_fm["type"] == "user"


def test_bs_4_40_human_post_needs_matching_bearer(world: World) -> None:
    world.user("Alice")
    world.user("bob")
    ok = world.client.post(
        "/v1/messages", json={"agent_id": "human-alice", "body": "hi"}, headers=world.auth("Alice")
    )
    assert ok.status_code == 201
    assert ok.json()["via"] == "dashboard"
    wrong = world.client.post(
        "/v1/messages", json={"agent_id": "human-alice", "body": "hi"}, headers=world.auth("bob")
    )
    assert wrong.status_code == 403
    assert wrong.json()["error"]["code"] == "IDENTITY_MISMATCH"
    anonymous = world.client.post("/v1/messages", json={"agent_id": "human-alice", "body": "hi"})
    assert anonymous.status_code == 401


def test_bs_4_40_human_post_needs_org_membership(world: World) -> None:
    token = world.user("carol")
    users = world.hub.settings.data_dir / "users.json"
    data = json.loads(users.read_text())
    data["users"]["carol"]["role"] = None  # membership revoked, token still known
    users.write_text(json.dumps(data))
    response = world.client.post(
        "/v1/messages",
        json={"agent_id": "human-carol", "body": "hi"},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "IDENTITY_MISMATCH"


def test_bs_5_10_duplicate_source_is_409_with_existing_filename(world: World) -> None:
    world.agent("agent-1")
    first = world.promote("agent-1", "m.md", "same bytes").json()["filename"]
    world.put("agent-1", "copy.md", "same bytes")
    again = world.client.post("/v1/messages", json={"source": world.uri("agent-1", "copy.md")})
    assert again.status_code == 409
    error = again.json()["error"]
    assert error["code"] == "ALREADY_PROMOTED"
    assert first in error["hint"]
    assert world.client.get("/v1/messages").json()["count"] == 1


def test_bs_5_11_dedup_key_includes_the_destination_folder() -> None:
    dedup = PromotionDedup(10)
    with dedup.claim(b"bytes", "message_board/") as written:
        written.append("a.md")
    with dedup.claim(b"bytes", "channels/x/") as written:
        written.append("b.md")
    with pytest.raises(AlreadyPromoted) as exc, dedup.claim(b"bytes", "channels/x/"):
        pass
    assert exc.value.filename == "b.md"


def test_bs_5_10_failed_promotion_does_not_poison_dedup(world: World) -> None:
    world.agent("agent-1")
    world.put("agent-1", "m.md", "---\nfilename: x\n---\nbad")
    assert (
        world.client.post("/v1/messages", json={"source": world.uri("agent-1", "m.md")}).status_code
        == 400
    )
    world.put("agent-1", "m.md", "good")
    assert (
        world.client.post("/v1/messages", json={"source": world.uri("agent-1", "m.md")}).status_code
        == 201
    )


def test_bs_5_10_dedup_lru_is_bounded() -> None:
    dedup = PromotionDedup(2)
    for index in range(3):
        with dedup.claim(f"b{index}".encode(), "message_board/") as written:
            written.append(f"{index}.md")
    with dedup.claim(b"b0", "message_board/") as written:  # evicted -> allowed again
        written.append("again.md")


def test_fifty_concurrent_same_millisecond_posts_get_distinct_files(world: World) -> None:
    world.agent("agent-1")
    limiter = in_process_limiter(world.hub.limiters.raw_messages)
    limiter._rates = [Rate(1000, 60.0), Rate(1000, 60.0)]
    barrier = threading.Barrier(50)

    def post(index: int) -> str:
        barrier.wait()
        response = world.raw("agent-1", f"message {index}")
        assert response.status_code == 201, response.text
        return str(response.json()["filename"])

    with ThreadPoolExecutor(max_workers=50) as pool:
        filenames = list(pool.map(post, range(50)))
    assert len(set(filenames)) == 50
    board = world.hub.store.list(world.hub.central, "message_board/")
    assert len(board) == 50
    bodies = {
        world.hub.store.read(world.hub.central, entry.path).decode().rsplit("\n\n", 1)[-1].strip()  # type: ignore[union-attr]
        for entry in board
    }
    assert bodies == {f"message {i}" for i in range(50)}


def test_oversized_raw_body_is_413(world: World) -> None:
    world.agent("agent-1")
    response = world.raw("agent-1", "x" * (world.hub.settings.max_source_bytes + 1))
    assert response.status_code == 413
    assert world.client.get("/v1/messages").json()["count"] == 0


def test_oversized_request_is_refused_before_reading(world: World) -> None:
    response = world.client.post(
        "/v1/messages",
        content=b"{" + b" " * (world.hub.settings.max_request_bytes + 1) + b"}",
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "PAYLOAD_TOO_LARGE"


def test_bs_11_8_agents_cannot_broadcast(world: World) -> None:
    world.agent("agent-1")
    response = world.raw("agent-1", "all of you", broadcast=True)
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "NOT_ORGANIZER"
    spoof = world.promote("agent-1", "m.md", message("hi", broadcast="true"))
    assert spoof.json()["error"]["code"] == "NOT_ORGANIZER"
