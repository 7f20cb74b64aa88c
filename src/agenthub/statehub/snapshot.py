"""The feed snapshot (contract §2): one consistent image of the inbox.

Two shapes over the same rows and the same `content_hash`:

* `stream(feed)`: the contract's single response, streamed row by row so the
  server's memory stays bounded whatever the inbox size;
* `PagedSnapshots`: the additive paged form (`?page_size=`). The first call
  pins one image — on PostgreSQL a REPEATABLE READ transaction whose snapshot
  is exported (`pg_export_snapshot`) and imported by every page, on SQLite one
  read transaction held open — and each page continues it by key. The last
  page carries `count` and `content_hash`. A pinned image is released after
  its last page, or when it has been idle for `idle_ttl_s`.
"""

from __future__ import annotations

import base64
import binascii
import json
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, Select, func, select, text, tuple_
from sqlalchemy.orm import Session

from agenthub.contracts.inbox_feed import HASHED_PARTS, ContentHasher
from agenthub.statehub import cursor
from agenthub.statehub.errors import InvalidRequest, ResnapshotConflict
from agenthub.statehub.feed import FeedService
from agenthub.statehub.position import TOMBSTONE_HORIZON
from agenthub.statehub.rows import (
    MESSAGE_COLUMNS,
    MESSAGES,
    RECEIPT_COLUMNS,
    RECEIPT_TOMBSTONE_COLUMNS,
    RECEIPT_TOMBSTONES,
    RECEIPTS,
    TOMBSTONE_COLUMNS,
    TOMBSTONES,
    message_state,
    receipt_state,
    receipt_tombstone_state,
    tombstone_state,
    uuid_text,
    wire_columns,
)

STREAM_BATCH = 2000
MAX_PAGE_SIZE = 10_000


@dataclass(frozen=True)
class Part:
    name: str
    columns: tuple[Any, ...]
    keys: Callable[[Session], tuple[Any, ...]]
    shape: Callable[[Any], dict[str, Any]]
    horizon: Any = None  # the deleted_at column, for parts bounded by the horizon

    def select(self, session: Session, cutoff: Any, after: list[Any] | None = None) -> Select[Any]:
        keys = self.keys(session)
        stmt = select(*wire_columns(session, self.columns)).order_by(*keys)
        if self.horizon is not None:
            stmt = stmt.where(self.horizon >= cutoff)
        if after is not None:
            stmt = stmt.where(tuple_(*keys) > tuple_(*after))
        return stmt


def _c(session: Session, column: Any) -> Any:
    # Byte order on PostgreSQL too, so the hash order matches SQLite's.
    if session.get_bind().dialect.name == "postgresql":
        return column.collate("C")
    return column


PARTS = (
    Part("messages", MESSAGE_COLUMNS, lambda s: (MESSAGES.id,), message_state),
    Part(
        "receipts",
        RECEIPT_COLUMNS,
        lambda s: (RECEIPTS.message_id, _c(s, RECEIPTS.agent)),
        receipt_state,
    ),
    Part(
        "tombstones",
        TOMBSTONE_COLUMNS,
        lambda s: (TOMBSTONES.message_id,),
        tombstone_state,
        TOMBSTONES.deleted_at,
    ),
    Part(
        "receipt_tombstones",
        RECEIPT_TOMBSTONE_COLUMNS,
        lambda s: (RECEIPT_TOMBSTONES.message_id, _c(s, RECEIPT_TOMBSTONES.agent)),
        receipt_tombstone_state,
        RECEIPT_TOMBSTONES.deleted_at,
    ),
)


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def stream(feed: FeedService) -> Iterator[bytes]:
    """The whole image as JSON; `count` and `content_hash` come last because they
    are known only once every row has passed."""
    feed.check_restore()
    with feed.db.snapshot() as session:
        pos = feed.read_position(session)
        feed.record_served(pos)
        head = {**pos.envelope(), "cursor": cursor.encode(pos.high_water)}
        yield _dumps(head)[:-1].encode()
        hasher = ContentHasher()
        count = 0
        cutoff = feed.clock.now() - TOMBSTONE_HORIZON
        for part in PARTS:
            hashed = part.name in HASHED_PARTS
            yield f',"{part.name}":['.encode()
            first = True
            stmt = part.select(session, cutoff).execution_options(yield_per=STREAM_BATCH)
            for chunk in session.execute(stmt).partitions():
                out: list[str] = []
                for row in chunk:
                    state = part.shape(row)
                    if hashed:
                        hasher.add(part.name, state)
                    out.append(_dumps(state))
                if part.name == "messages":
                    count += len(chunk)
                if out:
                    yield (("" if first else ",") + ",".join(out)).encode()
                    first = False
            yield b"]"
        yield f',"count":{count},"content_hash":"{hasher.finish()}"}}'.encode()


def image(feed: FeedService) -> dict[str, Any]:
    """The snapshot as one object (tests and in-process callers)."""
    result: dict[str, Any] = json.loads(b"".join(stream(feed)))
    return result


def image_hash(session: Session, cutoff: Any) -> tuple[int, str]:
    """`count` and `content_hash` of the image `session` sees, in bounded memory."""
    hasher = ContentHasher()
    for part in PARTS:
        if part.name not in HASHED_PARTS:
            continue
        stmt = part.select(session, cutoff).execution_options(yield_per=STREAM_BATCH)
        for row in session.execute(stmt):
            hasher.add(part.name, part.shape(row))
    count = int(session.execute(select(func.count(MESSAGES.id))).scalar_one())
    return count, hasher.finish()


@dataclass
class _Pinned:
    id: str
    connection: Connection
    session: Session
    export_id: str | None
    head: dict[str, Any]
    cutoff: Any
    last_used: float
    lock: threading.Lock = field(default_factory=threading.Lock)
    # Hashed on the way while pages are taken in order: the token the next page must
    # come with, and the hash and message count so far. Any other request (a retry, a
    # page taken twice or concurrently) drops the running hash, and the last page
    # hashes the pinned image again instead.
    hasher: ContentHasher | None = field(default_factory=ContentHasher)
    messages: int = 0
    expect: str | None = None
    hash_lock: threading.Lock = field(default_factory=threading.Lock)

    def claim(self, token: str | None) -> bool:
        """Whether the page after `token` continues the running hash (and claim it)."""
        with self.hash_lock:
            continuing = self.hasher is not None and token == self.expect
            if not continuing:
                self.hasher = None
            self.expect = None  # a second request for this page will not continue it
            return continuing

    def extend(self, rows: list[dict[str, Any]], next_token: str | None) -> None:
        with self.hash_lock:
            if self.hasher is None:
                return
            for row in rows:
                self.hasher.add(row["part"], row["state"])
                self.messages += row["part"] == "messages"
            self.expect = next_token


class PagedSnapshots:
    def __init__(self, feed: FeedService, *, idle_ttl_s: float = 600.0, max_open: int = 16) -> None:
        self.feed = feed
        self.idle_ttl_s = idle_ttl_s
        self.max_open = max_open
        self._pinned: dict[str, _Pinned] = {}
        self._lock = threading.Lock()

    # -- public ---------------------------------------------------------------

    def first_page(self, page_size: int) -> dict[str, Any]:
        _check_size(page_size)
        self.reap()
        pinned = self._pin()
        try:
            return self._page(pinned, None, 0, None, page_size)
        except BaseException:
            self._release(pinned.id)
            raise

    def next_page(self, token: str, page_size: int) -> dict[str, Any]:
        _check_size(page_size)
        self.reap()
        snapshot_id, part_index, after = _decode_token(token)
        with self._lock:
            pinned = self._pinned.get(snapshot_id)
        if pinned is None:
            raise ResnapshotConflict(
                "this paged snapshot is no longer held (finished, idle too long, or served "
                "by another State Hub process)",
                hint="start again with GET /messages/feed/snapshot?page_size=N",
            )
        return self._page(pinned, token, part_index, after, page_size)

    def reap(self) -> None:
        now = self.feed.clock.monotonic()
        with self._lock:
            stale = [p.id for p in self._pinned.values() if now - p.last_used > self.idle_ttl_s]
        for snapshot_id in stale:
            self._release(snapshot_id)

    def close_all(self) -> None:
        with self._lock:
            ids = list(self._pinned)
        for snapshot_id in ids:
            self._release(snapshot_id)

    @property
    def open_count(self) -> int:
        return len(self._pinned)

    # -- internals --------------------------------------------------------------

    def _pin(self) -> _Pinned:
        with self._lock:
            if len(self._pinned) >= self.max_open:
                raise InvalidRequest(
                    f"{self.max_open} paged snapshots are already open",
                    hint="finish or abandon one (they expire when idle), or use the single-response snapshot",
                )
        feed = self.feed
        feed.check_restore()
        connection = feed.db.engine.connect()
        if not feed.db.sqlite:
            connection.execution_options(
                isolation_level="REPEATABLE READ", postgresql_readonly=True
            )
        session = Session(bind=connection, expire_on_commit=False)
        session.begin()
        try:
            export_id = None
            if not feed.db.sqlite:
                export_id = str(session.execute(text("SELECT pg_export_snapshot()")).scalar_one())
            pos = feed.read_position(session)
            feed.record_served(pos)
            head = {**pos.envelope(), "cursor": cursor.encode(pos.high_water)}
        except BaseException:
            session.close()
            connection.close()
            raise
        pinned = _Pinned(
            id=uuid.uuid4().hex,
            connection=connection,
            session=session,
            export_id=export_id,
            head=head,
            cutoff=feed.clock.now() - TOMBSTONE_HORIZON,
            last_used=feed.clock.monotonic(),
        )
        with self._lock:
            self._pinned[pinned.id] = pinned
        return pinned

    def _page(
        self,
        pinned: _Pinned,
        token: str | None,
        part_index: int,
        after: list[Any] | None,
        page_size: int,
    ) -> dict[str, Any]:
        continuing = pinned.claim(token)
        with self._reader(pinned) as session:
            rows: list[dict[str, Any]] = []
            index, key = part_index, after
            while index < len(PARTS) and len(rows) < page_size:
                part = PARTS[index]
                want = page_size - len(rows)
                fetched = session.execute(
                    part.select(session, pinned.cutoff, key).limit(want)
                ).all()
                rows.extend({"part": part.name, "state": part.shape(row)} for row in fetched)
                if len(fetched) < want:
                    index, key = index + 1, None
                else:
                    key = _key_of(part, fetched[-1])
            body: dict[str, Any] = {**pinned.head, "snapshot_id": pinned.id, "rows": rows}
            done = index >= len(PARTS)
            body["next_page"] = None if done else _encode_token(pinned.id, index, key)
            if continuing:
                pinned.extend(rows, body["next_page"])
            if done:
                hasher = pinned.hasher if continuing else None
                if hasher is not None:
                    body["count"], body["content_hash"] = pinned.messages, hasher.finish()
                else:
                    body["count"], body["content_hash"] = image_hash(session, pinned.cutoff)
        pinned.last_used = self.feed.clock.monotonic()
        if body["next_page"] is None:
            self._release(pinned.id)
        return body

    def _reader(self, pinned: _Pinned) -> Any:
        """PostgreSQL: a fresh transaction importing the exported snapshot (the
        pinned one only holds it). SQLite: the pinned read transaction itself."""
        feed = self.feed

        class _Held:
            def __enter__(self) -> Session:
                pinned.lock.acquire()
                return pinned.session

            def __exit__(self, *exc: object) -> None:
                pinned.lock.release()

        if feed.db.sqlite:
            return _Held()

        class _Imported:
            def __enter__(self) -> Session:
                self.connection = feed.db.engine.connect()
                self.connection.execution_options(
                    isolation_level="REPEATABLE READ", postgresql_readonly=True
                )
                self.session = Session(bind=self.connection)
                self.session.begin()
                self.session.execute(text(f"SET TRANSACTION SNAPSHOT '{pinned.export_id}'"))
                return self.session

            def __exit__(self, *exc: object) -> None:
                self.session.rollback()
                self.session.close()
                self.connection.close()

        return _Imported()

    def _release(self, snapshot_id: str) -> None:
        with self._lock:
            pinned = self._pinned.pop(snapshot_id, None)
        if pinned is None:
            return
        with pinned.lock:
            pinned.session.rollback()
            pinned.session.close()
            pinned.connection.close()


def _key_of(part: Part, row: Any) -> list[Any]:
    if part.name == "messages":
        return [uuid_text(row.id)]
    if part.name == "tombstones":
        return [uuid_text(row.message_id)]
    return [uuid_text(row.message_id), row.agent]


def _encode_token(snapshot_id: str, part_index: int, key: list[Any] | None) -> str:
    raw = _dumps({"s": snapshot_id, "p": part_index, "k": key})
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _decode_token(token: str) -> tuple[str, int, list[Any] | None]:
    try:
        padded = token + "=" * (-len(token) % 4)
        data = json.loads(base64.urlsafe_b64decode(padded.encode()))
        snapshot_id, part_index, key = str(data["s"]), int(data["p"]), data["k"]
        if not 0 <= part_index < len(PARTS) or not (key is None or isinstance(key, list)):
            raise ValueError("out of range")
        if key:  # every part's key starts with a message id
            key = [uuid.UUID(key[0]), *key[1:]]
    except (ValueError, KeyError, TypeError, binascii.Error) as exc:
        raise InvalidRequest(
            "malformed snapshot page token",
            hint="pass next_page exactly as the previous page returned it",
        ) from exc
    return snapshot_id, part_index, key


def _check_size(page_size: int) -> None:
    if not 1 <= page_size <= MAX_PAGE_SIZE:
        raise InvalidRequest(
            f"page_size {page_size} is out of range", hint=f"use 1..{MAX_PAGE_SIZE}"
        )
