"""Capture a State Hub inbox into a snapshot bundle, read-only, in one consistent view.

Two sources: a State Hub database (here: one REPEATABLE READ READ ONLY transaction on
PostgreSQL, one WAL read transaction with `query_only` on SQLite), or a running
State Hub's `GET /messages/feed/snapshot` (contract `statehub.inbox-feed.v1`, in
`capture_feed`). Both produce the same bundle; neither can write to State Hub. A
bundle file is v1 (the seed's one JSON object) unless `layout="jsonl"` asks for v2.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, inspect, text

from agenthub.clock import Clock
from agenthub.contracts.inbox_feed import encode_cursor
from agenthub.db import make_engine
from agenthub.hubcore.bundle_rules import SCHEMA
from agenthub.hubcore.bundlefile import BundleWriter, Layout
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
            tombstones = _rows(self.conn, sql, normalize_tombstone, self.progress)
        yield "tombstones", tombstones

    def total(self) -> int:
        """How many rows `parts` yields (read in the same consistent view)."""
        tables = ["agent_messages", "message_receipts"]
        if "message_tombstones" in self.tables:
            tables.append("message_tombstones")
        counts = " + ".join(f"(SELECT count(*) FROM {table})" for table in tables)
        return int(self.conn.execute(text(f"SELECT {counts}")).scalar_one())

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
    layout: Layout = "json",
    expect: Progress | None = None,
) -> tuple[dict[str, Any], Path]:
    """`capture_from_database` written straight to the bundle file `out` as the rows are
    read (memory does not grow with the inbox), v1 unless `layout="jsonl"`; the bundle
    without its rows, and the evidence path. Nothing is left at `out` unless the whole
    capture succeeded. `expect` is told how many rows the view holds before they are
    read (the total of the rows `progress` is told of)."""
    with (
        _database_view(
            url, clock=clock, source_instance=source_instance, progress=progress
        ) as view,
        BundleWriter(out, layout) as writer,
    ):
        if expect is not None:
            expect(view.total())
        for part, part_rows in view.parts():
            writer.part(part, part_rows)
        source = view.source(captured_by, writer.high_water(CAPTURE_WIDE_REVISION))
        return writer.finish(source, canonical_timestamp(clock.now(), "captured_at"))
