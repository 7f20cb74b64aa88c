"""`import_snapshot`: every rule, against a real SQLite and PostgreSQL receiver."""

from __future__ import annotations

import copy
import threading
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from agenthub.clock import FrozenClock
from agenthub.db import make_engine
from agenthub.hubcore import import_snapshot, snapshot_hash
from agenthub.hubcore import repository as repo
from agenthub.hubcore.bundle_import import import_into, receiver_hashes
from agenthub.hubcore.errors import SnapshotRejected
from agenthub.hubcore.feedrepo import closure_violations
from agenthub.hubcore.store import Database
from tests.hubcore.bundles import bundle, inbox_bundle, message, receipt, rehash, ts, uid
from tests.hubcore.conftest import empty_hubcore_pg


def counts(db: Database) -> dict[str, int]:
    with db.read_only() as session:
        return repo.row_counts(session)


def apply(db: Database, b: Any, expected: str | None = None, **kwargs: Any) -> Any:
    with db.write() as session:
        return import_snapshot(
            session, b, expected_hash=expected or b["content_hash"], apply=True, **kwargs
        )


def rejected(db: Database, b: Any, expected: str | None = None) -> SnapshotRejected:
    with pytest.raises(SnapshotRejected) as info:
        apply(db, b, expected)
    assert counts(db) == dict.fromkeys(counts(db), 0), "a refused import must write nothing"
    return info.value


def test_validation_without_apply_writes_nothing(hubcore_db: Database) -> None:
    b = inbox_bundle()
    with hubcore_db.write() as session:
        result = import_snapshot(session, b, expected_hash=b["content_hash"])
    assert result.outcome == "valid"
    assert result.messages == 6 and result.receipts == 2
    assert set(counts(hubcore_db).values()) == {0}


def test_apply_imports_every_row_receipt_and_the_source_cursor(hubcore_db: Database) -> None:
    b = inbox_bundle()
    clock = FrozenClock()
    result = apply(hubcore_db, b, clock=clock)
    assert result.outcome == "imported"
    assert counts(hubcore_db) == {
        "projected_messages": 6,
        "projected_receipts": 2,
        "projected_tombstones": 0,
        "source_cursors": 1,
    }
    with hubcore_db.read_only() as session:
        assert receiver_hashes(session)["content_hash"] == b["content_hash"]
        stored = sorted(repo.stored_messages(session), key=lambda m: m["id"])
        assert stored == sorted(b["messages"], key=lambda m: m["id"])
        cursor = repo.latest_cursor(session)
    assert cursor is not None
    assert (cursor.source_instance, cursor.cursor, cursor.high_water) == (
        "statehub-test",
        "v1:0",
        "v1:0",
    )
    assert cursor.last_success_at == clock.now()
    assert cursor.mode == "snapshot-pilot"


def test_exact_reimport_is_a_no_op(hubcore_db: Database) -> None:
    b = inbox_bundle()
    clock = FrozenClock()
    apply(hubcore_db, b, clock=clock)
    clock.advance(3600)
    result = apply(hubcore_db, copy.deepcopy(b), clock=clock)
    assert result.outcome == "unchanged"
    with hubcore_db.read_only() as session:
        cursor = repo.latest_cursor(session)
        assert receiver_hashes(session)["content_hash"] == b["content_hash"]
    assert cursor is not None and cursor.last_success_at == FrozenClock().now()
    assert counts(hubcore_db)["projected_messages"] == 6


def test_different_bundle_over_existing_rows_changes_nothing(hubcore_db: Database) -> None:
    first = inbox_bundle()
    apply(hubcore_db, first)
    changed = copy.deepcopy(first)
    changed["messages"][0]["body"] = "edited at the source"
    changed["messages"].append(message(40))
    changed = rehash(changed)
    with pytest.raises(SnapshotRejected) as info:
        apply(hubcore_db, changed)
    assert info.value.code == "receiver_differs"
    assert uid(1) in info.value.rows and uid(40) in info.value.rows
    with hubcore_db.read_only() as session:
        assert receiver_hashes(session)["content_hash"] == first["content_hash"]
    assert counts(hubcore_db)["projected_messages"] == 6


def test_bundle_from_another_source_is_refused_over_existing_rows(hubcore_db: Database) -> None:
    first = inbox_bundle()
    apply(hubcore_db, first)
    other = rehash({**copy.deepcopy(first), "source": {**first["source"], "instance": "other"}})
    with pytest.raises(SnapshotRejected) as info:
        apply(hubcore_db, other)
    assert info.value.code == "receiver_differs"
    assert "statehub-test" in info.value.rows


def test_an_exception_mid_import_rolls_everything_back(hubcore_db: Database) -> None:
    b = bundle([message(n) for n in range(1, 12_001)])

    def explode_after_first_batch(_n: int) -> None:
        raise RuntimeError("simulated crash after the first batch")

    with pytest.raises(RuntimeError):
        apply(hubcore_db, b, progress=explode_after_first_batch)
    assert set(counts(hubcore_db).values()) == {0}


def test_thread_roots_are_inserted_before_replies(hubcore_db: Database) -> None:
    # The reply's id sorts before its root's, so id order alone would break the thread link.
    b = bundle([message(9, subject="root"), message(2, thread_id=uid(9))])
    assert apply(hubcore_db, b).outcome == "imported"


def test_a_reply_without_its_root_is_caught_by_the_closure_check(
    hubcore_db: Database,
) -> None:
    # No foreign key since the follower (0002): a follower may hold a reply before
    # its root's newest revision, so closure is a checkpoint query instead.
    b = bundle([message(9, subject="root"), message(2, thread_id=uid(9))])
    reply_only = [m for m in b["messages"] if m["thread_id"] is not None]
    with hubcore_db.write() as session:
        repo.insert_messages(session, reply_only)
        assert closure_violations(session) == [f"{uid(2)} thread_id->{uid(9)}"]


def test_duplicate_ids_are_rejected_by_id(hubcore_db: Database) -> None:
    b = rehash(bundle([message(1), message(2)]))
    b["messages"].append(copy.deepcopy(b["messages"][1]))
    b["count"] = 3
    error = rejected(hubcore_db, b)
    assert error.code == "duplicate_ids" and error.rows == [uid(2)]


@pytest.mark.parametrize(
    ("edit", "bad"),
    [
        (lambda m: m.update(id="not-a-uuid"), "not-a-uuid"),
        (lambda m: m.pop("body"), None),
        (lambda m: m.update(created_at="yesterday"), None),
        (lambda m: m.update(read_at=17), None),
        (lambda m: m.update(revision=-1), None),
        (lambda m: m.update(colour="blue"), None),
        (lambda m: m.update(to_agent="x" * 65), None),
    ],
    ids=["bad-uuid", "missing-field", "bad-time", "wrong-type", "bad-revision", "extra", "long"],
)
def test_malformed_rows_are_rejected_by_id(hubcore_db: Database, edit: Any, bad: Any) -> None:
    b = bundle([message(1), message(2)])
    edit(b["messages"][1])
    error = rejected(hubcore_db, b)
    assert error.code == "malformed_rows"
    assert error.rows == [bad or uid(2)]


def test_a_row_changed_after_capture_fails_the_hash(hubcore_db: Database) -> None:
    b = bundle([message(1), message(2)])
    b["messages"][1]["body"] = "tampered"
    error = rejected(hubcore_db, b)
    assert error.code == "hash_mismatch"


def test_a_hash_other_than_the_operators_is_rejected(hubcore_db: Database) -> None:
    b = bundle([message(1)])
    error = rejected(hubcore_db, b, expected="0" * 64)
    assert error.code == "hash_mismatch" and "operator expected" in error.message


def test_a_count_that_disagrees_with_the_rows_is_rejected(hubcore_db: Database) -> None:
    b = bundle([message(1), message(2)])
    b["count"] = 3
    error = rejected(hubcore_db, b)
    assert error.code == "count_mismatch"


@pytest.mark.parametrize("missing", ["source", "instance", "cursor", "captured_by"])
def test_absent_provenance_is_rejected(hubcore_db: Database, missing: str) -> None:
    b = bundle([message(1)])
    if missing == "source":
        del b["source"]
    else:
        del b["source"][missing]
    error = rejected(hubcore_db, b)
    assert error.code == "absent_provenance"


def test_a_reply_without_its_thread_root_is_rejected_by_id(hubcore_db: Database) -> None:
    b = bundle([message(1), message(2, thread_id=uid(99))])
    error = rejected(hubcore_db, b)
    assert error.code == "missing_thread_roots" and error.rows == [uid(2)]


def test_a_thread_cycle_is_rejected_naming_its_rows(hubcore_db: Database) -> None:
    b = bundle(
        [
            message(1),
            message(2, thread_id=uid(3)),
            message(3, thread_id=uid(2)),
            message(4, thread_id=uid(4)),
        ]
    )
    error = rejected(hubcore_db, b)
    assert error.code == "thread_cycles"
    assert set(error.rows) == {uid(2), uid(3), uid(4)}


def test_a_receipt_for_no_message_is_rejected(hubcore_db: Database) -> None:
    b = bundle([message(1, to_agent="*")], [receipt(1, "bob"), receipt(5, "bob")])
    error = rejected(hubcore_db, b)
    assert error.code == "orphan_receipts" and error.rows == [f"{uid(5)}:bob"]


def test_a_supersedes_link_to_a_missing_message_is_rejected(hubcore_db: Database) -> None:
    b = bundle([message(1, to_agent="*", supersedes_id=uid(50))])
    error = rejected(hubcore_db, b)
    assert error.code == "missing_supersedes_targets" and error.rows == [uid(1)]


def test_a_bundle_of_another_schema_is_rejected(hubcore_db: Database) -> None:
    b = bundle([message(1)])
    b["schema"] = "hub-core.statehub-inbox-snapshot.v0"
    assert rejected(hubcore_db, b).code == "unsupported_schema"


def test_tombstones_keep_no_body_and_block_a_present_row(hubcore_db: Database) -> None:
    tomb = {"message_id": uid(8), "revision": 3, "deleted_at": ts(9)}
    b = bundle([message(1)], tombstones=[tomb])
    apply(hubcore_db, b)
    with hubcore_db.read_only() as session:
        assert list(repo.stored_tombstones(session)) == [tomb]
    clash = bundle([message(1), message(8)], tombstones=[tomb])
    with pytest.raises(SnapshotRejected) as info, hubcore_db.write() as session:
        import_snapshot(session, clash, expected_hash=clash["content_hash"])
    assert info.value.code == "tombstoned_rows_present"


def test_snapshot_hash_ignores_representation_but_not_content() -> None:
    row = message(1, read_at="2026-03-01T14:30:00+02:00")
    same = {**row, "id": uid(1).upper().replace("-", ""), "read_at": "2026-03-01T12:30:00Z"}
    assert snapshot_hash([row, message(2)]) == snapshot_hash([message(2), same])
    assert snapshot_hash([row]) != snapshot_hash([{**row, "body": "other"}])


def test_apply_locks_the_projection_on_postgresql(_pg_hubcore_url: str) -> None:
    empty_hubcore_pg(_pg_hubcore_url)
    engine = make_engine(_pg_hubcore_url)
    db = Database(engine)
    b = inbox_bundle()
    try:
        apply(db, b)
        # A repeat writes nothing, so any lock it holds is the importer's own table lock.
        with db.write() as session:
            import_snapshot(session, b, expected_hash=b["content_hash"], apply=True)
            with engine.connect() as other:
                readable = other.execute(text("SELECT count(*) FROM projected_messages"))
                assert readable.scalar_one() == 6
                other.execute(text("SET lock_timeout = '100ms'"))
                with pytest.raises(OperationalError, match="lock timeout"):
                    other.execute(text("LOCK TABLE projected_messages IN EXCLUSIVE MODE"))
                other.rollback()
    finally:
        engine.dispose()
        empty_hubcore_pg(_pg_hubcore_url)


def test_a_committed_import_leaves_the_planner_fresh_statistics(hubcore_db: Database) -> None:
    b = inbox_bundle()
    assert import_into(hubcore_db, b, expected_hash=b["content_hash"], apply=True).outcome == (
        "imported"
    )
    with hubcore_db.read_only() as session:
        if hubcore_db.sqlite:
            analyzed = session.execute(
                text("SELECT stat FROM sqlite_stat1 WHERE tbl = 'projected_messages'")
            ).first()
            assert analyzed is not None
        else:
            tuples: float = session.execute(
                text("SELECT reltuples FROM pg_class WHERE relname = 'projected_messages'")
            ).scalar_one()
            assert tuples == 6


def test_import_into_without_apply_only_validates(hubcore_db: Database) -> None:
    b = inbox_bundle()
    result = import_into(hubcore_db, b, expected_hash=b["content_hash"], apply=False)
    assert result.outcome == "valid"
    assert set(counts(hubcore_db).values()) == {0}


def test_two_concurrent_imports_never_both_see_an_empty_receiver(hubcore_db: Database) -> None:
    b = inbox_bundle()
    outcomes: list[str] = []
    errors: list[BaseException] = []

    def second_importer() -> None:
        try:
            outcomes.append(apply(hubcore_db, copy.deepcopy(b)).outcome)
        except BaseException as exc:
            errors.append(exc)

    with hubcore_db.write() as session:
        first = import_snapshot(session, b, expected_hash=b["content_hash"], apply=True)
        racer = threading.Thread(target=second_importer)
        racer.start()
        racer.join(timeout=0.5)
        # The second importer waits for the first transaction instead of inspecting.
        assert racer.is_alive()
    racer.join(timeout=30)
    assert first.outcome == "imported"
    assert errors == [] and outcomes == ["unchanged"]
