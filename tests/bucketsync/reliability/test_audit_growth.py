"""The audit append costs its line, on both stores, and the local store keeps no copy of a
file's earlier versions: `objects/` holds what bucket files link to, nothing else."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from fastapi.testclient import TestClient

from agenthub.bucketsync.app import create_app
from agenthub.bucketsync.core.audit import AuditLog
from agenthub.bucketsync.identity.local import LocalIdentity
from agenthub.bucketsync.storage.base import Batch
from agenthub.bucketsync.storage.hf import HfBucketStore
from agenthub.bucketsync.storage.local import LocalBucketStore
from agenthub.clock import FrozenClock
from tests.bucketsync.conftest import ORG, make_settings
from tests.support.hub_emulator import running_hub

AUDIT = "acme-admin/chal-audit"


def disk_bytes(root: Path) -> int:
    """Bytes on disk under `root`, each inode counted once (hard links share one)."""
    seen: dict[int, int] = {}
    for path in root.rglob("*"):
        if path.is_file():
            st = path.stat()
            seen[st.st_ino] = st.st_size
    return sum(seen.values())


def write_rows(audit: AuditLog, count: int) -> None:
    for index in range(count):
        assert audit.record(
            agent_id=f"agent-{index}",
            route="/v1/messages",
            via="raw",
            source=None,
            target_path=f"message_board/{index}.md",
            size=100,
            status_code=201,
        )


def test_local_audit_growth_is_the_lines_over_1000_appends(tmp_path: Path) -> None:
    clock = FrozenClock()
    store = LocalBucketStore(tmp_path, clock=clock)
    store.create(AUDIT, creator="bucket-sync", private=True)
    audit = AuditLog(store, AUDIT, clock, two_org=True)
    write_rows(audit, 1000)
    month = store.read(AUDIT, audit.path_for_now())
    assert month is not None and month.count(b"\n") == 1000
    # Rewriting the month per append kept every version: ~1000²/2 lines on disk.
    assert disk_bytes(tmp_path) < len(month) + 16_384
    assert len(audit.rows(f"{clock.now():%Y%m}")) == 1000


def test_hf_audit_writes_one_never_rewritten_part_per_row() -> None:
    clock = FrozenClock()
    with running_hub() as hub:
        hub.add_bucket(AUDIT, author="acme-admin", private=True)
        audit = AuditLog(HfBucketStore(token=None, endpoint=hub.url), AUDIT, clock, two_org=True)
        write_rows(audit, 1000)
        # Content reaches the Xet store as one blob per added file.
        uploaded = [len(r.body) for r in hub.requests if r.route == "cas_put"]
        assert len(uploaded) == 1000 and hub.count("batch") == 1000
        assert max(uploaded) < 400  # one line each, however long the month already is
        rows = audit.rows(f"{clock.now():%Y%m}")
    assert [row["agent_id"] for row in rows] == [f"agent-{i}" for i in range(1000)]


def test_overwriting_a_file_leaves_one_object(tmp_path: Path) -> None:
    store = LocalBucketStore(tmp_path)
    store.create("acme/central", creator="bucket-sync")
    for version in range(50):
        store.write_batch("acme/central", Batch(adds=[("status.json", b"v%d" % version)]))
    store.write_batch("acme/central", Batch(adds=[("gone.md", b"x")]))
    store.write_batch("acme/central", Batch(deletes=["gone.md"]))
    objects = [p for p in (tmp_path / "objects").rglob("*") if p.is_file()]
    assert len(objects) == 1 and objects[0].read_bytes() == b"v49"


def dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_start_sweeps_what_earlier_versions_and_crashes_left(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "data")
    store = LocalBucketStore(settings.data_dir)
    store.create(settings.central_bucket, creator="bucket-sync")
    store.write_batch(settings.central_bucket, Batch(adds=[("kept.md", b"kept")]))
    orphan = settings.data_dir / "objects" / "ab" / ("ab" + "0" * 62)
    orphan.parent.mkdir(parents=True, exist_ok=True)
    orphan.write_bytes(b"an earlier month file")
    files = settings.data_dir / "buckets" / ORG / "chal-main-bucket" / "files"
    leftover = files / "audit" / f".tmp-{dead_pid()}-1-202603.jsonl"
    leftover.parent.mkdir(parents=True, exist_ok=True)
    leftover.write_bytes(b"half")
    old = time.time() - 3600
    for path in (orphan, leftover):
        os.utime(path, (old, old))
    app = create_app(
        settings, store=store, identity=LocalIdentity(settings.data_dir / "users.json", org=ORG)
    )
    with TestClient(app):
        pass
    assert not orphan.exists() and not leftover.exists()
    assert store.read(settings.central_bucket, "kept.md") == b"kept"
