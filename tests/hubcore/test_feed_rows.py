"""A feed page and a paged feed snapshot read the same row shape the same way.

The page applier (`feedpage`) and the re-snapshot (`snapshot_pages`) once each
had their own receipt-tombstone normaliser, and they disagreed: a page refused
an empty agent that a snapshot staged, and a snapshot refused a non-integer
revision a page let through to a later check.
"""

from __future__ import annotations

from typing import Any

import pytest

from agenthub.hubcore.canonical import MalformedRow, Row
from agenthub.hubcore.errors import FeedRefused
from agenthub.hubcore.feedpage import parse_page
from agenthub.hubcore.snapshot_pages import staged_row
from tests.hubcore.bundles import ts, uid
from tests.hubcore.feedpages import page

GOOD = {"message_id": uid(1), "agent": "alice", "revision": 7, "deleted_at": ts(7)}


def _from_page(state: dict[str, Any]) -> Row | None:
    """The row a feed page keeps for this receipt deletion, or None when refused."""
    key = f"{state.get('message_id')}:{state.get('agent')}"
    change = {"revision": 7, "entity": "receipt", "key": key, "op": "delete", "state": state}
    try:
        return parse_page(page(change)).changes[0].row
    except FeedRefused:
        return None


def _from_snapshot(state: dict[str, Any]) -> Row | None:
    """The row a snapshot stages for this receipt tombstone, or None when refused."""
    try:
        return staged_row("receipt_tombstones", state)[1]
    except MalformedRow:
        return None


@pytest.mark.parametrize(
    "state",
    [
        pytest.param(GOOD, id="well-formed"),
        pytest.param({**GOOD, "deleted_at": "2026-01-01T00:00:07+00:00"}, id="other-utc-spelling"),
        pytest.param({**GOOD, "message_id": uid(1).upper()}, id="uppercase-uuid"),
        pytest.param({**GOOD, "extra": 1}, id="field-added-within-v1"),
        pytest.param({**GOOD, "agent": ""}, id="empty-agent"),
        pytest.param({**GOOD, "agent": "a" * 65}, id="agent-too-long"),
        pytest.param({**GOOD, "agent": 5}, id="agent-not-text"),
        pytest.param({k: v for k, v in GOOD.items() if k != "agent"}, id="no-agent"),
        pytest.param({**GOOD, "revision": "7"}, id="revision-as-text"),
        pytest.param({**GOOD, "revision": True}, id="revision-as-bool"),
        pytest.param({k: v for k, v in GOOD.items() if k != "deleted_at"}, id="no-deleted-at"),
        pytest.param({**GOOD, "message_id": "not-a-uuid"}, id="bad-message-id"),
    ],
)
def test_a_page_and_a_snapshot_accept_and_normalise_a_receipt_tombstone_alike(
    state: dict[str, Any],
) -> None:
    assert _from_page(state) == _from_snapshot(state)


def test_a_well_formed_receipt_tombstone_is_kept_in_canonical_form() -> None:
    row = _from_snapshot({**GOOD, "message_id": uid(1).upper(), "extra": 1})

    assert row == GOOD


def test_a_receipt_tombstone_with_an_empty_agent_is_refused_by_both() -> None:
    state = {**GOOD, "agent": ""}

    assert _from_page(state) is None
    assert _from_snapshot(state) is None


def test_a_page_and_a_snapshot_keep_a_message_tombstone_without_its_reason() -> None:
    state = {"message_id": uid(2), "revision": 9, "deleted_at": ts(9), "reason": "purge"}
    change = {"revision": 9, "entity": "tombstone", "key": uid(2), "op": "delete", "state": state}

    from_page = parse_page(page(change)).changes[0].row

    assert from_page == staged_row("tombstones", state)[1]
    assert from_page == {"message_id": uid(2), "revision": 9, "deleted_at": ts(9)}
