"""Start-up cleanup on storage several hosts share (issue 30.2): it never removes a file
another host may still be writing.

- Local store on a shared data directory (NFS): a temp names its host and process
  (`diskfiles.temp_prefix`); the sweep removes this host's temps of dead processes, and
  another host's only once a day old. The broken variant: the same in-flight file under a
  name with a pid only (what earlier versions wrote) is swept, since a pid of another host
  is looked up among this host's processes.
- S3: nothing is swept. Writes are single PUTs (no temp object exists), uploads are
  spooled to an anonymous local temp file, so start-up touches no object in the bucket.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from agenthub.bucketsync.app import create_app
from agenthub.bucketsync.identity.local import LocalIdentity
from agenthub.bucketsync.storage.base import Batch
from agenthub.bucketsync.storage.diskfiles import FOREIGN_TEMP_S, temp_prefix
from agenthub.bucketsync.storage.local import LocalBucketStore
from tests.bucketsync.conftest import ORG, make_settings
from tests.bucketsync.reliability.test_audit_growth import dead_pid
from tests.bucketsync.test_s3_store import s3, s3_store  # noqa: F401  (fixture)
from tests.support.s3server import S3Server


def aged(path: Path, seconds: float) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"half written")
    then = time.time() - seconds
    os.utime(path, (then, then))
    return path


def test_start_keeps_another_hosts_in_flight_temp_on_a_shared_data_dir(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "data")
    store = LocalBucketStore(settings.data_dir)
    store.create(settings.central_bucket, creator="bucket-sync")
    bucket_dir = settings.data_dir / "buckets" / ORG / "chal-main-bucket"
    pid = dead_pid()  # dead here; on the other host it may be the uploading server
    other = "h0123abcd"
    in_flight = aged(bucket_dir / f".tmp-{pid}-{other}-up-1", 3600)
    forgotten = aged(bucket_dir / f".tmp-{pid}-{other}-up-2", FOREIGN_TEMP_S + 60)
    mine = aged(bucket_dir / f"{temp_prefix().replace(str(os.getpid()), str(pid))}up-3", 3600)
    app = create_app(
        settings, store=store, identity=LocalIdentity(settings.data_dir / "users.json", org=ORG)
    )
    with TestClient(app):
        pass
    assert in_flight.exists()
    assert not forgotten.exists() and not mine.exists()


def test_broken_variant_a_pid_only_temp_of_another_host_is_swept(tmp_path: Path) -> None:
    store = LocalBucketStore(tmp_path / "data")
    store.create("ns/b", creator="me")
    in_flight = aged(tmp_path / "data" / "buckets" / "ns" / "b" / f".tmp-{dead_pid()}-up-1", 3600)
    assert store.sweep().temps_removed == 1
    assert not in_flight.exists()


def test_a_file_a_live_write_moves_during_the_sweep_is_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The start-up sweep runs beside the first requests: a temp file it listed may be
    # renamed into place before it looks at it (seen in CI as a FileNotFoundError).
    store = LocalBucketStore(tmp_path / "data")
    store.create("ns/b", creator="me")
    store.write_batch("ns/b", Batch(adds=[("kept.md", b"x")]))
    listed = store._walk

    def walk_then_move(root: Path, *, temps_only: bool = False) -> Iterator[Path]:
        yield root / f".tmp-{dead_pid()}-renamed-meanwhile"  # listed, then gone
        yield from listed(root, temps_only=temps_only)

    monkeypatch.setattr(store, "_walk", walk_then_move)

    assert store.sweep().temps_removed == 0
    assert store.read("ns/b", "kept.md") == b"x"


def test_start_on_s3_touches_no_object_of_the_bucket(s3: S3Server, tmp_path: Path) -> None:  # noqa: F811
    bucket = s3.new_bucket()
    settings = make_settings(tmp_path / "data", **s3.env(bucket))
    store = s3_store(s3, bucket)
    store.create(settings.central_bucket, creator="bucket-sync")
    store.write_batch(settings.central_bucket, Batch(adds=[(".tmp-1-h0123abcd-up-1", b"x")]))
    before = store.list(settings.central_bucket)
    app = create_app(settings, identity=LocalIdentity(tmp_path / "users.json", org=ORG))
    with TestClient(app):
        pass
    assert [e.path for e in store.list(settings.central_bucket)] == [e.path for e in before]
