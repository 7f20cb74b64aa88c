"""Reading State Hub's paged feed snapshot as one checked image.

A snapshot is read in one worker thread while its pages are fetched on the event
loop (`run_threaded`), so State Hub serves the next page while this one is
checked. Every page must speak the contract and carry the same head (instance,
epoch, cursor, high water) and snapshot id; its rows are checked, normalized
(`staged_row`) and hashed on the way (`take_rows`), and the last page's `count`
and `content_hash` must match what was read (`read_image`). What is done with
each page's rows (bulk-loaded, or staged) is the caller's `Sink`: putting the
image in is `feed_snapshot`'s.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from agenthub.contracts.inbox_feed import CONTRACT, ContentHasher, canonical_bytes
from agenthub.hubcore.canonical import (
    MalformedRow,
    Row,
    normalize_feed_tombstone,
    normalize_message,
    normalize_receipt,
    normalize_receipt_tombstone,
    receipt_key,
)
from agenthub.hubcore.errors import FeedRefused
from agenthub.hubcore.feedclient import FeedSource
from agenthub.hubcore.feedpage import decode_cursor

T = TypeVar("T")
# A snapshot page by its token (None: the first), fetched on the event loop.
PageFetch = Callable[[str | None], "Future[dict[str, Any]]"]
# A page's rows taken: (part, key, canonical row, its canonical JSON when State
# Hub sent it canonical, else None).
Taken = tuple[str, str, Row, bytes | None]
# What is done with a page's rows: (snapshot id, page, hasher) -> messages taken.
Sink = Callable[[str, dict[str, Any], ContentHasher], int]


def staged_row(part: str, state: Any) -> tuple[str, Row]:
    """The key and canonical row hub-core keeps for one snapshot row."""
    if part == "messages":
        row = normalize_message(state)
        return row["id"], row
    if part == "receipts":
        row = normalize_receipt(state)
        return receipt_key(row), row
    if part == "tombstones":
        row = normalize_feed_tombstone(state)
        return row["message_id"], row
    if part == "receipt_tombstones":
        row = normalize_receipt_tombstone(state)
        return receipt_key(row), row
    raise MalformedRow("part", f"unknown snapshot part {part!r:.30}")


def _malformed(message: str) -> FeedRefused:
    return FeedRefused(
        "malformed_snapshot", message, hint="State Hub must serve statehub.inbox-feed.v1"
    )


HEAD_FIELDS = ("contract", "source_instance", "source_epoch", "source_time", "cursor", "high_water")


def take_rows(
    page: dict[str, Any], hasher: ContentHasher, *, staging: bool = False
) -> tuple[int, list[Taken]]:
    """Check, normalize and hash one page's rows (in order); its messages and rows
    (with their canonical text when `staging` them)."""
    taken: list[Taken] = []
    messages = 0
    for position, item in enumerate(page.get("rows") or []):
        try:
            part, state = item["part"], item["state"]
            key, row = staged_row(part, state)
        except (MalformedRow, KeyError, TypeError, AttributeError) as exc:
            raise _malformed(f"snapshot row #{position}: {exc}") from None
        # One encoding serves the hash and the staged row whenever State Hub sent
        # the row already canonical (it does): encoding each row twice was a
        # fifth of the follower's CPU.
        text = canonical_bytes(state)
        hasher.add_canonical(part, text)
        taken.append((part, key, row, text if staging and row == state else None))
        messages += part == "messages"
    return messages, taken


def read_image(fetch: PageFetch, sink: Sink) -> tuple[dict[str, Any], str]:
    """Every page through `sink`, checked to be one image; the head (envelope +
    cursor) and the snapshot id. Runs in a worker thread."""
    hasher = ContentHasher()
    messages = 0
    head: dict[str, Any] | None = None
    snapshot_id = ""
    page: dict[str, Any] = {}
    pending: Future[dict[str, Any]] | None = fetch(None)
    while pending is not None:
        page = pending.result()
        if page.get("contract") != CONTRACT:
            raise _malformed(f"snapshot contract is {page.get('contract')!r:.40}")
        this_head = {k: page.get(k) for k in HEAD_FIELDS}
        if head is None:
            head, snapshot_id = this_head, str(page.get("snapshot_id") or "")
            if not snapshot_id:
                raise _malformed("snapshot page has no snapshot_id")
        elif this_head != head or page.get("snapshot_id") != snapshot_id:
            raise _malformed("snapshot pages disagree on their image (instance, cursor, id)")
        token = page.get("next_page")
        # State Hub serves the next page while this one is checked and taken.
        pending = fetch(token) if token is not None else None
        try:
            messages += sink(snapshot_id, page, hasher)
        except BaseException:
            if pending is not None:
                pending.cancel()
            raise
    assert head is not None
    digest = hasher.finish()
    if page.get("count") != messages or page.get("content_hash") != digest:
        raise FeedRefused(
            "snapshot_mismatch",
            f"snapshot pages hold {messages} messages hashing to {digest}, but State Hub "
            f"declared {page.get('count')} / {page.get('content_hash')}",
            hint="a page was lost or altered in transit; the follower retries",
        )
    for field in ("cursor", "high_water"):
        decode_cursor(head.get(field), field)
    if not isinstance(head.get("source_instance"), str) or not head["source_instance"]:
        raise _malformed("snapshot has no source_instance")
    return {**head, "content_hash": digest}, snapshot_id


async def run_threaded(source: FeedSource, work: Callable[[PageFetch], T], *, page_size: int) -> T:
    """Run `work` in one worker thread, its pages fetched on this event loop. On
    cancellation the pages in flight are cancelled (the work fails at its wait
    for one, or at its next request) and the work is waited for, so a transaction
    it holds is rolled back before this returns."""
    loop = asyncio.get_running_loop()
    in_flight: set[Future[dict[str, Any]]] = set()
    lock = threading.Lock()  # guards `cancelled` and `in_flight` together
    cancelled = False

    def fetch(token: str | None) -> Future[dict[str, Any]]:
        with lock:
            if cancelled:
                raise asyncio.CancelledError("the snapshot import was cancelled")
            coroutine = source.snapshot_page(page_size=page_size, token=token)
            future = asyncio.run_coroutine_threadsafe(coroutine, loop)
            in_flight.add(future)
        future.add_done_callback(in_flight.discard)
        return future

    task = asyncio.ensure_future(asyncio.to_thread(work, fetch))
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        with lock:
            cancelled = True
            for future in list(in_flight):
                future.cancel()
        await asyncio.gather(task, return_exceptions=True)
        raise
