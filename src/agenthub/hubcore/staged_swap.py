"""The swap of a staged snapshot image into the projection tables, in SQL.

Each staged row (`staged_snapshot_rows`) holds its canonical JSON, checked by the
`normalize_*` functions on the way in; the swap extracts the columns in the database,
one INSERT … SELECT per part, inside the importer's transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from operator import itemgetter
from typing import Any

from sqlalchemy import text
from sqlalchemy.orm import Session

from agenthub.hubcore import bulkload
from agenthub.hubcore.canonical import Row
from agenthub.hubcore.models import (
    ProjectedMessage,
    ProjectedReceipt,
    ProjectedReceiptTombstone,
    ProjectedTombstone,
)

LOAD_BATCH = 5_000
STAGED_COLUMNS = ("snapshot_id", "part", "key", "revision", "state")
UUID, TIME, TEXT, INT = "uuid", "timestamptz", "text", "bigint"
# part -> (target table, [(target column, field of the canonical row, kind)])
SWAP_TARGETS: dict[str, tuple[str, tuple[tuple[str, str, str], ...]]] = {
    "messages": (
        ProjectedMessage.__tablename__,
        (
            ("id", "id", UUID),
            ("from_agent", "from_agent", TEXT),
            ("to_agent", "to_agent", TEXT),
            ("subject", "subject", TEXT),
            ("body", "body", TEXT),
            ("thread_id", "thread_id", UUID),
            ("read_at", "read_at", TIME),
            ("archived_at", "archived_at", TIME),
            ("kind", "kind", TEXT),
            ("expires_at", "expires_at", TIME),
            ("supersedes_id", "supersedes_id", UUID),
            ("created_at", "created_at", TIME),
            ("source_revision", "revision", INT),
        ),
    ),
    "receipts": (
        ProjectedReceipt.__tablename__,
        (
            ("message_id", "message_id", UUID),
            ("agent", "agent", TEXT),
            ("delivered_at", "delivered_at", TIME),
            ("read_at", "read_at", TIME),
            ("acknowledged_at", "acknowledged_at", TIME),
            ("source_revision", "revision", INT),
        ),
    ),
    "tombstones": (
        ProjectedTombstone.__tablename__,
        (
            ("message_id", "message_id", UUID),
            ("revision", "revision", INT),
            ("deleted_at", "deleted_at", TIME),
        ),
    ),
    "receipt_tombstones": (
        ProjectedReceiptTombstone.__tablename__,
        (
            ("message_id", "message_id", UUID),
            ("agent", "agent", TEXT),
            ("revision", "revision", INT),
            ("deleted_at", "deleted_at", TIME),
        ),
    ),
}


def _sqlite_value(value: str, kind: str) -> str:
    """SQL for the stored form SQLAlchemy writes on SQLite of `value` (SQL giving
    canonical text or NULL): 32 hex digits for a UUID, "YYYY-MM-DD HH:MM:SS.ffffff"
    (naive UTC) for a timestamp. Used by the swap on a staged row's JSON and by a bulk
    load on its bound values (SQLite converts in C what Python did value by value)."""
    if kind == UUID:
        return f"replace({value}, '-', '')"
    if kind == TIME:  # canonical "YYYY-MM-DDTHH:MM:SS.ffffffZ"; NULL stays NULL
        return f"substr({value}, 1, 10) || ' ' || substr({value}, 12, 15)"
    return value


def swap_sql(dialect: str, part: str) -> str:
    """INSERT … SELECT moving one part's staged rows into its projection table."""
    table, columns = SWAP_TARGETS[part]
    names = ", ".join(column for column, _, _ in columns)
    where = "snapshot_id = :snapshot_id AND part = :part"
    if dialect == "postgresql":
        fields = ", ".join(f"r.{field}" for _, field, _ in columns)
        record = ", ".join(f"{field} {kind}" for _, field, kind in columns)
        return (
            f"INSERT INTO {table} ({names}) SELECT {fields} "
            f"FROM staged_snapshot_rows s, json_to_record(s.state::json) AS r({record}) "
            f"WHERE s.{where.replace(' AND part', ' AND s.part')}"
        )
    values = ", ".join(
        _sqlite_value(f"json_extract(state, '$.{field}')", kind) for _, field, kind in columns
    )
    return f"INSERT INTO {table} ({names}) SELECT {values} FROM staged_snapshot_rows WHERE {where}"


# The tables a swap fills whole, whose secondary indexes SQLite builds after it.
REBUILT_TABLES = (ProjectedMessage.__tablename__, ProjectedReceipt.__tablename__)


@contextmanager
def indexes_built_after(session: Session) -> Iterator[None]:
    """On SQLite, the swap's tables lose their secondary indexes for the block and get
    them back, as the database defined them, at its end, all in the caller's transaction:
    one sorted build per index instead of an update per row at a random key, which was
    most of a large swap. WAL readers see the old rows and schema until the commit, and
    a failure rolls the schema back with the rows. PostgreSQL keeps its indexes: dropping
    one would lock readers out until the commit."""
    if session.get_bind().dialect.name != "sqlite":
        yield
        return
    tables = ", ".join(f"'{t}'" for t in REBUILT_TABLES)
    indexes: list[tuple[str, str]] = [
        (str(name), str(sql))
        for name, sql in session.execute(
            text(
                "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL "
                f"AND tbl_name IN ({tables}) ORDER BY name"
            )
        )
    ]
    for name, _ in indexes:
        session.execute(text(f'DROP INDEX "{name}"'))
    yield
    for _, sql in indexes:
        session.execute(text(sql))


def swap_in(session: Session, snapshot_id: str, part: str) -> int:
    """Insert one part of the staged image; how many rows it held."""
    sql = swap_sql(session.get_bind().dialect.name, part)
    result = session.execute(text(sql), {"snapshot_id": snapshot_id, "part": part})
    return int(result.rowcount)  # type: ignore[attr-defined]


def stored_values(
    dialect: str, part: str
) -> tuple[str, tuple[str, ...], Callable[[Row], Sequence[Any]], tuple[str, ...] | None]:
    """(table, columns, row -> the values bound, the SQL each value is stored by) for one
    part's canonical rows: what `swap_sql` extracts from a staged row, for a bulk load
    straight into the projection. `COPY` parses canonical text itself (None: no SQL);
    SQLite converts it to SQLAlchemy's forms in the INSERT (`_sqlite_value`)."""
    table, columns = SWAP_TARGETS[part]
    names = tuple(column for column, _, _ in columns)
    # C-level: a row to its tuple of fields (every part has three or more).
    pick = itemgetter(*(field for _, field, _ in columns))
    if dialect == "postgresql":
        return table, names, pick, None
    stored = tuple(_sqlite_value(f"?{i}", kind) for i, (_, _, kind) in enumerate(columns, 1))
    return table, names, pick, stored


class ProjectionLoader:
    """Canonical rows bulk-loaded into their projection tables, batch by batch, inside
    the session's transaction; rows of one part arrive together."""

    def __init__(self, session: Session, progress: Callable[[int], None] | None = None) -> None:
        self.session = session
        self.progress = progress
        self.dialect = session.get_bind().dialect.name
        self.part: str | None = None
        self.batch: list[Sequence[Any]] = []
        self.table = ""
        self.columns: tuple[str, ...] = ()
        self.values: Callable[[Row], Sequence[Any]] = lambda row: ()
        self.stored: tuple[str, ...] | None = None
        self.loaded = dict.fromkeys(SWAP_TARGETS, 0)

    def add(self, part: str, row: Row) -> None:
        if part != self.part:
            self.flush()
            self.part = part
            self.table, self.columns, self.values, self.stored = stored_values(self.dialect, part)
        self.batch.append(self.values(row))
        self.loaded[part] += 1
        if len(self.batch) >= LOAD_BATCH:
            self.flush()

    def flush(self) -> None:
        if self.batch:
            bulkload.load(
                self.session, self.table, self.columns, self.batch, placeholders=self.stored
            )
            if self.progress is not None:
                self.progress(len(self.batch))
            self.batch = []
