"""Capture a State Hub inbox into a snapshot bundle, read-only, in one consistent view.

Two sources: a State Hub database (one REPEATABLE READ READ ONLY transaction on
PostgreSQL, one WAL read transaction with `query_only` on SQLite), or a running
State Hub's `GET /messages/feed/snapshot` (contract `statehub.inbox-feed.v1`).
Both produce the same bundle; neither can write to State Hub.
"""

from __future__ import annotations

import itertools
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import Connection, inspect, text

from agenthub.clock import Clock
from agenthub.contracts.inbox_feed import CONTRACT, encode_cursor
from agenthub.db import make_engine
from agenthub.hubcore.bundle_rules import SCHEMA
from agenthub.hubcore.bundlefile import BundleWriter, read_bundle
from agenthub.hubcore.canonical import (
    MESSAGE_ROW_FIELDS,
    RECEIPT_ROW_FIELDS,
    TOMBSTONE_ROW_FIELDS,
    MalformedRow,
    Row,
    canonical_timestamp,
    hash_normalized,
    normalize_message,
    normalize_receipt,
    normalize_tombstone,
    receipt_key,
)
from agenthub.hubcore.errors import CaptureFailed

SNAPSHOT_PATH = "/messages/feed/snapshot"
FETCH_BATCH = 5_000
# Without a revision column one capture is one revision: every row gets this.
CAPTURE_WIDE_REVISION = 0

Progress = Callable[[int], None]


def build_bundle(
    *,
    source: dict[str, Any],
    captured_at: datetime,
    messages: list[Row],
    receipts: list[Row],
    tombstones: list[Row],
) -> dict[str, Any]:
    """The v1 bundle for rows already in canonical form."""
    return {
        "schema": SCHEMA,
        "source": source,
        "captured_at": canonical_timestamp(captured_at, "captured_at"),
        "messages": sorted(messages, key=lambda r: str(r["id"])),
        "count": len(messages),
        "content_hash": hash_normalized(messages, lambda r: str(r["id"])),
        "receipts": sorted(receipts, key=receipt_key),
        "receipts_count": len(receipts),
        "receipts_hash": hash_normalized(receipts, receipt_key),
        "tombstones": sorted(tombstones, key=lambda r: str(r["message_id"])),
        "tombstones_count": len(tombstones),
        "tombstones_hash": hash_normalized(tombstones, lambda r: str(r["message_id"])),
    }


# -- from a State Hub database ------------------------------------------------------------


def _columns(conn: Connection, table: str) -> set[str]:
    return {c["name"] for c in inspect(conn).get_columns(table)}


def _rows(
    conn: Connection, sql: str, normalize: Callable[[Any], Row], progress: Progress | None
) -> Iterator[Row]:
    result = conn.execution_options(yield_per=FETCH_BATCH).execute(text(sql))
    names = tuple(result.keys())
    for partition in result.partitions(FETCH_BATCH):
        for values in partition:
            raw = dict(zip(names, values, strict=True))  # plain tuples: no RowMapping per row
            try:
                yield normalize(raw)
            except MalformedRow as exc:
                raise CaptureFailed(
                    f"source row {raw.get('id') or raw.get('message_id')} is unreadable ({exc})",
                    hint="the source database holds a value State Hub would never write; "
                    "fix it at the source before capturing",
                ) from None
        if progress is not None:
            progress(len(partition))


def _select(
    conn: Connection, table: str, fields: tuple[str, ...], has_revision: bool, key: str
) -> str:
    """Every row of `table`, in the bundle's key order (so a file is written as it is read:
    ids sort as their canonical text on both databases, agents by code point)."""
    wanted = [f for f in fields if f != "revision"]
    revision = "revision" if has_revision else f"{CAPTURE_WIDE_REVISION} AS revision"
    collate = ' COLLATE "C"' if conn.dialect.name == "postgresql" else ""
    order = ", ".join(f"{k}{collate if k == 'agent' else ''}" for k in key.split(","))
    return f"SELECT {', '.join(wanted)}, {revision} FROM {table} ORDER BY {order}"


def _begin_consistent_read(conn: Connection) -> None:
    if conn.dialect.name == "postgresql":
        conn.begin()
        conn.exec_driver_sql("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
    else:
        # WAL: the read transaction sees one snapshot from its first read on.
        conn.begin()
        conn.exec_driver_sql("PRAGMA query_only = ON")


def _source_time(conn: Connection, clock: Clock) -> datetime:
    if conn.dialect.name == "postgresql":
        value: object = conn.execute(text("SELECT now()")).scalar_one()
        assert isinstance(value, datetime)
        return value
    return clock.now()


def _stored_instance(conn: Connection, tables: set[str]) -> str | None:
    if "statehub_meta" not in tables:
        return None
    # The label in force at State Hub's last start (STATEHUB_INSTANCE_LABEL included) wins
    # over the generated one; databases from before it was recorded have only the latter.
    rows: dict[str, str] = dict(
        conn.execute(
            text(
                "SELECT key, value FROM statehub_meta "
                "WHERE key IN ('instance_label_in_force', 'instance_label')"
            )
        ).all()
    )
    value = rows.get("instance_label_in_force") or rows.get("instance_label")
    return str(value) if value else None


@dataclass
class _View:
    """One consistent read of a State Hub database: its facts, and its rows part by part."""

    conn: Connection
    instance: str
    source_time: datetime
    tables: set[str]
    revision_columns: tuple[bool, bool]
    progress: Progress | None

    def parts(self) -> Iterator[tuple[str, Iterator[Row]]]:
        """(part, rows in key order) for messages, receipts and tombstones, in that order."""
        message_revision, receipt_revision = self.revision_columns
        yield (
            "messages",
            _rows(
                self.conn,
                _select(self.conn, "agent_messages", MESSAGE_ROW_FIELDS, message_revision, "id"),
                normalize_message,
                self.progress,
            ),
        )
        yield (
            "receipts",
            _rows(
                self.conn,
                _select(
                    self.conn,
                    "message_receipts",
                    RECEIPT_ROW_FIELDS,
                    receipt_revision,
                    "message_id,agent",
                ),
                normalize_receipt,
                self.progress,
            ),
        )
        tombstones: Iterator[Row] = iter(())
        if "message_tombstones" in self.tables:
            sql = _select(self.conn, "message_tombstones", TOMBSTONE_ROW_FIELDS, True, "message_id")
            tombstones = _rows(self.conn, sql, normalize_tombstone, None)
        yield "tombstones", tombstones

    def source(self, captured_by: str, high_water: int) -> dict[str, Any]:
        return {
            "instance": self.instance,
            "cursor": encode_cursor(high_water),
            "source_time": canonical_timestamp(self.source_time, "source_time"),
            "captured_by": captured_by,
            "via": "source-db",
            "database": self.conn.dialect.name,
            "revision_column": all(self.revision_columns),
        }


@contextmanager
def _database_view(
    url: str, *, clock: Clock, source_instance: str | None, progress: Progress | None
) -> Iterator[_View]:
    """Open one read-only consistent view of a State Hub database; any failure inside
    becomes `CaptureFailed`."""
    try:
        engine = make_engine(url)
    except ValueError as exc:
        raise CaptureFailed(
            str(exc), hint="pass --source-db postgresql://… or sqlite:///…"
        ) from None
    try:
        with engine.connect() as conn:
            _begin_consistent_read(conn)
            tables = set(inspect(conn).get_table_names())
            if "agent_messages" not in tables or "message_receipts" not in tables:
                raise CaptureFailed(
                    "the source database has no State Hub inbox tables",
                    hint="point --source-db at State Hub's database (STATEHUB_DATABASE_URL)",
                )
            revisions = (
                "revision" in _columns(conn, "agent_messages"),
                "revision" in _columns(conn, "message_receipts"),
            )
            instance = source_instance or _stored_instance(conn, tables)
            if not instance:
                raise CaptureFailed(
                    "the source database records no instance label",
                    hint="pass --source-instance with State Hub's STATEHUB_INSTANCE_LABEL",
                )
            yield _View(conn, instance, _source_time(conn, clock), tables, revisions, progress)
            conn.rollback()
    except CaptureFailed:
        raise
    except Exception as exc:
        raise CaptureFailed(
            f"could not read the source database: {type(exc).__name__}: {str(exc)[:300]}",
            hint="check --source-db and that the database is reachable",
        ) from None
    finally:
        engine.dispose()


def capture_from_database(
    url: str,
    *,
    clock: Clock,
    captured_by: str,
    source_instance: str | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Read every message, receipt and tombstone of a State Hub database in one view."""
    with _database_view(
        url, clock=clock, source_instance=source_instance, progress=progress
    ) as view:
        rows = {part: list(part_rows) for part, part_rows in view.parts()}
        high_water = max(
            (r["revision"] for part_rows in rows.values() for r in part_rows),
            default=CAPTURE_WIDE_REVISION,
        )
        source = view.source(captured_by, high_water)
    return build_bundle(
        source=source,
        captured_at=clock.now(),
        messages=rows["messages"],
        receipts=rows["receipts"],
        tombstones=rows["tombstones"],
    )


def capture_database_to_file(
    url: str,
    out: Path,
    *,
    clock: Clock,
    captured_by: str,
    source_instance: str | None = None,
    progress: Progress | None = None,
) -> tuple[dict[str, Any], Path]:
    """`capture_from_database` written straight to the bundle file `out` as the rows are
    read (memory does not grow with the inbox); the bundle without its rows, and the
    evidence path. Nothing is left at `out` unless the whole capture succeeded."""
    with (
        _database_view(
            url, clock=clock, source_instance=source_instance, progress=progress
        ) as view,
        BundleWriter(out) as writer,
    ):
        for part, part_rows in view.parts():
            writer.part(part, part_rows)
        source = view.source(captured_by, writer.high_water(CAPTURE_WIDE_REVISION))
        return writer.finish(source, canonical_timestamp(clock.now(), "captured_at"))


# -- from State Hub's feed snapshot -----------------------------------------------------


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
) -> tuple[dict[str, Any], Path]:
    """Fetch `GET /messages/feed/snapshot` (one consistent image) straight into the
    bundle file `out`, row by row as the pages arrive (memory holds one page); the
    bundle without its rows, and the evidence path. Nothing is left at `out` unless
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
        with BundleWriter(out) as writer:
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
        out = Path(tmp) / "bundle.jsonl"
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
