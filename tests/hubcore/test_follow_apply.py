"""The page applier (contract §5-§6), fed crafted pages directly: our own boundary."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from sqlalchemy import select

from agenthub.clock import FrozenClock
from agenthub.hubcore.apply import PageApplier
from agenthub.hubcore.errors import FeedRefused
from agenthub.hubcore.models import (
    ProjectedMessage,
    ProjectedReceipt,
    ProjectedReceiptTombstone,
    ProjectedTombstone,
)
from agenthub.hubcore.store import Database
from tests.hubcore.bundles import ts, uid
from tests.hubcore.feedpages import (
    EPOCH,
    SOURCE,
    cursor_of,
    m,
    messages,
    page,
    r,
    r_del,
    start_cursor,
    t,
)


@pytest.fixture
def applier(hubcore_db: Database) -> PageApplier:
    start_cursor(hubcore_db)
    return PageApplier(hubcore_db, FrozenClock())


def refused(applier: PageApplier, raw: dict[str, Any]) -> FeedRefused:
    """Apply a page that must be refused; assert nothing (rows or cursor) changed."""
    before = (messages(applier.db), cursor_of(applier.db).cursor, _all(applier.db))
    with pytest.raises(FeedRefused) as info:
        applier.apply(raw)
    assert (messages(applier.db), cursor_of(applier.db).cursor, _all(applier.db)) == before
    return info.value


def _all(db: Database) -> tuple[int, int, int, int]:
    with db.read_only() as session:
        return tuple(  # type: ignore[return-value]
            len(session.scalars(select(model)).all())
            for model in (
                ProjectedMessage,
                ProjectedReceipt,
                ProjectedTombstone,
                ProjectedReceiptTombstone,
            )
        )


# -- the §6 table ------------------------------------------------------------------


def test_a_new_row_is_inserted_and_the_cursor_moves_with_it(applier: PageApplier) -> None:
    result = applier.apply(page(m(1, 1), r(1, "bob", 2)))
    assert result.inserted == 2
    assert messages(applier.db)[uid(1)]["revision"] == 1
    cursor = cursor_of(applier.db)
    assert (cursor.cursor, cursor.high_water, cursor.mode) == ("v1:2", "v1:2", "live")


def test_a_stale_change_is_ignored_and_logged(
    applier: PageApplier, caplog: pytest.LogCaptureFixture
) -> None:
    applier.apply(page(m(1, 1), m(2, 3)))
    applier.apply(page(m(1, 4, read_at=ts(5)), after=3))
    with caplog.at_level(logging.INFO, logger="agenthub.hubcore.page_merge"):
        result = applier.apply(page(m(1, 1), m(3, 5), after=4))
    assert (result.stale, result.inserted) == (1, 1)
    assert messages(applier.db)[uid(1)]["read_at"] == ts(5)
    assert "ignored stale message" in caplog.text


def test_an_exact_replay_of_an_applied_page_is_a_no_op(applier: PageApplier) -> None:
    first = page(m(1, 1), r(1, "bob", 1), m(2, 2))
    applier.apply(first)
    before = messages(applier.db)
    result = applier.apply(first)
    assert (result.unchanged, result.inserted, result.replaced) == (3, 0, 0)
    assert messages(applier.db) == before
    assert cursor_of(applier.db).cursor == "v1:2"


def test_same_revision_with_different_content_is_refused(applier: PageApplier) -> None:
    applier.apply(page(m(1, 1)))
    error = refused(applier, page(m(1, 1, body="another body"), m(2, 2), after=1))
    assert error.code == "same_revision_conflict" and error.rows == [uid(1)]


@pytest.mark.parametrize(
    "field",
    ["from_agent", "to_agent", "subject", "body", "kind", "created_at", "expires_at"],
)
def test_an_immutable_message_field_may_not_change(applier: PageApplier, field: str) -> None:
    applier.apply(page(m(1, 1)))
    value = ts(77) if field in ("created_at", "expires_at") else "changed"
    error = refused(applier, page(m(1, 2, **{field: value}), after=1))
    assert error.code == "illegal_transition" and field in error.message


@pytest.mark.parametrize(
    ("stored", "incoming"),
    [
        ({"read_at": ts(5)}, {"read_at": None}),
        ({"read_at": ts(5)}, {"read_at": ts(6)}),
        ({"archived_at": ts(5)}, {"archived_at": None}),
        ({"archived_at": ts(5)}, {"archived_at": ts(6)}),
    ],
)
def test_read_and_archive_marks_only_go_from_null_to_a_value(
    applier: PageApplier, stored: dict[str, Any], incoming: dict[str, Any]
) -> None:
    applier.apply(page(m(1, 1, **stored)))
    error = refused(applier, page(m(1, 2, **incoming), after=1))
    assert error.code == "illegal_transition" and "from null to a value" in error.message


def test_a_read_mark_and_an_archive_replace_the_row(applier: PageApplier) -> None:
    applier.apply(page(m(1, 1)))
    result = applier.apply(page(m(1, 2, read_at=ts(5), archived_at=ts(6)), after=1))
    assert result.replaced == 1
    assert messages(applier.db)[uid(1)]["archived_at"] == ts(6)


@pytest.mark.parametrize("field", ["delivered_at", "read_at", "acknowledged_at"])
def test_receipt_fields_only_go_from_null_to_a_value(applier: PageApplier, field: str) -> None:
    applier.apply(page(m(1, 1, to_agent="*"), r(1, "bob", 1, **{field: ts(3)})))
    error = refused(applier, page(r(1, "bob", 2, **{field: ts(4)}), after=1))
    assert error.code == "illegal_transition" and field in error.message


@pytest.mark.parametrize("field", ["thread_id", "supersedes_id"])
def test_a_reference_may_not_be_nulled_without_a_tombstone(
    applier: PageApplier, field: str
) -> None:
    applier.apply(page(m(9, 1), m(1, 2, **{field: uid(9)})))
    error = refused(applier, page(m(1, 3, **{field: None}), after=2))
    assert error.code == "illegal_transition" and "no tombstone" in error.message


def test_a_reference_may_not_change_to_another_message(applier: PageApplier) -> None:
    applier.apply(page(m(9, 1), m(8, 1), m(1, 2, thread_id=uid(9))))
    error = refused(applier, page(m(1, 3, thread_id=uid(8)), after=2))
    assert error.code == "illegal_transition"


# -- §5 ordering ---------------------------------------------------------------------


def test_a_page_at_or_below_the_cursor_that_is_not_a_replay_is_refused(
    applier: PageApplier,
) -> None:
    applier.apply(page(m(1, 5)))
    error = refused(applier, page(m(2, 4), after=3, high_water=5))
    assert error.code == "out_of_order_page" and error.rows == [uid(2)]


def test_a_page_asked_for_beyond_the_cursor_is_refused_as_a_skip(
    applier: PageApplier,
) -> None:
    applier.apply(page(m(1, 1)), after="v1:0")
    later = page(m(3, 3), after=2)
    with pytest.raises(FeedRefused) as info:
        applier.apply(later, after="v1:2")
    assert info.value.code == "out_of_order_page"
    applier.apply(page(m(2, 2), after=1), after="v1:1")
    assert applier.apply(later, after="v1:2").inserted == 1


def test_changes_out_of_revision_order_are_refused(applier: PageApplier) -> None:
    error = refused(applier, page(m(1, 3), m(2, 2)))
    assert error.code == "out_of_order_page"


def test_a_high_water_lower_than_already_seen_is_refused(applier: PageApplier) -> None:
    applier.apply(page(m(1, 5), high_water=9))
    error = refused(applier, page(after=5, high_water=7))
    assert error.code == "falling_high_water"


def test_a_replayed_old_page_is_a_no_op_despite_its_older_high_water(
    applier: PageApplier,
) -> None:
    old = page(m(1, 1), has_more=True, high_water=2)
    applier.apply(old)
    applier.apply(page(m(2, 2), after=1, high_water=2))
    assert applier.apply(old).unchanged == 1
    cursor = cursor_of(applier.db)
    assert (cursor.cursor, cursor.high_water) == ("v1:2", "v1:2")


@pytest.mark.parametrize(
    ("source", "epoch", "code"),
    [("hub-b", EPOCH, "source_mismatch"), (SOURCE, "epoch-2", "epoch_changed")],
)
def test_a_page_from_another_instance_or_epoch_is_refused(
    applier: PageApplier, source: str, epoch: str, code: str
) -> None:
    assert refused(applier, page(m(1, 1), source=source, epoch=epoch)).code == code


def test_a_malformed_page_is_refused(applier: PageApplier) -> None:
    bad = page(m(1, 1))
    del bad["changes"][0]["state"]["body"]
    assert refused(applier, bad).code == "malformed_page"


def test_an_empty_page_is_a_heartbeat_that_moves_source_time(applier: PageApplier) -> None:
    applier.apply(page(m(1, 3)))
    applier.apply(page(after=3, high_water=3, source_time=ts(2000)))
    cursor = cursor_of(applier.db)
    assert cursor.cursor == "v1:3"
    assert cursor.last_source_time.isoformat().startswith(ts(2000)[:19])


# -- tombstones ----------------------------------------------------------------------


def test_a_tombstone_deletes_the_row_and_its_receipts_and_keeps_no_body(
    applier: PageApplier,
) -> None:
    applier.apply(page(m(1, 1, to_agent="*"), r(1, "bob", 1), r(1, "eve", 1)))
    applier.apply(page(t(1, 2), after=1))
    assert uid(1) not in messages(applier.db)
    with applier.db.read_only() as session:
        tombstone = session.scalars(select(ProjectedTombstone)).one()
        assert session.scalars(select(ProjectedReceipt)).all() == []
    assert (str(tombstone.message_id), tombstone.revision) == (uid(1), 2)
    assert not hasattr(tombstone, "body")


def test_a_replayed_upsert_below_its_tombstone_does_not_revive_the_message(
    applier: PageApplier,
) -> None:
    applier.apply(page(m(1, 1)))
    applier.apply(page(t(1, 2), after=1))
    result = applier.apply(page(m(1, 1)))
    assert result.stale == 1 and uid(1) not in messages(applier.db)


def test_an_upsert_above_a_tombstone_is_refused(applier: PageApplier) -> None:
    applier.apply(page(m(1, 1)))
    applier.apply(page(t(1, 2), after=1))
    assert refused(applier, page(m(1, 3), after=2)).code == "tombstoned_id_reused"


def test_a_direct_receipt_delete_drops_it_and_a_replay_cannot_revive_it(
    applier: PageApplier,
) -> None:
    applier.apply(page(m(1, 1, to_agent="*"), r(1, "bob", 1)))
    applier.apply(page(r_del(1, "bob", 2), after=1))
    result = applier.apply(page(m(1, 1, to_agent="*"), r(1, "bob", 1)))
    assert result.stale == 1
    with applier.db.read_only() as session:
        assert session.scalars(select(ProjectedReceipt)).all() == []
        assert len(session.scalars(select(ProjectedReceiptTombstone)).all()) == 1


# -- the three holes in the literal contract text ---------------------------------------


def test_closure_is_checked_at_the_checkpoint_not_per_page(applier: PageApplier) -> None:
    # Root written at 1, reply at 2, root archived at 3: rows keep their latest
    # revision, so the reply (2) is served before the root (3). A per-page
    # closure check would refuse the first page.
    first = applier.apply(page(m(2, 2, thread_id=uid(1)), has_more=True, high_water=3))
    assert not first.checkpoint
    second = applier.apply(page(m(1, 3, archived_at=ts(9)), after=2))
    assert second.checkpoint
    assert set(messages(applier.db)) == {uid(1), uid(2)}


def test_a_checkpoint_that_finds_a_missing_root_is_refused(applier: PageApplier) -> None:
    error = refused(applier, page(m(2, 2, thread_id=uid(1))))
    assert error.code == "closure_broken" and uid(2) in error.message


def test_a_reference_nulled_under_a_later_revision_than_its_tombstone_is_accepted(
    applier: PageApplier,
) -> None:
    # Reply 2 -> root 1. The root is deleted at 5 (the reply nulled in 5), then the
    # reply is read at 7: its row now carries revision 7, above the tombstone's.
    applier.apply(page(m(1, 1), m(2, 2, thread_id=uid(1))))
    result = applier.apply(page(t(1, 5), m(2, 7, read_at=ts(7)), after=2))
    assert result.deleted == 1 and result.replaced == 1
    assert messages(applier.db)[uid(2)]["thread_id"] is None


def test_a_reference_nulled_after_its_tombstone_was_applied_in_an_earlier_page(
    applier: PageApplier,
) -> None:
    applier.apply(page(m(1, 1), m(2, 2, supersedes_id=uid(1))))
    applier.apply(page(t(1, 5), after=2, has_more=True, high_water=7))
    result = applier.apply(page(m(2, 7, supersedes_id=None, read_at=ts(7)), after=5))
    assert result.replaced == 1 and result.checkpoint


def test_a_reference_nulled_before_its_tombstone_revision_is_refused(
    applier: PageApplier,
) -> None:
    applier.apply(page(m(1, 1), m(2, 2, thread_id=uid(1))))
    error = refused(applier, page(m(2, 4, thread_id=None), t(1, 5), after=2))
    assert error.code == "illegal_transition"


# -- crash safety --------------------------------------------------------------------


def test_a_crash_between_applying_and_committing_leaves_the_old_state_and_cursor(
    applier: PageApplier,
) -> None:
    applier.apply(page(m(1, 1)))

    def crash() -> None:
        raise KeyboardInterrupt("killed between apply and commit")

    dying = PageApplier(applier.db, FrozenClock(), before_commit=crash)
    next_page = page(m(1, 2, read_at=ts(3)), m(2, 2), after=1)
    with pytest.raises(KeyboardInterrupt):
        dying.apply(next_page)
    assert messages(applier.db)[uid(1)]["read_at"] is None
    assert uid(2) not in messages(applier.db) and cursor_of(applier.db).cursor == "v1:1"
    restarted = PageApplier(applier.db, FrozenClock())
    assert restarted.apply(next_page).inserted == 1
    assert cursor_of(applier.db).cursor == "v1:2"


def test_two_followers_applying_the_same_page_take_turns(applier: PageApplier) -> None:
    import threading

    raw = page(m(1, 1), m(2, 1), r(1, "bob", 1))
    results: list[object] = []
    gate = threading.Barrier(2)

    def apply() -> None:
        gate.wait()
        try:
            results.append(PageApplier(applier.db, FrozenClock()).apply(raw, after="v1:0"))
        except Exception as exc:  # collected: the assertion below names it
            results.append(exc)

    threads = [threading.Thread(target=apply) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    inserted = sorted(getattr(result, "inserted", -1) for result in results)
    assert inserted == [0, 3], results
    assert set(messages(applier.db)) == {uid(1), uid(2)}
