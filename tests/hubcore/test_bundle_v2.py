"""Bundle v2 (JSON Lines), streamed by `import_file`: every v1 rule with the same code,
v1 files still importing, and a truncated or corrupted file refused with nothing written."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from agenthub.clock import FrozenClock
from agenthub.hubcore import repository as repo
from agenthub.hubcore.bundle_import import import_file, import_into, receiver_hashes
from agenthub.hubcore.bundle_rules import SCHEMA
from agenthub.hubcore.bundlefile import (
    PARTS,
    V2_HEADER,
    BundleWriter,
    evidence_path,
    read_bundle,
    write_bundle,
)
from agenthub.hubcore.errors import SnapshotRejected
from agenthub.hubcore.store import Database
from tests.hubcore.bundles import bundle, inbox_bundle, message, receipt, rehash, ts, uid
from tests.hubcore.test_snapshot_swap import indexes


def write_v2(b: dict[str, Any], path: Path) -> Path:
    """`b` laid out as a v2 file line by line, as it stands (edits and wrong hashes kept)."""
    lines = [V2_HEADER]
    for part in PARTS:
        lines += [orjson.dumps({"part": part, "row": row}) + b"\n" for row in b.get(part, [])]
    trailer = {k: v for k, v in b.items() if k not in PARTS and k != "schema"}
    lines.append(orjson.dumps({"part": "trailer", **trailer}) + b"\n")
    path.write_bytes(b"".join(lines))
    return path


def captured(b: dict[str, Any], path: Path) -> Path:
    """`b` (valid) written by `BundleWriter` as v2, the way `capture --format jsonl` does."""
    with BundleWriter(path, "jsonl") as writer:
        for part in PARTS:
            writer.part(part, iter(b[part]))
        writer.finish(b["source"], b["captured_at"])
    return path


def counts(db: Database) -> dict[str, int]:
    with db.read_only() as session:
        return repo.row_counts(session)


def refused(db: Database, path: Path, expected: str) -> SnapshotRejected:
    with pytest.raises(SnapshotRejected) as info:
        import_file(db, path, expected_hash=expected, apply=True)
    assert set(counts(db).values()) == {0}, "a refused import must write nothing"
    return info.value


def test_a_captured_v2_bundle_imports_the_same_rows_as_its_v1_object(
    hubcore_db: Database, tmp_path: Path
) -> None:
    b = inbox_bundle()
    path = captured(b, tmp_path / "inbox.jsonl")
    assert path.read_bytes().startswith(V2_HEADER)
    assert read_bundle(path) == b  # the same content, read whole
    clock = FrozenClock()
    defined = indexes(hubcore_db)
    result = import_file(hubcore_db, path, expected_hash=b["content_hash"], apply=True, clock=clock)
    assert result.outcome == "imported"
    assert indexes(hubcore_db) == defined  # SQLite's, built after the load
    assert (result.messages, result.receipts, result.tombstones) == (6, 2, 0)
    with hubcore_db.read_only() as session:
        assert receiver_hashes(session) == {
            k: b[k] for k in ("content_hash", "receipts_hash", "tombstones_hash")
        }
        cursor = repo.latest_cursor(session)
        assert list(repo.stored_messages(session)) == b["messages"]
        assert list(repo.stored_receipts(session)) == b["receipts"]
    assert cursor is not None and cursor.mode == "snapshot-pilot"
    assert cursor.content_hash == b["content_hash"] and cursor.cursor == "v1:0"
    assert cursor.last_success_at == clock.now()
    evidence = orjson.loads(evidence_path(path).read_bytes())
    assert evidence["bundle_schema"] == "hub-core.statehub-inbox-snapshot.v2"
    assert evidence["content_hash"] == b["content_hash"]


def test_tombstones_and_many_batches_stream_in(hubcore_db: Database, tmp_path: Path) -> None:
    tomb = {"message_id": uid(20_000), "revision": 3, "deleted_at": ts(9)}
    messages = [message(n, revision=n) for n in range(1, 12_001)]
    messages[5]["thread_id"] = uid(1)
    b = bundle(messages, [receipt(1, "bob"), receipt(1, "Bob")], [tomb])
    path = captured(b, tmp_path / "big.jsonl")
    seen: list[int] = []
    result = import_file(
        hubcore_db, path, expected_hash=b["content_hash"], apply=True, progress=seen.append
    )
    # Progress counts the file's bytes as they are read (the CLI's bar has its size as total).
    assert result.outcome == "imported" and sum(seen) == path.stat().st_size
    assert len(seen) > 2
    with hubcore_db.read_only() as session:
        assert receiver_hashes(session)["tombstones_hash"] == b["tombstones_hash"]
        assert list(repo.stored_tombstones(session)) == [tomb]


def test_a_v1_bundle_file_still_imports(hubcore_db: Database, tmp_path: Path) -> None:
    b = inbox_bundle()
    path = tmp_path / "old.json"
    write_bundle(b, path)
    assert orjson.loads(path.read_bytes())["schema"] == SCHEMA
    valid = import_file(hubcore_db, path, expected_hash=b["content_hash"], apply=False)
    assert valid.outcome == "valid" and set(counts(hubcore_db).values()) == {0}
    result = import_file(hubcore_db, path, expected_hash=b["content_hash"], apply=True)
    assert result.outcome == "imported" and counts(hubcore_db)["projected_messages"] == 6


def test_validation_of_a_v2_bundle_writes_nothing(hubcore_db: Database, tmp_path: Path) -> None:
    b = inbox_bundle()
    path = captured(b, tmp_path / "inbox.jsonl")
    result = import_file(hubcore_db, path, expected_hash=b["content_hash"], apply=False)
    assert result.outcome == "valid" and result.messages == 6
    assert set(counts(hubcore_db).values()) == {0}


def test_a_v2_reimport_is_a_no_op_and_a_different_one_is_refused(
    hubcore_db: Database, tmp_path: Path
) -> None:
    b = inbox_bundle()
    path = captured(b, tmp_path / "inbox.jsonl")
    import_file(hubcore_db, path, expected_hash=b["content_hash"], apply=True)
    again = import_file(hubcore_db, path, expected_hash=b["content_hash"], apply=True)
    assert again.outcome == "unchanged"
    changed = copy.deepcopy(b)
    changed["messages"][0]["body"] = "edited at the source"
    changed["messages"].append(message(40))
    changed = rehash(changed)
    other = captured(changed, tmp_path / "changed.jsonl")
    with pytest.raises(SnapshotRejected) as info:
        import_file(hubcore_db, other, expected_hash=changed["content_hash"], apply=True)
    assert info.value.code == "receiver_differs"
    assert uid(1) in info.value.rows and uid(40) in info.value.rows
    with hubcore_db.read_only() as session:
        assert receiver_hashes(session)["content_hash"] == b["content_hash"]


def _dupe(b: dict[str, Any]) -> None:
    b["messages"].append(copy.deepcopy(b["messages"][-1]))
    b["count"] += 1


def _source(key: str | None) -> Callable[[dict[str, Any]], None]:
    def edit(b: dict[str, Any]) -> None:
        if key is None:
            del b["source"]
        else:
            del b["source"][key]

    return edit


def _cycle(b: dict[str, Any]) -> None:
    b.update(
        rehash(
            bundle(
                [
                    message(1),
                    message(2, thread_id=uid(3)),
                    message(3, thread_id=uid(2)),
                    message(4, thread_id=uid(4)),
                ]
            )
        )
    )


def _rebuilt(
    messages: list[dict[str, Any]],
    receipts: list[dict[str, Any]] | None = None,
    tombstones: list[dict[str, Any]] | None = None,
) -> Callable[[dict[str, Any]], None]:
    return lambda b: b.update(bundle(messages, receipts, tombstones))


CASES: dict[str, Callable[[dict[str, Any]], None]] = {
    "bad-uuid": lambda b: b["messages"][1].update(id="not-a-uuid"),
    "missing-field": lambda b: b["messages"][1].pop("body"),
    "bad-time": lambda b: b["messages"][1].update(created_at="yesterday"),
    "extra-field": lambda b: b["messages"][1].update(colour="blue"),
    "bad-receipt": lambda b: b["receipts"][0].update(agent=""),
    "duplicate": _dupe,
    "tampered-row": lambda b: b["messages"][1].update(body="tampered"),
    "tampered-receipt": lambda b: b["receipts"][0].update(read_at=ts(99)),
    "count": lambda b: b.update(count=b["count"] + 1),
    "no-source": _source(None),
    "no-instance": _source("instance"),
    "no-cursor": _source("cursor"),
    "no-captor": _source("captured_by"),
    "missing-root": _rebuilt([message(1), message(2, thread_id=uid(99))]),
    "cycle": _cycle,
    "orphan-receipt": _rebuilt([message(1, to_agent="*")], [receipt(1, "bob"), receipt(5, "bob")]),
    "missing-supersedes": _rebuilt([message(1, to_agent="*", supersedes_id=uid(50))]),
    "tombstoned-present": _rebuilt(
        [message(1), message(8)],
        tombstones=[{"message_id": uid(8), "revision": 3, "deleted_at": ts(9)}],
    ),
    "schema": lambda b: b.update(schema="hub-core.statehub-inbox-snapshot.v0"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_every_v1_rule_refuses_a_v2_bundle_with_the_same_code_and_rows(
    hubcore_db: Database, tmp_path: Path, case: str
) -> None:
    b = inbox_bundle()
    CASES[case](b)
    expected = b["content_hash"]
    with pytest.raises(SnapshotRejected) as v1:
        import_into(hubcore_db, copy.deepcopy(b), expected_hash=expected, apply=True)
    path = write_v2(b, tmp_path / "b.jsonl")
    if case == "schema":  # the schema is the header line's
        text = path.read_bytes().replace(V2_HEADER, b'{"schema":"%s"}\n' % b["schema"].encode())
        path.write_bytes(text)
    v2 = refused(hubcore_db, path, expected)
    assert (v2.code, sorted(v2.rows)) == (v1.value.code, sorted(v1.value.rows))


def test_the_operators_hash_is_checked(hubcore_db: Database, tmp_path: Path) -> None:
    b = inbox_bundle()
    error = refused(hubcore_db, captured(b, tmp_path / "b.jsonl"), "0" * 64)
    assert error.code == "hash_mismatch" and "operator expected" in error.message


def _cut_trailer(data: bytes) -> bytes:
    return data[: data.rstrip(b"\n").rfind(b"\n") + 1]


def _cut_mid_row(data: bytes) -> bytes:
    return data[: len(data) // 2]


def _flip_a_body(data: bytes) -> bytes:
    return data.replace(b'"body":"body 3"', b'"body":"body 4"', 1)


def _swap_two_rows(data: bytes) -> bytes:
    lines = data.split(b"\n")
    lines[2], lines[3] = lines[3], lines[2]
    return b"\n".join(lines)


def _line_after_trailer(data: bytes) -> bytes:
    return data + b'{"part":"messages","row":{}}\n'


def _not_json_line(data: bytes) -> bytes:
    lines = data.split(b"\n")
    lines[4] = lines[4][:-3]
    return b"\n".join(lines)


def _receipt_before_message(data: bytes) -> bytes:
    lines = data.split(b"\n")
    receipt_line = next(i for i, line in enumerate(lines) if b'"part":"receipts"' in line)
    lines.insert(2, lines.pop(receipt_line))
    return b"\n".join(lines)


@pytest.mark.parametrize(
    ("damage", "code"),
    [
        (_cut_trailer, "malformed_bundle"),
        (_cut_mid_row, "malformed_bundle"),
        (lambda data: data[: len(V2_HEADER)], "malformed_bundle"),
        (_flip_a_body, "hash_mismatch"),
        (_swap_two_rows, "malformed_bundle"),
        (_line_after_trailer, "malformed_bundle"),
        (_not_json_line, "malformed_bundle"),
        (_receipt_before_message, "malformed_bundle"),
    ],
    ids=[
        "no-trailer",
        "cut-mid-row",
        "header-only",
        "corrupted-row",
        "out-of-order",
        "after-trailer",
        "not-json",
        "parts-out-of-order",
    ],
)
def test_a_truncated_or_corrupted_v2_bundle_is_refused_with_nothing_written(
    hubcore_db: Database, tmp_path: Path, damage: Callable[[bytes], bytes], code: str
) -> None:
    b = inbox_bundle()
    path = captured(b, tmp_path / "b.jsonl")
    path.write_bytes(damage(path.read_bytes()))
    defined = indexes(hubcore_db)
    assert refused(hubcore_db, path, b["content_hash"]).code == code
    assert indexes(hubcore_db) == defined
    with pytest.raises(SnapshotRejected):  # validation refuses it too
        import_file(hubcore_db, path, expected_hash=b["content_hash"], apply=False)


def test_a_crash_mid_stream_leaves_the_receiver_empty(hubcore_db: Database, tmp_path: Path) -> None:
    b = bundle([message(n) for n in range(1, 12_001)])
    path = captured(b, tmp_path / "b.jsonl")

    def explode_after_first_batch(_n: int) -> None:
        raise RuntimeError("simulated crash after the first batch")

    with pytest.raises(RuntimeError):
        import_file(
            hubcore_db,
            path,
            expected_hash=b["content_hash"],
            apply=True,
            progress=explode_after_first_batch,
        )
    assert set(counts(hubcore_db).values()) == {0}
