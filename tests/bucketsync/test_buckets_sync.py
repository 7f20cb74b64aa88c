"""`agenthub buckets sync` against a real server on loopback (issue 28 point 3): unchanged
files are skipped, every file gets its line, and a failing file stops nothing else."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from agenthub.bucketsync.app import create_app
from agenthub.bucketsync.identity.local import LocalIdentity
from agenthub.bucketsync.storage.local import LocalBucketStore
from agenthub.cli import app as cli
from agenthub.clock import FrozenClock
from tests.bucketsync.conftest import ORG, SLUG, make_settings
from tests.support.servers import live_server

BUCKET = f"{ORG}/{SLUG}-a1"


class Site:
    def __init__(self, base: str, token: str, store: LocalBucketStore) -> None:
        self.base, self.token, self.store = base, token, store

    def buckets(self, *args: str) -> tuple[int, str, str]:
        env = {"BUCKETSYNC_URL": self.base, "BUCKETSYNC_TOKEN": self.token}
        result = CliRunner().invoke(cli, ["buckets", *args], env=env)
        return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    # A small upload limit, so one oversized file fails on its own.
    settings = make_settings(tmp_path / "data", MAX_UPLOAD_BYTES="4096")
    identity = LocalIdentity(settings.data_dir / "users.json", org=ORG)
    store = LocalBucketStore(settings.data_dir, clock=FrozenClock())
    app = create_app(settings, store=store, identity=identity, clock=FrozenClock())
    with live_server(app) as base:
        token = identity.add_user("alice", role="contributor")
        response = httpx.post(
            f"{base}/local/buckets/{BUCKET}", headers={"Authorization": f"Bearer {token}"}
        )
        assert response.status_code == 201
        yield Site(base, token, store)


def folder(tmp_path: Path, files: dict[str, bytes]) -> Path:
    root = tmp_path / "submission"
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return root


def test_a_second_sync_uploads_nothing_and_says_so_per_file(site: Site, tmp_path: Path) -> None:
    root = folder(tmp_path, {"a.txt": b"alpha", "sub/b.bin": b"\x00" * 3000})
    code, out, _ = site.buckets("sync", str(root), f"hf://buckets/{BUCKET}/sub1")
    assert code == 0
    assert "[1/2] uploaded   sub1/a.txt (5 bytes)" in out
    assert "[2/2] uploaded   sub1/sub/b.bin (3000 bytes)" in out
    first = {e.path: e.content_hash for e in site.store.list(BUCKET)}

    code, out, _ = site.buckets("sync", str(root), f"hf://buckets/{BUCKET}/sub1")
    assert code == 0
    assert "[1/2] unchanged  sub1/a.txt (5 bytes)" in out
    assert "[2/2] unchanged  sub1/sub/b.bin (3000 bytes)" in out
    assert "0 uploaded, 2 unchanged, 0 failed" in out
    assert {e.path: e.content_hash for e in site.store.list(BUCKET)} == first


def test_a_file_changed_at_the_same_size_is_uploaded_again(site: Site, tmp_path: Path) -> None:
    root = folder(tmp_path, {"a.txt": b"alpha", "b.txt": b"beta"})
    assert site.buckets("sync", str(root), f"hf://buckets/{BUCKET}")[0] == 0
    (root / "a.txt").write_bytes(b"ALPHA")
    code, out, _ = site.buckets("sync", str(root), f"hf://buckets/{BUCKET}")
    assert code == 0
    assert "uploaded   a.txt" in out and "unchanged  b.txt" in out
    assert site.store.read(BUCKET, "a.txt") == b"ALPHA"


def test_a_failing_file_is_reported_and_the_others_still_upload(site: Site, tmp_path: Path) -> None:
    root = folder(tmp_path, {"a.txt": b"alpha", "big.bin": b"x" * 5000, "z.txt": b"zed"})
    code, out, err = site.buckets("sync", str(root), f"hf://buckets/{BUCKET}")
    assert code == 1
    assert "uploaded   a.txt" in out and "uploaded   z.txt" in out
    assert "[2/3] FAILED     big.bin: PAYLOAD_TOO_LARGE" in err
    assert "2 uploaded, 0 unchanged, 1 failed" in out
    assert "1 of 3 file(s) not uploaded: big.bin" in err
    assert "MAX_UPLOAD_BYTES" in err
    assert sorted(e.path for e in site.store.list(BUCKET)) == ["a.txt", "z.txt"]


def test_cp_streams_a_file_up_and_back_down(site: Site, tmp_path: Path) -> None:
    source = tmp_path / "w.bin"
    source.write_bytes(bytes(range(256)) * 16)
    assert site.buckets("cp", str(source), f"hf://buckets/{BUCKET}/w.bin")[0] == 0
    target = tmp_path / "back.bin"
    code, _, err = site.buckets("cp", f"hf://buckets/{BUCKET}/w.bin", str(target))
    assert code == 0, err
    assert target.read_bytes() == source.read_bytes()
    missing = site.buckets("cp", f"hf://buckets/{BUCKET}/nope.bin", str(tmp_path / "n"))
    assert missing[0] == 1 and "NOT_FOUND" in missing[2]
    assert not (tmp_path / "n").exists()
