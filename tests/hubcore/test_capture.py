"""Capture: one consistent read-only view of State Hub, a private bundle, bodiless evidence."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import insert, text

from agenthub.clock import FrozenClock
from agenthub.db import make_engine
from agenthub.hubcore import bundlefile, import_snapshot
from agenthub.hubcore import repository as repo
from agenthub.hubcore.bundle_import import import_file, receiver_hashes
from agenthub.hubcore.bundle_rules import SCHEMA, SCHEMA_V2
from agenthub.hubcore.bundlefile import evidence_path, read_bundle, write_bundle
from agenthub.hubcore.canonical import hash_normalized, snapshot_hash
from agenthub.hubcore.capture import capture_database_to_file, capture_from_database
from agenthub.hubcore.capture_feed import capture_from_statehub, capture_statehub_to_file
from agenthub.hubcore.errors import CaptureFailed
from agenthub.hubcore.store import Database
from agenthub.statehub import migrate as statehub_migrate
from agenthub.statehub.app import create_app as create_statehub
from agenthub.statehub.models import AgentMessage
from agenthub.statehub.settings import StateHubSettings
from tests.hubcore import bundles
from tests.hubcore.bundles import peak_traced_mb
from tests.hubcore.statehub_source import populate
from tests.support.databases import require_pg, temporary_pg_database
from tests.support.servers import live_server as serving


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock()


@pytest.fixture
def source(statehub_url: str, clock: FrozenClock) -> Iterator[dict[str, str]]:
    """A populated State Hub database; yields the ids of the interesting messages."""
    settings = StateHubSettings(database_url=statehub_url)
    with TestClient(create_statehub(settings, clock=clock)) as client:
        yield populate(client, clock)


def capture(url: str, clock: FrozenClock, **kwargs: Any) -> dict[str, Any]:
    return capture_from_database(url, clock=clock, captured_by="tests", **kwargs)


def test_capture_holds_every_row_archived_and_thread_roots_included(
    statehub_url: str, source: dict[str, str], clock: FrozenClock
) -> None:
    bundle = capture(statehub_url, clock)
    ids = {m["id"] for m in bundle["messages"]}
    assert set(source.values()) <= ids
    assert bundle["count"] == len(bundle["messages"]) == 21
    archived = {m["id"] for m in bundle["messages"] if m["archived_at"] is not None}
    assert {source["archived"], source["freeze_v1"]} == archived
    assert {(r["message_id"], r["agent"]) for r in bundle["receipts"]} >= {
        (source["freeze_v1"], "state-hub"),
        (source["runner"], "bob"),
        (source["replied_broadcast"], "state-hub"),
    }
    assert bundle["source"]["instance"].startswith("statehub-")


@pytest.fixture
def statehub_before_feed(hubcore_url: str, tmp_path: Path) -> Iterator[str]:
    """A State Hub database at migration 0001: the inbox before revision columns existed."""
    stack = ExitStack()
    if hubcore_url.startswith("sqlite"):
        url = f"sqlite:///{tmp_path / 'statehub-0001.db'}"
    else:
        url = stack.enter_context(temporary_pg_database(require_pg(), prefix="agenthub_hcold"))
    engine = make_engine(url)
    try:
        statehub_migrate.upgrade(engine, "0001_inbox_tables")
        root, reply, broadcast = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()

        def uid(u: uuid.UUID) -> uuid.UUID | str:
            return u if engine.dialect.name == "postgresql" else u.hex

        now = FrozenClock().now()
        with engine.begin() as conn:
            for mid, to, thread in (
                (root, "state-hub", None),
                (reply, "alice", root),
                (broadcast, "*", None),
            ):
                conn.execute(
                    text(
                        "INSERT INTO agent_messages (id, from_agent, to_agent, subject, body, "
                        "thread_id, kind, created_at) VALUES (:id, 'alice', :to, 's', 'b', "
                        ":thread, 'message', :now)"
                    ),
                    {"id": uid(mid), "to": to, "thread": thread and uid(thread), "now": now},
                )
            conn.execute(
                text(
                    "INSERT INTO message_receipts (message_id, agent, read_at) "
                    "VALUES (:id, 'state-hub', :now)"
                ),
                {"id": uid(broadcast), "now": now},
            )
            conn.execute(
                text("INSERT INTO statehub_meta (key, value) VALUES ('instance_label', 'old-hub')")
            )
    finally:
        engine.dispose()
    with stack:
        yield url


def test_capture_without_a_revision_column_uses_one_capture_wide_revision(
    statehub_before_feed: str, clock: FrozenClock, hubcore_db: Database
) -> None:
    bundle = capture(statehub_before_feed, clock)
    assert bundle["count"] == 3 and bundle["receipts_count"] == 1
    assert {m["revision"] for m in bundle["messages"]} == {0}
    assert bundle["receipts"][0]["revision"] == 0
    assert bundle["source"]["cursor"] == "v1:0"
    assert bundle["source"]["revision_column"] is False
    with hubcore_db.write() as session:
        result = import_snapshot(session, bundle, expected_hash=bundle["content_hash"], apply=True)
    assert result.outcome == "imported" and result.source_instance == "old-hub"


def test_capture_keeps_each_rows_source_revision(
    statehub_url: str, source: dict[str, str], clock: FrozenClock, hubcore_db: Database
) -> None:
    engine = make_engine(statehub_url)
    with engine.connect() as conn:
        at_source = {
            str(uuid.UUID(str(mid))): rev
            for mid, rev in conn.execute(text("SELECT id, revision FROM agent_messages"))
        }
        high: int = max(
            conn.execute(text("SELECT max(revision) FROM agent_messages")).scalar_one(),
            conn.execute(text("SELECT max(revision) FROM message_receipts")).scalar_one(),
        )
    engine.dispose()
    bundle = capture(statehub_url, clock)
    revisions = {m["id"]: m["revision"] for m in bundle["messages"]}
    assert revisions == at_source and len(set(revisions.values())) > 1
    assert bundle["source"]["cursor"] == f"v1:{high}"
    assert bundle["source"]["revision_column"] is True
    with hubcore_db.write() as session:
        import_snapshot(session, bundle, expected_hash=bundle["content_hash"], apply=True)
    with hubcore_db.read_only() as session:
        stored = {m["id"]: m["revision"] for m in repo.stored_messages(session)}
        cursor = repo.latest_cursor(session)
    assert stored == revisions
    assert cursor is not None and cursor.high_water == f"v1:{high}"


def test_capture_sees_one_view_even_while_state_hub_writes(
    statehub_url: str, source: dict[str, str], clock: FrozenClock
) -> None:
    engine = make_engine(statehub_url)
    late = uuid.uuid4()

    def write_during_capture(_rows: int) -> None:
        with engine.begin() as conn:
            if conn.execute(text("SELECT count(*) FROM agent_messages")).scalar_one() > 21:
                return
            conn.execute(
                text(
                    "INSERT INTO agent_messages (id, from_agent, to_agent, subject, body, kind, "
                    "created_at) VALUES (:id, 'late', 'state-hub', 's', 'b', 'message', :now)"
                ),
                {
                    "id": late if engine.dialect.name == "postgresql" else late.hex,
                    "now": clock.now(),
                },
            )
            conn.execute(
                text("INSERT INTO message_receipts (message_id, agent) VALUES (:id, 'late')"),
                {"id": late if engine.dialect.name == "postgresql" else late.hex},
            )

    try:
        bundle = capture(statehub_url, clock, progress=write_during_capture)
        with engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM agent_messages")).scalar_one() == 22
    finally:
        engine.dispose()
    assert str(late) not in {m["id"] for m in bundle["messages"]}
    assert str(late) not in {r["message_id"] for r in bundle["receipts"]}
    assert bundle["count"] == 21


def test_bundle_is_private_and_evidence_holds_hashes_and_counts_only(
    statehub_url: str, source: dict[str, str], clock: FrozenClock, tmp_path: Path
) -> None:
    bundle = capture(statehub_url, clock)
    out = tmp_path / "private" / "inbox.json"
    evidence_file = write_bundle(bundle, out)
    assert evidence_file == evidence_path(out)
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert json.loads(out.read_text()) == bundle
    evidence_text = evidence_file.read_text()
    evidence = json.loads(evidence_text)
    assert evidence["content_hash"] == bundle["content_hash"]
    assert evidence["count"] == 21 and evidence["receipts_count"] == bundle["receipts_count"]
    for message in bundle["messages"]:
        assert message["body"] not in evidence_text.split('"')
        assert message["subject"] not in evidence_text.split('"')
    assert statehub_url not in evidence_text and "postgresql://" not in evidence_text


SEED_KEYS = {"schema", "source", "captured_at", "messages", "count", "content_hash"}
# Receipts and tombstones travel beside the seed's keys, as every v1 bundle has carried them.
PART_KEYS = {f"{p}{k}" for p in ("receipts", "tombstones") for k in ("", "_count", "_hash")}


def test_capture_to_file_writes_the_seeds_v1_object_by_default(
    statehub_url: str,
    source: dict[str, str],
    clock: FrozenClock,
    tmp_path: Path,
    hubcore_db: Database,
) -> None:
    whole = capture(statehub_url, clock)
    old = tmp_path / "old" / "inbox.json"
    write_bundle(whole, old)
    out = tmp_path / "streamed" / "inbox.json"
    head, evidence_file = capture_database_to_file(
        statehub_url, out, clock=clock, captured_by="tests"
    )
    # The seed's bundle: one JSON object, read as JSON reads any file.
    with out.open() as handle:
        streamed = json.load(handle)
    assert set(streamed) == SEED_KEYS | PART_KEYS
    assert streamed["schema"] == SCHEMA == head["schema"]
    assert list(streamed)[:4] == ["schema", "messages", "count", "content_hash"]
    assert streamed["count"] == len(streamed["messages"]) == 21
    # The hash a whole-file reader recomputes from the rows, as the seed defines it.
    assert streamed["content_hash"] == snapshot_hash(streamed["messages"])
    with hubcore_db.read_only() as session:  # the seed's entry point takes it as loaded
        seed_check = import_snapshot(session, streamed, expected_hash=streamed["content_hash"])
    assert seed_check.outcome == "valid"
    # PostgreSQL's source_time is each capture's own transaction time.
    for b in (streamed, whole, head):
        assert b["source"].pop("source_time")
    assert streamed == whole and "messages" not in head
    assert {k: v for k, v in whole.items() if k not in bundlefile.PARTS} == head
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    evidence, old_evidence = (
        json.loads(f.read_text()) for f in (evidence_file, evidence_path(old))
    )
    assert evidence["bundle_sha256"] == hashlib.sha256(out.read_bytes()).hexdigest()
    for e in (evidence, old_evidence):
        del e["bundle_sha256"], e["bundle_file"], e["source"]["source_time"]
    assert evidence == old_evidence
    result = import_file(hubcore_db, out, expected_hash=whole["content_hash"], apply=True)
    assert (result.outcome, result.messages) == ("imported", 21)
    with hubcore_db.read_only() as session:
        assert receiver_hashes(session)["receipts_hash"] == whole["receipts_hash"]


def test_capture_to_file_writes_v2_json_lines_when_asked(
    statehub_url: str,
    source: dict[str, str],
    clock: FrozenClock,
    tmp_path: Path,
    hubcore_db: Database,
) -> None:
    v1, v2 = tmp_path / "inbox.json", tmp_path / "inbox.jsonl"
    capture_database_to_file(statehub_url, v1, clock=clock, captured_by="tests")
    head, evidence_file = capture_database_to_file(
        statehub_url, v2, clock=clock, captured_by="tests", layout="jsonl"
    )
    assert v2.read_bytes().startswith(bundlefile.V2_HEADER)
    with pytest.raises(json.JSONDecodeError, match="Extra data"):
        json.loads(v2.read_bytes())
    assert head["schema"] == SCHEMA_V2
    assert json.loads(evidence_file.read_text())["bundle_schema"] == SCHEMA_V2
    as_v1, as_v2 = read_bundle(v1), read_bundle(v2)
    for b in (as_v1, as_v2):
        assert b["source"].pop("source_time")
    assert as_v1 == as_v2  # the same rows, hashes and provenance in either layout
    result = import_file(hubcore_db, v2, expected_hash=as_v1["content_hash"], apply=True)
    assert (result.outcome, result.messages) == ("imported", 21)
    again = import_file(hubcore_db, v1, expected_hash=as_v1["content_hash"], apply=True)
    assert again.outcome == "unchanged"


def test_capture_from_statehub_to_file_writes_v1_by_default(
    statehub_url: str, source: dict[str, str], clock: FrozenClock, tmp_path: Path
) -> None:
    statehub = create_statehub(StateHubSettings(database_url=statehub_url), clock=clock)
    out = tmp_path / "feed.json"
    with serving(statehub) as base:
        head, _ = capture_statehub_to_file(base, out, clock=clock, captured_by="tests", page_size=5)
    bundle = json.loads(out.read_bytes())
    assert set(bundle) == SEED_KEYS | PART_KEYS and bundle["schema"] == SCHEMA
    assert bundle["content_hash"] == snapshot_hash(bundle["messages"]) == head["content_hash"]
    assert bundle["count"] == 21


def test_bundle_writer_refuses_rows_out_of_key_order_and_leaves_no_file(
    tmp_path: Path,
) -> None:
    rows = [bundles.message(2, revision=1), bundles.message(1, revision=2)]
    out = tmp_path / "inbox.json"
    with pytest.raises(ValueError, match="out of key order"), bundlefile.BundleWriter(out) as w:
        w.part("messages", iter(rows))
    assert list(tmp_path.iterdir()) == []
    rows.reverse()  # the same rows in key order hash as the whole-list hash does
    with bundlefile.BundleWriter(out) as w:
        for part, part_rows in (("messages", rows), ("receipts", []), ("tombstones", [])):
            w.part(part, iter(part_rows))
        head, _ = w.finish({"instance": "x"}, "2026-01-01T00:00:00.000000Z")
    assert head["content_hash"] == hash_normalized(rows, lambda r: str(r["id"]))
    assert json.loads(out.read_bytes())["messages"] == rows


def test_capture_needs_to_know_which_state_hub_it_read(
    statehub_url: str, clock: FrozenClock
) -> None:
    with pytest.raises(CaptureFailed, match="instance label"):
        capture(statehub_url, clock)
    bundle = capture(statehub_url, clock, source_instance="statehub-prod")
    assert bundle["source"]["instance"] == "statehub-prod" and bundle["count"] == 0


def test_capture_refuses_a_database_that_is_not_state_hubs(
    hubcore_url: str, clock: FrozenClock
) -> None:
    with pytest.raises(CaptureFailed, match="no State Hub inbox tables"):
        capture(hubcore_url, clock)


def test_capture_from_statehub_matches_the_database_capture(
    statehub_url: str, source: dict[str, str], clock: FrozenClock
) -> None:
    from_db = capture(statehub_url, clock)
    statehub = create_statehub(StateHubSettings(database_url=statehub_url), clock=clock)
    with serving(statehub) as base:
        from_feed = capture_from_statehub(base, clock=clock, captured_by="tests")
    assert from_feed["content_hash"] == from_db["content_hash"]
    assert from_feed["receipts_hash"] == from_db["receipts_hash"]
    assert from_feed["source"]["cursor"] == from_db["source"]["cursor"]
    assert from_feed["source"]["instance"] == from_db["source"]["instance"]
    assert from_feed["source"]["via"] == "statehub-feed-snapshot"
    assert from_feed["source"]["epoch"]


def test_capture_from_statehub_in_pages_matches_the_single_response(
    statehub_url: str, source: dict[str, str], clock: FrozenClock
) -> None:
    statehub = create_statehub(StateHubSettings(database_url=statehub_url), clock=clock)
    seen: list[int] = []
    with serving(statehub) as base:
        whole = capture_from_statehub(base, clock=clock, captured_by="tests")
        paged = capture_from_statehub(
            base, clock=clock, captured_by="tests", page_size=4, progress=seen.append
        )
    assert len(seen) > 5 and sum(seen) == whole["count"] + whole["receipts_count"]
    assert paged["content_hash"] == whole["content_hash"]
    assert paged["receipts_hash"] == whole["receipts_hash"]
    assert paged["source"]["cursor"] == whole["source"]["cursor"]


def test_capture_from_statehub_refuses_another_contract(
    statehub_url: str, source: dict[str, str], clock: FrozenClock
) -> None:
    statehub = create_statehub(StateHubSettings(database_url=statehub_url), clock=clock)
    with serving(statehub) as base:
        snapshot = httpx.get(f"{base}/messages/feed/snapshot").json()
    future = FastAPI()

    @future.get("/messages/feed/snapshot")
    def v2() -> dict[str, Any]:
        return {**snapshot, "contract": "statehub.inbox-feed.v2"}

    with serving(future) as base, pytest.raises(CaptureFailed, match="contract"):
        capture_from_statehub(base, clock=clock, captured_by="tests")


def test_capture_from_a_server_without_the_feed_says_so(clock: FrozenClock) -> None:
    with serving(FastAPI()) as base, pytest.raises(CaptureFailed, match="answered 404"):
        capture_from_statehub(base, clock=clock, captured_by="tests")
    with pytest.raises(CaptureFailed, match="could not reach"):
        capture_from_statehub(
            base, clock=clock, captured_by="tests", client=httpx.Client(timeout=2)
        )


def test_capture_reads_the_label_state_hub_took_from_its_environment(
    statehub_url: str, clock: FrozenClock
) -> None:
    settings = StateHubSettings(database_url=statehub_url, instance_label="statehub-prod-eu")
    with TestClient(create_statehub(settings, clock=clock)) as client:
        assert client.get("/state/health").status_code == 200

    bundle = capture(statehub_url, clock)

    assert bundle["source"]["instance"] == "statehub-prod-eu"


MANY = 30_000


def _seed_many(url: str, clock: FrozenClock) -> None:
    engine = make_engine(url)
    rows = (
        {
            "id": uuid.UUID(int=n),
            "from_agent": "alice",
            "to_agent": "*" if n % 10 == 0 else "state-hub",
            "subject": f"subject {n}",
            "body": f"{n} " + "b" * 600,
            "kind": "message",
            "created_at": clock.now(),
        }
        for n in range(1, MANY + 1)
    )
    try:
        with engine.begin() as conn:
            batch: list[dict[str, Any]] = []
            for row in rows:
                batch.append(row)
                if len(batch) == 5_000:
                    conn.execute(insert(AgentMessage), batch)
                    batch = []
            conn.execute(
                text("INSERT INTO statehub_meta (key, value) VALUES ('instance_label', 'many')")
            )
    finally:
        engine.dispose()


def test_capture_to_a_v1_file_holds_a_batch_not_the_inbox(
    statehub_url: str, clock: FrozenClock, tmp_path: Path
) -> None:
    _seed_many(statehub_url, clock)
    out = tmp_path / "many.json"
    streamed = peak_traced_mb(
        lambda: capture_database_to_file(statehub_url, out, clock=clock, captured_by="tests")
    )
    size_mb = out.stat().st_size / 1e6
    assert size_mb > 20 and json.loads(out.read_bytes())["count"] == MANY
    # The broken variant: the capture that builds the bundle in memory holds every row.
    whole = peak_traced_mb(lambda: capture(statehub_url, clock))
    assert whole > 2 * size_mb
    # A fetch batch (FETCH_BATCH rows, a sixth of this inbox) is what the capture holds.
    assert streamed < 0.6 * size_mb and streamed < whole / 4, (streamed, size_mb, whole)


SRC = Path(__file__).resolve().parents[2] / "src"


def _cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`agenthub …` in its own process, its stdout and stderr apart."""
    env = {**os.environ, "PYTHONPATH": str(SRC), "COLUMNS": "120", **env}
    return subprocess.run(
        [sys.executable, "-m", "agenthub.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_capture_and_import_show_progress_with_totals_on_stderr(
    statehub_url: str, source: dict[str, str], hubcore_url: str, tmp_path: Path
) -> None:
    out = tmp_path / "inbox.json"
    args = ["hubcore", "capture", "--source-db", statehub_url, "--out", str(out)]
    captured = _cli([*args, "--captured-by", "tests"], {})
    assert captured.returncode == 0, captured.stderr
    b = read_bundle(out)
    rows = b["count"] + b["receipts_count"] + b["tombstones_count"]
    # The total is State Hub's row count, known before the first row is read.
    assert "capturing rows" in captured.stderr and f" {rows}/{rows} " in captured.stderr
    assert "━" not in captured.stdout and "capturing" not in captured.stdout
    imported = _cli(
        ["hubcore", "import", str(out), "--expected-hash", b["content_hash"], "--apply"],
        {"HUBCORE_DATABASE_URL": hubcore_url},
    )
    assert imported.returncode == 0, imported.stderr
    size = out.stat().st_size
    assert 1_000 < size < 1_000_000  # shown in kB, as rich's DownloadColumn picks
    assert "importing" in imported.stderr
    assert f" {size / 1000:,.1f}/{size / 1000:,.1f} kB " in imported.stderr
    assert "━" not in imported.stdout and imported.stdout.startswith("imported")
