"""Capture a State Hub inbox from a running State Hub's `GET /messages/feed/snapshot`
(contract `statehub.inbox-feed.v1`): one pinned image, whole or in pages, straight into a
bundle file. Produces the same bundle as the database capture in `capture`.
"""

from __future__ import annotations

import itertools
import tempfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx

from agenthub.clock import Clock
from agenthub.contracts.inbox_feed import CONTRACT
from agenthub.hubcore.bundlefile import BundleWriter, Layout, read_bundle
from agenthub.hubcore.canonical import (
    MESSAGE_ROW_FIELDS,
    RECEIPT_ROW_FIELDS,
    TOMBSTONE_ROW_FIELDS,
    MalformedRow,
    Row,
    canonical_timestamp,
    normalize_message,
    normalize_receipt,
    normalize_tombstone,
)
from agenthub.hubcore.capture import Progress
from agenthub.hubcore.errors import CaptureFailed

SNAPSHOT_PATH = "/messages/feed/snapshot"


def _pick(row: Any, fields: tuple[str, ...], what: str, position: int) -> dict[str, Any]:
    if not isinstance(row, Mapping):
        raise CaptureFailed(f"{what} #{position} in the feed snapshot is not an object")
    missing = [f for f in fields if f not in row]
    if missing:
        raise CaptureFailed(
            f"{what} {row.get('id') or row.get('message_id') or f'#{position}'} in the feed "
            f"snapshot lacks {', '.join(missing)}",
            hint=f"State Hub must serve contract {CONTRACT}; check its version",
        )
    # Additive fields do not bump the contract version; the bundle keeps only ours.
    return {f: row[f] for f in fields}


def _normalized(
    rows: list[dict[str, Any]], normalize: Callable[[Any], Row], what: str
) -> list[Row]:
    out: list[Row] = []
    for row in rows:
        try:
            out.append(normalize(row))
        except MalformedRow as exc:
            raise CaptureFailed(
                f"{what} {row.get('id') or row.get('message_id')} in the feed snapshot is "
                f"unreadable ({exc})",
                hint="report it against State Hub's feed; do not edit the bundle",
            ) from None
    return out


def _get_json(http: httpx.Client, url: str, params: dict[str, Any]) -> Mapping[str, Any]:
    try:
        response = http.get(url, params=params, headers={"Accept": "application/json"})
    except httpx.HTTPError as exc:
        raise CaptureFailed(
            f"could not reach State Hub at {url}: {type(exc).__name__}",
            hint="check --from-statehub and that State Hub is running",
        ) from None
    if response.status_code != 200:
        raise CaptureFailed(
            f"State Hub answered {response.status_code} for {SNAPSHOT_PATH}",
            hint="State Hub must serve the inbox change feed (contract statehub.inbox-feed.v1); "
            "a paged capture that idled too long must start again",
        )
    try:
        body = response.json()
    except ValueError:
        raise CaptureFailed(f"{SNAPSHOT_PATH} did not return JSON") from None
    if not isinstance(body, Mapping) or body.get("contract") != CONTRACT:
        found = body.get("contract") if isinstance(body, Mapping) else None
        raise CaptureFailed(
            f"feed snapshot contract is {found!r}, expected {CONTRACT!r}",
            hint="this capture speaks only feed contract v1",
        )
    return body


def _feed_rows(
    http: httpx.Client, url: str, page_size: int | None, progress: Progress | None
) -> Iterator[tuple[str, Any, Mapping[str, Any]]]:
    """(part, state, the page it came in) for every row of one pinned image, in the
    order State Hub serves them: a single response, or `?page_size=` pages followed to
    the last (the last page carries the count and hash)."""
    if page_size is None:
        whole = _get_json(http, url, {})
        for part in ("messages", "receipts", "tombstones"):
            if part not in whole:
                raise CaptureFailed(
                    f"feed snapshot lacks {part!r}", hint="check State Hub's version"
                )
            rows = whole[part]
            for state in rows if isinstance(rows, list) else ():
                yield part, state, whole
        return
    page = _get_json(http, url, {"page_size": page_size})
    snapshot_id = page.get("snapshot_id")
    while True:
        if page.get("snapshot_id") != snapshot_id:
            raise CaptureFailed(
                "the paged snapshot changed image between pages",
                hint="capture again; every page must continue one pinned image",
            )
        rows = page.get("rows")
        if not isinstance(rows, list):
            raise CaptureFailed(
                "a snapshot page has no rows list", hint="check State Hub's version"
            )
        for row in rows:
            if isinstance(row, Mapping):
                yield str(row.get("part")), row.get("state"), page
        if progress is not None:
            progress(len(rows))
        token = page.get("next_page")
        if token is None:
            yield "", None, page  # the last page, even when it holds no rows
            return
        page = _get_json(http, url, {"page": token, "page_size": page_size})


FEED_PARTS: dict[str, tuple[tuple[str, ...], Callable[[Any], Row], str]] = {
    "messages": (MESSAGE_ROW_FIELDS, normalize_message, "message"),
    "receipts": (RECEIPT_ROW_FIELDS, normalize_receipt, "receipt"),
    "tombstones": (TOMBSTONE_ROW_FIELDS, normalize_tombstone, "tombstone"),
}


def _bundle_rows(part: str, states: Iterator[Any]) -> Iterator[Row]:
    fields, normalize, what = FEED_PARTS[part]
    for position, state in enumerate(states):
        yield _normalized([_pick(state, fields, what, position)], normalize, what)[0]


def capture_statehub_to_file(
    base_url: str,
    out: Path,
    *,
    clock: Clock,
    captured_by: str,
    client: httpx.Client | None = None,
    timeout: float = 120.0,
    page_size: int | None = None,
    progress: Progress | None = None,
    layout: Layout = "json",
) -> tuple[dict[str, Any], Path]:
    """Fetch `GET /messages/feed/snapshot` (one consistent image) straight into the
    bundle file `out` (v1 unless `layout="jsonl"`), row by row as the pages arrive
    (memory holds one page); the bundle without its rows, and the evidence path. Nothing is left at `out` unless
    the whole capture succeeded.

    With `page_size` the image comes in pages of that many rows (State Hub pins one
    image for the whole walk), so no single response holds the inbox either. State Hub
    serves each part's rows in key order, parts in the bundle's order; a feed that does
    not is refused."""
    url = base_url.rstrip("/") + SNAPSHOT_PATH
    owned = client is None
    http = client or httpx.Client(timeout=timeout)
    pages: list[Mapping[str, Any]] = []  # the first and the latest page

    def rows() -> Iterator[tuple[str, Any]]:
        for part, state, page in _feed_rows(http, url, page_size, progress):
            if not pages:
                pages.append(page)
            pages[1:] = [page]
            if part in FEED_PARTS:
                yield part, state

    try:
        with BundleWriter(out, layout) as writer:
            left = list(FEED_PARTS)
            for part, group in itertools.groupby(rows(), key=lambda item: item[0]):
                if part not in left:
                    raise CaptureFailed(
                        f"the feed snapshot serves {part} rows out of order",
                        hint="report it against State Hub's feed; do not edit the bundle",
                    )
                for earlier in left[: left.index(part)]:
                    writer.part(earlier, iter(()))
                del left[: left.index(part) + 1]
                try:
                    writer.part(part, _bundle_rows(part, (state for _, state in group)))
                except ValueError as exc:
                    raise CaptureFailed(
                        f"the feed snapshot is not in key order ({exc})",
                        hint="report it against State Hub's feed; do not edit the bundle",
                    ) from None
            for part in left:
                writer.part(part, iter(()))
            head, last = pages[0], pages[-1]
            for key in ("source_instance", "source_time", "cursor"):
                if key not in head:
                    raise CaptureFailed(
                        f"feed snapshot lacks {key!r}", hint="check State Hub's version"
                    )
            counted = writer.counts()["messages"]
            if last.get("count") != counted:
                raise CaptureFailed(
                    f"feed snapshot says count {last.get('count')} but holds {counted} messages",
                    hint="the response was truncated; capture again",
                )
            try:
                source_time = canonical_timestamp(head["source_time"], "source_time")
            except MalformedRow as exc:
                raise CaptureFailed(f"feed snapshot source_time is unreadable ({exc})") from None
            source = {
                "instance": head["source_instance"],
                "cursor": head["cursor"],
                "source_time": source_time,
                "captured_by": captured_by,
                "via": "statehub-feed-snapshot",
                "epoch": head.get("source_epoch"),
                "compacted_before": head.get("compacted_before"),
                "feed_content_hash": last.get("content_hash"),
            }
            return writer.finish(source, canonical_timestamp(clock.now(), "captured_at"))
    finally:
        if owned:
            http.close()


def capture_from_statehub(
    base_url: str,
    *,
    clock: Clock,
    captured_by: str,
    client: httpx.Client | None = None,
    timeout: float = 120.0,
    page_size: int | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """`capture_statehub_to_file`, read back whole: the bundle as one v1 object."""
    with tempfile.TemporaryDirectory(prefix="hubcore-capture-") as tmp:
        out = Path(tmp) / "bundle.json"
        capture_statehub_to_file(
            base_url,
            out,
            clock=clock,
            captured_by=captured_by,
            client=client,
            timeout=timeout,
            page_size=page_size,
            progress=progress,
        )
        bundle: dict[str, Any] = read_bundle(out)
        return bundle
