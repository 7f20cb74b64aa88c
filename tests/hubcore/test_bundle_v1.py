"""Bundle v1 (the seed's one JSON object), what capture writes by default, streamed by
`import_file` through an incremental parser: every rule with the code the whole-file
reader gives, any key order, a truncated or tampered file refused with nothing written,
and memory that does not grow with the bundle."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from agenthub.clock import FrozenClock
from agenthub.hubcore import bundlefile
from agenthub.hubcore import repository as repo
from agenthub.hubcore.bundle_import import import_file, import_into, receiver_hashes
from agenthub.hubcore.bundle_rules import SCHEMA
from agenthub.hubcore.bundlefile import PARTS, BundleWriter, evidence_path, write_bundle
from agenthub.hubcore.canonical import snapshot_hash
from agenthub.hubcore.errors import SnapshotRejected
from agenthub.hubcore.store import Database
from tests.hubcore.bundles import (
    bundle,
    inbox_bundle,
    message,
    peak_traced_mb,
    receipt,
    ts,
    uid,
)
from tests.hubcore.test_bundle_v2 import CASES, counts, refused
from tests.hubcore.test_snapshot_swap import indexes


def captured(b: dict[str, Any], path: Path) -> Path:
    """`b` (valid) written by `BundleWriter`'s default layout, the way capture writes it."""
    with BundleWriter(path) as writer:
        for part in PARTS:
            writer.part(part, iter(b[part]))
        writer.finish(b["source"], b["captured_at"])
    return path


def test_a_captured_v1_bundle_is_one_json_object_that_imports_streamed(
    hubcore_db: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    b = inbox_bundle()
    path = captured(b, tmp_path / "inbox.json")
    with path.open() as handle:
        loaded = json.load(handle)
    assert loaded == b
    assert list(loaded)[:4] == ["schema", "messages", "count", "content_hash"]
    assert loaded["content_hash"] == snapshot_hash(loaded["messages"])
    monkeypatch.setattr(bundlefile, "read_bundle", _never_read_whole)
    clock = FrozenClock()
    defined = indexes(hubcore_db)
    result = import_file(hubcore_db, path, expected_hash=b["content_hash"], apply=True, clock=clock)
    assert result.outcome == "imported"
    assert (result.messages, result.receipts, result.tombstones) == (6, 2, 0)
    assert indexes(hubcore_db) == defined
    with hubcore_db.read_only() as session:
        assert receiver_hashes(session) == {
            k: b[k] for k in ("content_hash", "receipts_hash", "tombstones_hash")
        }
        assert list(repo.stored_messages(session)) == b["messages"]
        assert list(repo.stored_receipts(session)) == b["receipts"]
        cursor = repo.latest_cursor(session)
    assert cursor is not None and cursor.mode == "snapshot-pilot"
    assert cursor.content_hash == b["content_hash"] and cursor.last_success_at == clock.now()
    assert orjson.loads(evidence_path(path).read_bytes())["bundle_schema"] == SCHEMA
    again = import_file(hubcore_db, path, expected_hash=b["content_hash"], apply=True)
    assert again.outcome == "unchanged"


def _never_read_whole(path: Path) -> Any:
    raise AssertionError(f"{path} was read whole")


def test_a_v1_object_with_sorted_keys_streams_too(
    hubcore_db: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tomb = {"message_id": uid(90), "revision": 3, "deleted_at": ts(9)}
    b = bundle([message(n) for n in range(1, 40)], [receipt(3, "bob")], [tomb])
    path = tmp_path / "sorted.json"
    write_bundle(b, path)  # keys sorted: captured_at, content_hash, count, messages, …
    assert list(orjson.loads(path.read_bytes()))[:4] == [
        "captured_at",
        "content_hash",
        "count",
        "messages",
    ]
    monkeypatch.setattr(bundlefile, "read_bundle", _never_read_whole)
    valid = import_file(hubcore_db, path, expected_hash=b["content_hash"], apply=False)
    assert valid.outcome == "valid" and set(counts(hubcore_db).values()) == {0}
    result = import_file(hubcore_db, path, expected_hash=b["content_hash"], apply=True)
    assert (result.outcome, result.messages, result.tombstones) == ("imported", 39, 1)


def test_a_v1_object_with_rows_out_of_key_order_is_read_whole_and_imports(
    hubcore_db: Database, tmp_path: Path
) -> None:
    """JSON does not order rows and the seed's hash sorts them; such a file is valid."""
    b = inbox_bundle()
    shuffled = {**b, "messages": list(reversed(b["messages"]))}
    path = tmp_path / "shuffled.json"
    path.write_bytes(orjson.dumps(shuffled))
    result = import_file(hubcore_db, path, expected_hash=b["content_hash"], apply=True)
    assert (result.outcome, result.messages) == ("imported", 6)
    with hubcore_db.read_only() as session:
        assert receiver_hashes(session)["content_hash"] == b["content_hash"]


@pytest.mark.parametrize("shuffle", [False, True], ids=["in-order", "read-whole"])
def test_import_progress_adds_up_to_the_files_size(
    hubcore_db: Database, tmp_path: Path, shuffle: bool
) -> None:
    """The CLI's bar has the file's size as its total; a file read whole after a streamed
    attempt is not counted twice."""
    b = inbox_bundle()
    path = tmp_path / "b.json"
    rows = list(reversed(b["messages"])) if shuffle else b["messages"]
    path.write_bytes(orjson.dumps({**b, "messages": rows}))
    seen: list[int] = []
    import_file(hubcore_db, path, expected_hash=b["content_hash"], apply=True, progress=seen.append)
    assert sum(seen) == path.stat().st_size


@pytest.mark.parametrize("case", list(CASES))
def test_every_rule_refuses_a_streamed_v1_bundle_with_the_whole_readers_code(
    hubcore_db: Database, tmp_path: Path, case: str
) -> None:
    b = inbox_bundle()
    CASES[case](b)
    expected = b["content_hash"]
    with pytest.raises(SnapshotRejected) as whole:
        import_into(hubcore_db, copy.deepcopy(b), expected_hash=expected, apply=True)
    path = tmp_path / "b.json"
    path.write_bytes(orjson.dumps(b))  # as it stands: edits and wrong hashes kept
    streamed = refused(hubcore_db, path, expected)
    assert (streamed.code, sorted(streamed.rows)) == (whole.value.code, sorted(whole.value.rows))


def _flip_a_body(data: bytes) -> bytes:
    return data.replace(b'"body":"body 3"', b'"body":"body 4"', 1)


def _drop_a_row(data: bytes) -> bytes:
    b = orjson.loads(data)
    del b["messages"][2]
    return orjson.dumps(b)


@pytest.mark.parametrize(
    ("damage", "code"),
    [
        (lambda data: data[: len(data) // 2], "malformed_bundle"),
        (lambda data: data[:-1], "malformed_bundle"),
        (lambda data: data[:30], "malformed_bundle"),
        (lambda data: b"", "malformed_bundle"),
        (lambda data: data + b'{"more": 1}', "malformed_bundle"),
        (lambda data: data.replace(b'"count":', b'"count" ', 1), "malformed_bundle"),
        (lambda data: b"[" + data + b"]", "malformed_bundle"),
        (_flip_a_body, "hash_mismatch"),
        (_drop_a_row, "count_mismatch"),
    ],
    ids=[
        "cut-mid-row",
        "cut-last-brace",
        "cut-in-header",
        "empty",
        "trailing-data",
        "not-json",
        "not-an-object",
        "tampered-row",
        "dropped-row",
    ],
)
def test_a_truncated_or_tampered_v1_bundle_is_refused_with_nothing_written(
    hubcore_db: Database, tmp_path: Path, damage: Callable[[bytes], bytes], code: str
) -> None:
    b = inbox_bundle()
    path = captured(b, tmp_path / "b.json")
    path.write_bytes(damage(path.read_bytes()))
    defined = indexes(hubcore_db)
    error = refused(hubcore_db, path, b["content_hash"])
    assert error.code == code and error.hint
    assert indexes(hubcore_db) == defined
    with pytest.raises(SnapshotRejected):  # validation refuses it too
        import_file(hubcore_db, path, expected_hash=b["content_hash"], apply=False)


def test_a_bundle_of_another_schema_is_refused_and_says_which_it_reads(
    hubcore_db: Database, tmp_path: Path
) -> None:
    b = inbox_bundle()
    path = captured(b, tmp_path / "b.json")
    path.write_bytes(path.read_bytes().replace(SCHEMA.encode(), b"hub-core.other.v1", 1))
    error = refused(hubcore_db, path, b["content_hash"])
    assert error.code == "unsupported_schema" and "v1 and v2" in (error.hint or "")


# -- thread rules, in SQL over the loaded rows ------------------------------------------------


def _thread_bundle_file(path: Path, links: dict[int, int]) -> dict[str, Any]:
    """Messages 1-6, message n replying to `links[n]`, written as capture writes them."""
    b = bundle([message(n, thread_id=uid(links[n]) if n in links else None) for n in range(1, 7)])
    path.write_bytes(orjson.dumps(b))
    return b


def test_a_reply_to_a_reply_is_a_rooted_thread_and_imports(
    hubcore_db: Database, tmp_path: Path
) -> None:
    """Threads State Hub writes name their root; a deeper chain still leads to one, so the
    walk from the roots, skipped for flat threads, runs and finds every message."""
    b = _thread_bundle_file(tmp_path / "b.json", {2: 1, 3: 2, 4: 3, 6: 5})
    result = import_file(
        hubcore_db, tmp_path / "b.json", expected_hash=b["content_hash"], apply=True
    )
    assert (result.outcome, result.messages) == ("imported", 6)


@pytest.mark.parametrize(
    ("links", "unrooted"),
    [
        ({2: 3, 3: 2}, {2, 3}),  # a loop of two: each names a message that has a thread_id
        ({2: 1, 3: 4, 4: 5, 5: 3, 6: 5}, {3, 4, 5, 6}),  # a loop, and a reply leading into it
        ({6: 6}, {6}),  # a message naming itself
    ],
)
def test_a_thread_loop_is_refused_naming_every_unrooted_message(
    hubcore_db: Database, tmp_path: Path, links: dict[int, int], unrooted: set[int]
) -> None:
    b = _thread_bundle_file(tmp_path / "b.json", links)
    error = refused(hubcore_db, tmp_path / "b.json", b["content_hash"])
    assert error.code == "thread_cycles"
    assert set(error.rows) == {uid(n) for n in unrooted}


def test_replies_to_an_absent_root_are_each_named(hubcore_db: Database, tmp_path: Path) -> None:
    b = _thread_bundle_file(tmp_path / "b.json", {2: 1, 3: 9, 4: 9, 5: 8})
    error = refused(hubcore_db, tmp_path / "b.json", b["content_hash"])
    assert (error.code, error.rows) == ("missing_thread_roots", [uid(3), uid(4), uid(5)])


# -- memory ---------------------------------------------------------------------------------

ROWS = 30_000
BODY = "b" * 600


def _big_bundle_file(path: Path) -> str:
    """A v1 file of ROWS messages written row by row (the test never holds them all)."""

    def rows() -> Iterator[dict[str, Any]]:
        for n in range(1, ROWS + 1):
            yield message(n, body=f"{n} {BODY}", to_agent="*" if n % 10 == 0 else "state-hub")

    with BundleWriter(path) as writer:
        writer.part("messages", rows())
        writer.part("receipts", iter(()))
        writer.part("tombstones", iter(()))
        head, _ = writer.finish(bundle([])["source"], ts(5000))
    digest: str = head["content_hash"]
    return digest


def test_importing_a_v1_bundle_holds_a_batch_not_the_bundle(
    hubcore_db: Database, tmp_path: Path
) -> None:
    path = tmp_path / "big.json"
    digest = _big_bundle_file(path)
    size_mb = path.stat().st_size / 1e6
    assert size_mb > 20
    streamed = peak_traced_mb(
        lambda: import_file(hubcore_db, path, expected_hash=digest, apply=True)
    )
    assert counts(hubcore_db)["projected_messages"] == ROWS
    # The broken variant: the same file read whole holds every row at once.
    whole = peak_traced_mb(lambda: bundlefile.read_bundle(path))
    assert whole > 2 * size_mb
    assert streamed < size_mb / 2, (streamed, size_mb, whole)
