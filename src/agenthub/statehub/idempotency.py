"""`Idempotency-Key` on State Hub POSTs: the same key and request within 24 h get the
first answer back; the same key with another request is refused.

A key is claimed by inserting its row inside the very transaction of the write it guards
(`claim_in_transaction`, a `Database.before_write` hook), so the write and the claim
commit or vanish together: a repeat can never apply the write twice, even when the first
answer was lost with its connection.

The answer commits with the write too: before the commit, the write reports what it made
(`Database.made`) and the API stores the answer it will give for it in the claimed row
(`store_answer`). A process killed between the commit and the response therefore loses
no answer: a retry gets the first one, byte for byte, and the resource as it was
answered, not as it is now (a message read or archived since is replayed unread). The
answer can be written before the commit because no POST answer carries a feed revision
(the one value fixed only at commit, migration 0004). After the response,
`record_answer` stores the answer actually sent only when it differs from the stored one
(a write that reported nothing; a stored answer unlike the one sent is a defect, logged).
A repeat that finds a committed row without an answer waits for it, then says
`idempotency_answer_lost`: only a key claimed by a State Hub older than this module
(within its 24 h), or by a POST whose write reports nothing (none does), can give it.
"""

from __future__ import annotations

import contextvars
import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Engine, delete, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from agenthub.statehub.models import IdempotencyRecord

KEEP_FOR = timedelta(hours=24)
MAX_KEY_LENGTH = 255


class KeyTaken(Exception):
    """Another request claimed the key first (a concurrent duplicate)."""


@dataclass(frozen=True)
class Answer:
    status: int
    content_type: str
    body: bytes


@dataclass
class Claim:
    """The key this request will claim with its first write, once that write runs, and
    the answer stored with that write (not yet committed while the write runs)."""

    key: str
    fingerprint: str
    now: datetime
    inserted: bool = False
    answer: Answer | None = None


@dataclass(frozen=True)
class Stored:
    fingerprint: str
    created_at: datetime
    status_code: int | None
    content_type: str | None
    body: bytes | None


CURRENT: contextvars.ContextVar[Claim | None] = contextvars.ContextVar(
    "statehub_idempotency_claim", default=None
)


def is_valid_key(key: str) -> bool:
    return 0 < len(key) <= MAX_KEY_LENGTH and key.isascii() and key.isprintable()


def fingerprint(method: str, path: str, query: bytes, body: bytes) -> str:
    """What makes two requests "the same": method, path, query string and body bytes."""
    digest = hashlib.sha256()
    for part in (method.encode(), path.encode(), query, body):
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    return digest.hexdigest()


def claim_pending() -> bool:
    """This request carries a key not yet claimed: its write needs a real transaction."""
    claim = CURRENT.get()
    return claim is not None and not claim.inserted


def claim_in_transaction(session: Session) -> None:
    """Insert this request's key in the write transaction now opening, once per request."""
    claim = CURRENT.get()
    if claim is None or claim.inserted:
        return
    try:
        session.execute(
            insert(IdempotencyRecord).values(
                key=claim.key, fingerprint=claim.fingerprint, created_at=claim.now
            )
        )
    except IntegrityError:
        raise KeyTaken(claim.key) from None
    claim.inserted = True


def claim_inserted() -> bool:
    """This request's write transaction holds its claim: an answer can be stored in it."""
    claim = CURRENT.get()
    return claim is not None and claim.inserted


def store_answer(session: Session, answer: Answer) -> None:
    """Store the answer in the claimed row, in the write transaction: it commits with the
    write or not at all. Outside a claim it does nothing."""
    claim = CURRENT.get()
    if claim is None or not claim.inserted:
        return
    session.execute(
        update(IdempotencyRecord)
        .where(IdempotencyRecord.key == claim.key)
        .values(
            status_code=answer.status,
            content_type=answer.content_type,
            response_body=answer.body,
        )
    )
    claim.answer = answer


def lookup(engine: Engine, key: str, now: datetime) -> Stored | None:
    """The live record of `key`; a record older than 24 h is deleted and reads as none."""
    with engine.begin() as conn:
        row = conn.execute(
            select(
                IdempotencyRecord.fingerprint,
                IdempotencyRecord.created_at,
                IdempotencyRecord.status_code,
                IdempotencyRecord.content_type,
                IdempotencyRecord.response_body,
            ).where(IdempotencyRecord.key == key)
        ).one_or_none()
        if row is None:
            return None
        if row.created_at <= now - KEEP_FOR:
            conn.execute(
                delete(IdempotencyRecord).where(
                    IdempotencyRecord.key == key,
                    IdempotencyRecord.created_at == row.created_at,
                )
            )
            return None
        return Stored(*row)


def record_answer(engine: Engine, key: str, status: int, content_type: str, body: bytes) -> None:
    """Store the answer after the commit (when none came with the write, or another one)."""
    with engine.begin() as conn:
        conn.execute(
            update(IdempotencyRecord)
            .where(IdempotencyRecord.key == key)
            .values(status_code=status, content_type=content_type, response_body=body)
        )


def sweep(engine: Engine, now: datetime) -> int:
    """Delete the records past 24 h; returns how many went."""
    with engine.begin() as conn:
        result = conn.execute(
            delete(IdempotencyRecord).where(IdempotencyRecord.created_at <= now - KEEP_FOR)
        )
    return result.rowcount
