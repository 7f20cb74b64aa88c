"""Trace & stats sharing (seed §10): BS-10.1-10.13, against the local store."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from agenthub.bucketsync.clients import share_trace
from tests.bucketsync.conftest import World

SESSION = "11111111-2222-4333-8444-555555555555"
LOG = f"{SESSION}.jsonl"


def manifest(**overrides: Any) -> str:
    fields: dict[str, Any] = {
        "schema_version": 1,
        "harness": "claude-code",
        "session_id": SESSION,
        "model": "claude-sonnet-4-5",
        "tokens": {"input": 12, "output": 61, "cache_read": 15000, "cache_creation": 800},
        "tool_calls": 3,
        "started_at": "2026-03-02T10:00:00.000Z",
        "ended_at": "2026-03-02T10:05:00.000Z",
        **overrides,
    }
    fields = {k: v for k, v in fields.items() if v is not ...}
    return "---\n" + yaml.safe_dump(fields, sort_keys=False) + "---\n\nsummary\n"


def share(world: World, agent: str, text: str | None = None, *, share: str | None = None,
          session: str = SESSION, log: bytes | None = None, slash: str = "/") -> Any:  # fmt: skip
    if text is not None:
        assert world.put(agent, f"traces/{session}/manifest.md", text).status_code == 201
    if log is not None:
        assert world.put(agent, f"traces/{session}/{LOG}", log).status_code == 201
    body: dict[str, Any] = {"source": world.uri(agent, f"traces/{session}{slash}")}
    if share is not None:
        body["share"] = share
    return world.client.post("/v1/traces", json=body)


def test_bs_10_1_bs_1_23_stats_share_is_tokenless_and_defaults_to_stats(world: World) -> None:
    world.agent("agent-1")
    response = share(world, "agent-1", manifest())
    assert response.status_code == 201, response.text
    assert response.json()["share"] == "stats"
    assert response.json()["path"] == f"traces/agent-1/{SESSION}/"
    assert response.json()["manifest_path"] == f"traces/agent-1/{SESSION}/manifest.md"
    assert (response.json()["files_copied"], response.json()["bytes_copied"]) == (0, 0)


def test_bs_10_1_unregistered_agent_is_refused(world: World) -> None:
    world.agent("agent-1")
    world.user("bob")
    world._owner = {**world._owner, "agent-2": "bob"}
    world.create_bucket("agent-2", "bob")
    response = share(world, "agent-2", manifest())
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "NOT_REGISTERED"


@pytest.mark.parametrize(
    "path",
    # `traces/<session>` without the slash is the same folder (agent-collabs' form, issue 15)
    [f"traces/{SESSION}/manifest.md", "notes/x/", f"traces/{SESSION}/deeper/", "traces/"],
)
def test_bs_10_2_source_must_be_exactly_a_traces_session_folder(world: World, path: str) -> None:
    world.agent("agent-1")
    response = world.client.post("/v1/traces", json={"source": world.uri("agent-1", path)})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "INVALID_PATH"


def test_both_source_forms_promote_the_same_record(world: World) -> None:
    world.agent("agent-1")
    with_slash = share(world, "agent-1", manifest())
    without = share(world, "agent-1", manifest(tool_calls=5), slash="")
    assert (with_slash.status_code, without.status_code) == (201, 201)
    assert with_slash.json()["path"] == without.json()["path"] == f"traces/agent-1/{SESSION}/"
    listed = world.client.get("/v1/traces?expand=true").json()
    assert listed["count"] == 1 and listed["items"][0]["tool_calls"] == 5


def test_bs_10_3_manifest_required_and_session_id_must_match(world: World) -> None:
    world.agent("agent-1")
    missing = share(world, "agent-1", None)
    mismatched = share(world, "agent-1", manifest(session_id="other-session"))
    assert missing.status_code == 400 and missing.json()["error"]["code"] == "INVALID_PATH"
    assert mismatched.status_code == 400 and mismatched.json()["error"]["code"] == "INVALID_PATH"


@pytest.mark.parametrize(
    "overrides",
    [
        {"harness": ...},
        {"tokens": {"input": -1}},
        {"tokens": {"output": 1.5}},
        {"tokens": "lots"},
        {"tool_calls": -2},
        {"started_at": "yesterday"},
        {"cost_usd": -0.1},
    ],
)
def test_bs_10_4_lenient_validation_still_rejects_bad_values(
    world: World, overrides: dict[str, Any]
) -> None:
    world.agent("agent-1")
    response = share(world, "agent-1", manifest(**overrides))
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "INVALID_FRONTMATTER"


def test_bs_10_4_minimal_manifest_with_unknowns_is_accepted(world: World) -> None:
    world.agent("agent-1")
    text = (
        "---\nschema_version: 1\nharness: my-own-harness\nsession_id: "
        + SESSION
        + "\ntokens: null\nextra_field: kept\n---\n"
    )
    response = share(world, "agent-1", text)
    assert response.status_code == 201, response.text
    assert response.json()["completeness"] == "partial"


def test_bs_10_5_server_stamps_win_over_client_values(world: World, clock: Any) -> None:
    world.agent("agent-1")
    share(
        world,
        "agent-1",
        manifest(agent="someone-else", via="raw", completeness="full", share="full"),
    )
    fm = world.client.get(f"/v1/traces/agent-1/{SESSION}").json()["frontmatter"]
    assert fm["agent"] == "agent-1"
    assert fm["via"] == "bucket"
    assert fm["share"] == "stats"
    assert fm["promoted_at"] == "2026-03-01T12:00:00.000Z"
    assert fm["completeness"] == "full"


def test_bs_10_6_full_share_copies_only_the_declared_log(world: World) -> None:
    world.agent("agent-1")
    world.put("agent-1", f"traces/{SESSION}/stale-old.jsonl", b"old")
    response = share(
        world, "agent-1", manifest(native_log_file=LOG), share="full", log=b'{"type":"user"}\n'
    )
    assert response.status_code == 201, response.text
    central = world.hub.store.list(world.hub.central, f"traces/agent-1/{SESSION}/", recursive=True)
    assert sorted(e.path.rsplit("/", 1)[1] for e in central) == [LOG, "manifest.md"]
    copied = world.hub.store.read(world.hub.central, f"traces/agent-1/{SESSION}/{LOG}")
    assert copied == b'{"type":"user"}\n'


@pytest.mark.parametrize(
    ("declared", "code"),
    [
        (None, "INVALID_FRONTMATTER"),  # the manifest lacks the field, as agent-collabs says
        ("manifest.md", "INVALID_PATH"),
        ("../x.jsonl", "INVALID_PATH"),
        ("absent.jsonl", "INVALID_PATH"),
    ],
)
def test_bs_10_6_full_share_needs_a_declared_present_log(
    world: World, declared: str | None, code: str
) -> None:
    world.agent("agent-1")
    text = manifest(native_log_file=declared) if declared else manifest()
    response = share(world, "agent-1", text, share="full")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == code


def test_bs_10_7_full_share_over_the_size_cap_is_413(world: World) -> None:
    world.agent("agent-1")
    world.hub.settings.sync_max_bytes = 10
    response = share(world, "agent-1", manifest(native_log_file=LOG), share="full", log=b"x" * 11)
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "SYNC_TOO_LARGE"


def test_bs_10_8_records_are_updatable_and_stats_never_downgrades_full(world: World) -> None:
    world.agent("agent-1")
    assert share(world, "agent-1", manifest()).json()["share"] == "stats"
    upgraded = share(world, "agent-1", manifest(native_log_file=LOG), share="full", log=b"{}\n")
    again = share(world, "agent-1", manifest(tool_calls=9))
    assert upgraded.json()["share"] == "full"
    assert again.json()["share"] == "full"
    trace = world.client.get(f"/v1/traces/agent-1/{SESSION}").json()
    assert trace["frontmatter"]["tool_calls"] == 9
    assert trace["log_files"] == [f"traces/agent-1/{SESSION}/{LOG}"]
    assert world.client.get("/v1/traces").json()["count"] == 1


def test_bs_10_9_completeness_full_only_for_an_adapted_harness_with_tokens_and_tools(
    world: World,
) -> None:
    world.agent("agent-1")
    full = share(world, "agent-1", manifest()).json()["completeness"]
    no_tools = share(world, "agent-1", manifest(tool_calls=None)).json()["completeness"]
    other = share(world, "agent-1", manifest(harness="gemini-cli")).json()["completeness"]
    assert (full, no_tools, other) == ("full", "partial", "partial")


def test_bs_10_10_list_grammar_filters_and_primary_log_file(world: World) -> None:
    world.agent("agent-1")
    world.agent("agent-2")
    share(world, "agent-1", manifest(native_log_file=LOG), share="full", log=b"{}\n")
    share(
        world,
        "agent-2",
        manifest(session_id="s-2", harness="codex", model="gpt-5-codex"),
        session="s-2",
    )

    ids = world.client.get("/v1/traces").json()
    codex = world.client.get("/v1/traces", params={"harness": "codex"}).json()
    expanded = world.client.get("/v1/traces", params={"expand": "true", "share": "full"}).json()

    assert ids["items"] == ["agent-2/s-2", f"agent-1/{SESSION}"]
    assert codex["items"] == ["agent-2/s-2"] and codex["matched"] == 1 and codex["count"] == 2
    assert expanded["items"][0]["primary_log_file"] == f"traces/agent-1/{SESSION}/{LOG}"
    assert world.client.get("/v1/traces", params={"agent": "agent-1"}).json()["items"] == [
        f"agent-1/{SESSION}"
    ]


def test_bs_10_11_one_trace_and_404(world: World) -> None:
    world.agent("agent-1")
    share(world, "agent-1", manifest())
    trace = world.client.get(f"/v1/traces/agent-1/{SESSION}").json()
    assert set(trace) >= {"agent", "session_id", "frontmatter", "body", "path", "log_files"}
    missing = world.client.get("/v1/traces/agent-1/nope")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "NOT_FOUND"


def test_bs_10_12_stats_are_a_reported_floor(world: World) -> None:
    world.agent("agent-1")
    share(world, "agent-1", manifest(cost_usd=0.5))
    share(
        world,
        "agent-1",
        manifest(
            session_id="s-2",
            tokens={"input": 100, "output": 5, "cache_read": 0, "cache_creation": None},
            tool_calls=1,
        ),
        session="s-2",
    )
    share(world, "agent-1", manifest(session_id="s-3", tokens=None), session="s-3")

    body = world.client.get("/v1/stats").json()

    assert body["sessions"] == 3
    assert body["sessions_missing_tokens"] == 1
    assert body["tokens_reported"] == {
        "input": 112,
        "output": 66,
        "cache_read": 15000,
        "cache_creation": 800,
    }
    assert body["tokens"] == {
        "total": 15978,
        "input": 112,
        "output": 66,
        "cache_read": 15000,
        "cache_creation": 800,
        "reasoning": 0,
    }
    assert (body["sessions_counted"], body["agents_reporting"]) == (2, 1)
    assert body["tool_calls"] == 4
    assert body["cost_usd"] == 0.5


def test_bs_10_13_digest_stats_line_appears_after_the_first_trace(world: World) -> None:
    world.agent("agent-1")
    before = world.client.get("/v1/digest").json()
    assert before["stats"] is None and before["stats_line"] is None
    share(world, "agent-1", manifest())
    after = world.client.get("/v1/digest").json()
    assert after["stats_line"].startswith("1 sessions shared, 15,873 tokens reported")
    assert after["stats"] == {"total_tokens": 15873, "sessions_counted": 1, "agents_reporting": 1}


def test_bs_10_14_the_client_is_served_byte_for_byte(world: World) -> None:
    response = world.client.get("/v1/share_trace.py")
    assert response.status_code == 200
    assert response.content == Path(share_trace.__file__).read_bytes()


def test_share_trace_client_round_trip_over_http(world: World, tmp_path: Path) -> None:
    """The real client against a real server: upload to the scratch bucket, promote."""
    from tests.support.servers import live_server

    world.agent("agent-1")
    log = tmp_path / f"{SESSION}.jsonl"
    log.write_text(json.dumps({"type": "assistant", "sessionId": SESSION, "requestId": "r", "timestamp": "2026-03-02T10:00:00.000Z",
                               "message": {"id": "m", "model": "claude-sonnet-4-5", "usage": {"input_tokens": 3, "output_tokens": 4},
                                           "content": [{"type": "tool_use", "id": "t1", "name": "Bash"}]}}) + "\n")  # fmt: skip
    with live_server(world.client.app) as base:
        result = subprocess.run(
            [sys.executable, share_trace.__file__, "--log", str(log), "--full", "--yes",
             "--bucket", world.bucket("agent-1"), "--url", base, "--token", world.tokens["user-agent-1"]],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["share"] == "full"
    trace = world.client.get(f"/v1/traces/agent-1/{SESSION}").json()
    assert trace["frontmatter"]["tokens"]["output"] == 4
    assert trace["frontmatter"]["completeness"] == "full"
    assert trace["log_files"] == [f"traces/agent-1/{SESSION}/{SESSION}.jsonl"]
