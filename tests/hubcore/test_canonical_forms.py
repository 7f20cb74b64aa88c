"""Canonical form of the values hub-core reads: the forms SQLite stores and the rows a
capture or an import normalizes take fast paths that give exactly what the generic
parse gives, and anything else still takes the checked path that names the field."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from agenthub.hubcore.canonical import (
    MalformedRow,
    canonical_timestamp,
    canonical_uuid,
    normalize_message,
)
from tests.hubcore.bundles import message


def test_a_uuid_stored_as_32_hex_digits_is_its_hyphenated_form() -> None:
    value = uuid.uuid4()
    assert canonical_uuid(value.hex) == str(value) == canonical_uuid(value)
    assert canonical_uuid(value.hex.upper()) == str(value)  # the generic parse


def test_a_timestamp_as_sqlite_stores_it_is_naive_utc() -> None:
    moment = datetime(2026, 6, 1, 12, 30, 5, 7, tzinfo=UTC)
    stored = moment.replace(tzinfo=None).isoformat(sep=" ", timespec="microseconds")
    assert canonical_timestamp(stored, "t") == "2026-06-01T12:30:05.000007Z"
    assert canonical_timestamp(stored, "t") == canonical_timestamp(moment, "t")


@pytest.mark.parametrize("value", ["2026-02-30 00:00:01.000000", "2026-13-01 00:00:01.000000"])
def test_a_stored_form_that_is_no_real_moment_is_refused(value: str) -> None:
    with pytest.raises(MalformedRow) as info:
        canonical_timestamp(value, "created_at")
    assert info.value.field == "created_at"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"from_agent": ""}, "from_agent"),
        ({"to_agent": "x" * 65}, "to_agent"),
        ({"kind": 3}, "kind"),
        ({"body": None}, "body"),
        ({"revision": True}, "revision"),
        ({"revision": -1}, "revision"),
        ({"created_at": "yesterday"}, "created_at"),
        ({"thread_id": "not-a-uuid"}, "thread_id"),
    ],
)
def test_a_message_the_fast_path_does_not_take_is_refused_naming_the_field(
    change: dict[str, Any], field: str
) -> None:
    with pytest.raises(MalformedRow) as info:
        normalize_message({**message(1), **change})
    assert info.value.field == field


def test_a_canonical_message_is_returned_as_it_is() -> None:
    row = message(1, thread_id=str(uuid.UUID(int=9)))
    assert normalize_message(row) == row
