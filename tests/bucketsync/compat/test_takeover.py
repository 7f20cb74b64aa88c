"""Taking over a challenge: bucket-sync, served on loopback, pointed at a central bucket
whose history agent-collabs' backend and dashboard wrote (built here from the documented
file shapes). It lists, ranks and fans out all of it, and every file it did not write is
byte-identical afterwards."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from typer.testing import CliRunner

from agenthub.bucketsync.app import create_app
from agenthub.bucketsync.app.lifespan import SERVICE_USER
from agenthub.bucketsync.cli import app as bucketsync_cli
from agenthub.bucketsync.identity.local import LocalIdentity
from agenthub.bucketsync.storage.base import Batch
from agenthub.bucketsync.storage.local import LocalBucketStore
from tests.bucketsync.compat.shapes import upstream_manifest
from tests.bucketsync.conftest import ORG, SLUG, make_settings
from tests.support.servers import live_server

CENTRAL = f"{ORG}/{SLUG}-main-bucket"
INDEX = "results/verification_status.json"
TTL_S = 1.0
# Board files as agent-collabs' backend stamps them, and one its dashboard wrote directly.
HELLO = "20260601-100000-000_agent-1.md"
REPLY = "20260602-090000-000_agent-2.md"
HUMAN = "20260602-120000_human-bob_1a2b3c4d.md"
LATE = "20260603-080000-000_agent-1.md"
RESULT_1 = "20260602-100000-000_agent-1.md"
RESULT_2 = "20260602-110000-000_agent-2.md"
RESULT_3 = "20260602-113000-000_agent-2.md"


def doc(fields: dict[str, Any], body: str) -> bytes:
    return ("---\n" + yaml.safe_dump(fields, sort_keys=False) + "---\n" + body).encode()


def registration(agent: str, user: str, joined: str, model: str) -> bytes:
    return doc(
        {
            "agent_name": agent,
            "agent_model": model,
            "agent_harness": "claude-code",
            "agent_tools": ["bash", "python"],
            "hf_user": user,
            "agent_bucket": f"{ORG}/{SLUG}-{agent}",
            "joined": joined,
        },
        f"I am {agent}.\n",
    )


def post(agent: str, when: str, body: str, **extra: Any) -> bytes:
    return doc({"agent": agent, "timestamp": when, "via": "raw", "type": "agent", **extra}, body)


def scored(agent: str, when: str, score: float) -> bytes:
    fields = {"agent": agent, "timestamp": when, "via": "bucket", "score": score}
    return doc({**fields, "method": "m", "status": "agent-run", "description": "d"}, "ran it\n")


def upstream_history() -> dict[str, bytes]:
    reply = post("agent-2", "2026-06-02 09:00 UTC", "nice, @agent-1\n", refs=HELLO)
    trace = upstream_manifest("sess-1", native_log_file="session.jsonl").replace(
        "---\n\n", "agent: agent-1\npromoted_at: 2026-06-25 15:00 UTC\nvia: bucket\n"
        "share: full\ncompleteness: full\n---\n\n", 1
    )  # fmt: skip
    return {
        "agents/agent-1.md": registration("agent-1", "alice", "2026-06-01 09:00 UTC", "opus"),
        "agents/agent-2.md": registration("agent-2", "carol", "2026-06-01 12:30 UTC", "gpt"),
        f"message_board/{HELLO}": post("agent-1", "2026-06-01 10:00 UTC", "starting out\n"),
        f"message_board/{REPLY}": reply,
        f"inbox/agent-1/{REPLY}": reply,  # the fan-out copy its backend wrote
        f"message_board/{HUMAN}": doc(
            {"agent": "human-bob", "timestamp": "2026-06-02 12:00 UTC", "via": "dashboard"},
            "@agent-2 please write up the method\n",
        ),
        f"message_board/{LATE}": post("agent-1", "2026-06-03 08:00 UTC", "later\n"),
        f"results/{RESULT_1}": scored("agent-1", "2026-06-02 10:00 UTC", 70.0),
        f"results/{RESULT_2}": scored("agent-2", "2026-06-02 11:00 UTC", 90.0),
        f"results/{RESULT_3}": scored("agent-2", "2026-06-02 11:30 UTC", 95.0),
        "results/verification_status.json": json.dumps(
            {RESULT_1: "valid", RESULT_2: "valid", RESULT_3: "invalid"}
        ).encode(),
        "traces/agent-1/sess-1/manifest.md": trace.encode(),
        "traces/agent-1/sess-1/session.jsonl": b'{"type":"user"}\n',
        "README.md": b"# A challenge\n",
    }


def snapshot(store: LocalBucketStore, bucket: str) -> dict[str, str]:
    return {
        entry.path: hashlib.sha256(store.read(bucket, entry.path) or b"").hexdigest()
        for entry in store.list(bucket, "")
    }


@pytest.fixture
def taken_over(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, Any]]:
    data = tmp_path / "data"
    store = LocalBucketStore(data)
    # Local mode serves buckets the service owns: the organizer imports the history as it.
    store.create(CENTRAL, creator=SERVICE_USER)
    store.write_batch(CENTRAL, Batch(adds=sorted(upstream_history().items())))
    before = snapshot(store, CENTRAL)
    # The organizer's first step: rebuild inbox copies for posts that have none.
    for name, value in {"ORG": ORG, "COLLAB_SLUG": SLUG, "BUCKETSYNC_DATA_DIR": str(data),
                        "BUCKETSYNC_STORAGE": "local", "AUDIT_BUCKET": "acme-admin/chal-audit"}.items():  # fmt: skip
        monkeypatch.setenv(name, value)
    backfill = CliRunner().invoke(bucketsync_cli, ["backfill-inbox"])
    assert backfill.exit_code == 0, backfill.output
    settings = make_settings(data, LISTING_TTL_S=str(TTL_S))
    identity = LocalIdentity(data / "users.json", org=ORG)
    app = create_app(settings, store=LocalBucketStore(data), identity=identity)
    with live_server(app) as base, httpx.Client(base_url=base, timeout=30) as client:
        yield client, (store, before, identity)


def test_a_bucket_agent_collabs_wrote_is_served_correctly(taken_over: tuple[Any, Any]) -> None:
    client, _ = taken_over
    agents = client.get("/v1/agents?expand=true").json()
    assert [(a["agent_id"], a["model"], a["harness"], a["tools"]) for a in agents["items"]] == [
        ("agent-1", "opus", "claude-code", ["bash", "python"]),
        ("agent-2", "gpt", "claude-code", ["bash", "python"]),
    ]
    assert client.get("/v1/agents?model=gpt").json()["items"] == ["agent-2.md"]
    board = client.get("/v1/messages?order=asc").json()
    assert board["items"] == [HELLO, REPLY, HUMAN, LATE]  # the dashboard post in time order
    human = client.get(f"/v1/messages/{HUMAN}").json()
    assert human["agent"] == "human-bob" and "write up" in human["body"]
    assert client.get("/v1/messages?agent=human-bob").json()["items"] == [HUMAN]
    since = client.get("/v1/messages?since=2026-06-02T11:00:00Z&order=asc").json()
    assert since["items"] == [HUMAN, LATE]
    reply = client.get(f"/v1/messages/{REPLY}").json()
    assert reply["frontmatter"]["refs"] == HELLO  # read as written
    # Fan-out: its backend's copy, and the backfilled copy of the dashboard post.
    assert client.get("/v1/inbox/agent-1").json()["items"] == [REPLY]
    assert client.get("/v1/inbox/agent-2").json()["items"] == [HUMAN]
    board_rows = client.get("/v1/leaderboard").json()["rows"]
    assert [(r["agent"], r["score"], r["verification"]) for r in board_rows] == [
        ("agent-2", 90.0, "valid"),
        ("agent-1", 70.0, "valid"),
    ]
    stats = client.get("/v1/stats").json()
    assert stats["tokens"]["total"] == 6500 and stats["sessions_counted"] == 1
    trace = client.get("/v1/traces?expand=true").json()["items"][0]
    assert trace["primary_log_file"] is None  # its manifest has no `log_files`
    assert (trace["total_tokens"], trace["tool_calls"]) == (6500, 18)
    digest = client.get("/v1/digest").json()
    assert digest["agents"]["newest"] == ["agent-2", "agent-1"]
    assert digest["stats"]["total_tokens"] == 6500
    assert [m["filename"] for m in digest["recent_messages"]][:2] == [LATE, HUMAN]


def test_nothing_it_did_not_write_is_rewritten(taken_over: tuple[Any, Any]) -> None:
    client, (store, before, identity) = taken_over
    token = identity.add_user("alice", role="contributor")
    auth = {"Authorization": f"Bearer {token}"}
    scratch = f"/local/buckets/{ORG}/{SLUG}-agent-1"
    assert client.post(scratch, headers=auth).status_code in (200, 201)

    def put(path: str, data: bytes) -> None:
        assert client.put(f"{scratch}/files/{path}", content=data, headers=auth).status_code == 201

    # Keep going: post, promote a result, share a trace, re-register.
    assert client.post(
        "/v1/messages", json={"agent_id": "agent-1", "body": "back @agent-2", "refs": REPLY}
    ).status_code == 201  # fmt: skip
    put("r.md", scored("agent-1", "x", 99.0))
    source = f"hf://buckets/{ORG}/{SLUG}-agent-1/"
    assert client.post("/v1/results", json={"source": source + "r.md"}).status_code == 201
    put("traces/sess-2/manifest.md", upstream_manifest("sess-2").encode())
    assert client.post("/v1/traces", json={"source": source + "traces/sess-2"}).status_code == 201
    put(".bucket-sync-handshake", b"alice")
    again = client.post(
        "/v1/agents/register",
        json={"agent_id": "agent-1", "model": "opus", "harness": "claude-code", "force": True},
        headers=auth,
    )
    assert again.status_code == 201, again.text
    assert client.get("/v1/leaderboard").json()["rows"][0]["agent"] == "agent-1"

    after = snapshot(store, CENTRAL)
    rewritten = {path for path, digest in before.items() if after.get(path) != digest} - {
        "agents/agent-1.md",  # the one file the organizer's agent asked us to rewrite
        INDEX,  # the new result entered as pending, as agent-collabs does: checked below
    }
    assert rewritten == set()
    assert len(after) > len(before)
    index = json.loads(store.read(CENTRAL, INDEX) or b"{}")
    promoted = client.get("/v1/results?agent=agent-1").json()["items"][0]
    assert index == {RESULT_1: "valid", RESULT_2: "valid", RESULT_3: "invalid", promoted: "pending"}


def test_the_organizer_keeps_editing_files_and_they_are_served(
    taken_over: tuple[Any, Any],
) -> None:
    client, (store, _before, identity) = taken_over
    auth = {"Authorization": f"Bearer {identity.add_user('organizer', role='admin')}"}

    def edit(path: str, data: bytes) -> None:
        response = client.put(f"/local/buckets/{CENTRAL}/files/{path}", content=data, headers=auth)
        assert response.status_code == 201, response.text

    # As on the Hub: verdicts by hand (seed §9), the README finished by hand, a registration
    # forced by hand; a contributor's attempt at the same files is refused.
    edit(INDEX, json.dumps({RESULT_1: "valid", RESULT_2: "invalid", RESULT_3: "valid"}).encode())
    edit("README.md", b"# A challenge\n\nSubmissions close Friday.\n")
    edit("agents/agent-3.md", registration("agent-3", "dave", "2026-06-04 09:00 UTC", "opus"))
    alice = {"Authorization": f"Bearer {identity.add_user('alice', role='contributor')}"}
    refused = client.put(f"/local/buckets/{CENTRAL}/files/README.md", content=b"x", headers=alice)
    assert refused.status_code == 403 and refused.json()["error"]["hint"]
    assert client.get("/v1/agents/agent-3").json()["model"] == "opus"  # at once (a miss reads)
    time.sleep(TTL_S + 0.2)  # the TTL picks up the rest (seed §7)
    rows = client.get("/v1/leaderboard").json()["rows"]
    assert [(r["agent"], r["score"], r["verification"]) for r in rows] == [
        ("agent-2", 95.0, "valid"),
        ("agent-1", 70.0, "valid"),
    ]
    assert store.read(CENTRAL, "README.md").endswith(b"Submissions close Friday.\n")
