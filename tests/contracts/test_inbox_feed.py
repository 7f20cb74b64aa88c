"""The inbox-feed contract as both services use it: the cursor codec and `content_hash`."""

from __future__ import annotations

import hashlib
import json

import pytest

from agenthub.contracts import inbox_feed
from agenthub.contracts.inbox_feed import (
    MAX_REVISION,
    ContentHasher,
    CursorError,
    ForeignCursor,
    MalformedCursor,
    decode_cursor,
    encode_cursor,
)
from agenthub.hubcore.errors import FeedRefused
from agenthub.hubcore.feedpage import decode_cursor as hubcore_decode
from agenthub.statehub import cursor as statehub_cursor
from agenthub.statehub.api.errors import status_of
from agenthub.statehub.errors import FeedError


@pytest.mark.parametrize("revision", [0, 1, 42, MAX_REVISION])
def test_a_cursor_decodes_to_the_revision_it_encodes(revision: int) -> None:
    assert decode_cursor(encode_cursor(revision)) == revision


@pytest.mark.parametrize(
    "cursor",
    [
        "v1:5\n",  # `$` would let a trailing newline through
        "v1:\u0665",  # an Arabic-Indic five: `\d` would take it
        f"v1:{MAX_REVISION + 1}",
        "v1:" + "1" * 20,
        "v1:-1",
        "v1:",
        "1",
        " v1:1",
        "V1:1",
        "",
    ],
)
def test_anything_but_v_n_colon_a_bigint_is_malformed(cursor: str) -> None:
    with pytest.raises(MalformedCursor):
        decode_cursor(cursor)


def test_a_cursor_that_is_not_text_is_malformed() -> None:
    with pytest.raises(MalformedCursor):
        decode_cursor(5)


def test_a_cursor_of_another_version_is_foreign_not_malformed() -> None:
    with pytest.raises(ForeignCursor) as raised:
        decode_cursor("v2:5")

    assert raised.value.version == "v2"


CURSORS = ["v1:0", "v1:17", f"v1:{MAX_REVISION}", "v1:5\n", "v1:\u0665", "v2:5", "v1:x", "v1:00"]


@pytest.mark.parametrize("cursor", CURSORS)
def test_state_hub_and_hub_core_accept_the_same_cursors(cursor: str) -> None:
    def served(value: str) -> int | None:
        try:
            return statehub_cursor.decode(value)
        except FeedError:
            return None

    def followed(value: str) -> int | None:
        try:
            return hubcore_decode(value, "cursor")
        except FeedRefused:
            return None

    assert served(cursor) == followed(cursor)


def test_state_hub_answers_409_for_a_foreign_cursor_and_400_for_a_malformed_one() -> None:
    with pytest.raises(FeedError) as foreign:
        statehub_cursor.decode("v2:5")
    with pytest.raises(FeedError) as malformed:
        statehub_cursor.decode("v1:5\n")

    assert (status_of(foreign.value), status_of(malformed.value)) == (409, 400)


def test_cursor_errors_are_value_errors_so_no_service_needs_the_contract_s_tree() -> None:
    assert issubclass(CursorError, ValueError)


def _whole(parts: dict[str, list[dict[str, object]]]) -> str:
    text = json.dumps(parts, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def test_the_streamed_hash_is_the_hash_of_the_whole_document() -> None:
    rows: dict[str, list[dict[str, object]]] = {
        "messages": [{"id": "a", "body": "é"}, {"id": "b", "body": "x"}],
        "receipts": [],
        "tombstones": [{"message_id": "c", "revision": 3}],
    }
    hasher = ContentHasher()
    for part in inbox_feed.SNAPSHOT_PARTS:
        for row in rows.get(part, []):
            hasher.add(part, row)
    hasher.add("receipt_tombstones", {"message_id": "d"})  # not hashed

    assert hasher.finish() == _whole(rows)


def test_an_empty_image_hashes_three_empty_lists() -> None:
    assert ContentHasher().finish() == _whole({"messages": [], "receipts": [], "tombstones": []})
