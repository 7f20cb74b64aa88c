"""A State Hub feed page as hub-core reads it (contract §5): parsed, checked, canonical.

`parse_page` turns the JSON State Hub serves into a `FeedPage` whose changes
carry rows in hub-core's canonical form, or raises `FeedRefused`
(`malformed_page`, `unsupported_contract`, `out_of_order_page`) for anything
not shaped like `statehub.inbox-feed.v1`. Applying it is `apply`'s job.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agenthub.contracts import inbox_feed
from agenthub.contracts.inbox_feed import CONTRACT, encode_cursor
from agenthub.hubcore.canonical import (
    MalformedRow,
    Row,
    canonical_timestamp,
    normalize_feed_tombstone,
    normalize_message,
    normalize_receipt,
    normalize_receipt_tombstone,
    parse_timestamp,
    receipt_key,
)
from agenthub.hubcore.errors import FeedRefused

__all__ = [
    "CONTRACT",
    "RESNAPSHOT_HINT",
    "Change",
    "FeedPage",
    "decode_cursor",
    "encode_cursor",
    "parse_page",
]

RESNAPSHOT_HINT = "the follower re-snapshots; if this repeats, State Hub is serving bad data"


def decode_cursor(value: Any, field: str) -> int:
    """The revision in a `v1:` cursor; any other value is a `malformed_page` refusal."""
    try:
        return inbox_feed.decode_cursor(value)
    except inbox_feed.CursorError:
        raise FeedRefused(
            "malformed_page",
            f"{field} {value!r:.40} is not a v1 cursor",
            hint="State Hub must serve statehub.inbox-feed.v1",
        ) from None


@dataclass(frozen=True)
class Change:
    revision: int
    entity: str
    op: str
    key: str
    row: Row


@dataclass(frozen=True)
class FeedPage:
    source_instance: str
    source_epoch: str | None
    source_time: datetime
    high_water: int
    next_cursor: int
    has_more: bool
    changes: list[Change]

    @property
    def checkpoint(self) -> bool:
        """Caught up: every revision up to the source's high water is in the projection."""
        return not self.has_more and self.next_cursor == self.high_water


def _malformed(message: str) -> FeedRefused:
    return FeedRefused("malformed_page", message, hint=RESNAPSHOT_HINT)


def _change(raw: Any, position: int) -> Change:
    if not isinstance(raw, Mapping):
        raise _malformed(f"change #{position} is not an object")
    revision, entity, op, key, state = (
        raw.get("revision"),
        raw.get("entity"),
        raw.get("op"),
        raw.get("key"),
        raw.get("state"),
    )
    if isinstance(revision, bool) or not isinstance(revision, int) or revision < 0:
        raise _malformed(f"change #{position} has no revision")
    if not isinstance(key, str) or not isinstance(state, Mapping):
        raise _malformed(f"change #{position} has no key or state")
    try:
        if entity == "message" and op == "upsert":
            row = normalize_message(state)
            expected = row["id"]
        elif entity == "receipt" and op == "upsert":
            row = normalize_receipt(state)
            expected = receipt_key(row)
        elif entity == "receipt" and op == "delete":
            row = normalize_receipt_tombstone(state)
            expected = receipt_key(row)
        elif entity == "tombstone" and op == "delete":
            row = normalize_feed_tombstone(state)
            expected = row["message_id"]
        else:
            raise _malformed(f"change #{position} is an unknown {entity!r:.20}/{op!r:.20}")
    except MalformedRow as exc:
        raise _malformed(f"change #{position} ({key:.80}): {exc}") from None
    if row["revision"] != revision or key != expected:
        raise _malformed(f"change #{position}: key or revision disagrees with its state")
    return Change(revision, entity, op, key, row)


def parse_page(raw: Any) -> FeedPage:
    """A State Hub feed page as a `FeedPage`; refuses anything not shaped like v1."""
    if not isinstance(raw, Mapping):
        raise _malformed("a feed page is a JSON object")
    if raw.get("contract") != CONTRACT:
        raise FeedRefused(
            "unsupported_contract",
            f"page contract is {raw.get('contract')!r:.40}, expected {CONTRACT}",
            hint="re-snapshot from a State Hub serving statehub.inbox-feed.v1",
        )
    instance, epoch = raw.get("source_instance"), raw.get("source_epoch")
    if not isinstance(instance, str) or not instance:
        raise _malformed("page has no source_instance")
    if epoch is not None and not isinstance(epoch, str):
        raise _malformed("page source_epoch is not a string")
    try:
        source_time = parse_timestamp(canonical_timestamp(raw.get("source_time"), "source_time"))
    except MalformedRow as exc:
        raise _malformed(str(exc)) from None
    changes_raw = raw.get("changes")
    if not isinstance(changes_raw, list) or not isinstance(raw.get("has_more"), bool):
        raise _malformed("page has no changes list or has_more flag")
    changes = [_change(c, i) for i, c in enumerate(changes_raw)]
    for before, after in itertools.pairwise(changes):
        if after.revision < before.revision:
            raise FeedRefused(
                "out_of_order_page",
                f"changes are not in revision order ({before.revision} then {after.revision})",
                rows=[after.key],
                hint=RESNAPSHOT_HINT,
            )
    high_water = decode_cursor(raw.get("high_water"), "high_water")
    next_cursor = decode_cursor(raw.get("next_cursor"), "next_cursor")
    if changes and next_cursor < changes[-1].revision:
        raise _malformed(f"next_cursor v1:{next_cursor} is below the page's last change")
    if next_cursor > high_water:
        raise _malformed(f"next_cursor v1:{next_cursor} is above high_water v1:{high_water}")
    return FeedPage(
        source_instance=instance,
        source_epoch=epoch,
        source_time=source_time,
        high_water=high_water,
        next_cursor=next_cursor,
        has_more=bool(raw["has_more"]),
        changes=changes,
    )
