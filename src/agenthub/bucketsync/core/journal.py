"""The journal of a write (a board post, a result), so a crash leaves neither an orphan
nor a duplicate, and a retry after it gets the first answer.

Choice: journal the batch, complete or roll back at start. A post is ONE batch, derived
files first (inbox copies, the broadcast copy, a channel's auto-subscribe marker) and the
board file last — the seed's order, which on HF (no transactions) never shows a board
message whose fan-out is missing, and costs one round trip. Before that batch, an entry
(intent first) records the board path, the derived files, the audit row and the answer.
At start, before anything is served, `recover` completes each abandoned entry whose board
file exists (missing derived files, the audit row if it did not land, the Idempotency-Key
answer, the dedup record) and rolls back the others (deletes the derived files that
landed: nothing else of the post was visible). So after any crash and restart no reader
sees an inbox copy whose board file does not exist, every acknowledged post has its audit
row, and a retry with the same Idempotency-Key gets the first answer. (Board-first with
derivation was the alternative; it would split each post into two HF round trips.)

    journal/{write_id}.json   intent: board path, derived files, audit row, answer
    idempotency/{id}.json     the answer to an Idempotency-Key (core.idempotency)
    dedup/{sha256}.json       the filename a promoted source became (survives restarts)

All three live in the private AUDIT_BUCKET. The last step of a post writes the audit row
(as its own part file, on a store without append), the answer and the dedup record and
deletes the entry in one batch: a post is three batches, and the hf store's group commit
(`storage.groupcommit`) lets concurrent posts share each of them.

A promoted result or claim (`core.sources.promote_stamped`) is journaled the same way:
its record is the "board file", a result's pin the derived file, its answer the 201 body.
(Its after-steps, the pending mark, the landscape events and a claim's wake of the owners
it overlaps, are courtesies a recovery does not redo.)
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import socket
from dataclasses import dataclass, replace
from typing import Any

from agenthub import pids
from agenthub.bucketsync.core import idempotency
from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.core.idempotency import Answer, Attempt, RunningGate
from agenthub.bucketsync.core.readmodel import folder_of
from agenthub.bucketsync.errors import AlreadyPromoted, StorageUnavailable
from agenthub.bucketsync.storage.base import Batch

log = logging.getLogger(__name__)

JOURNAL = "journal/"
# An entry of a live process on this host is left alone this long (another worker's post
# in flight); after it, or when its process is gone, it is recovered.
ABANDONED_AFTER_S = 600.0
RECOVERY_LOCK = "journal-recovery"


@dataclass(frozen=True)
class Entry:
    write_id: str
    board_path: str
    derived: list[tuple[str, bytes]]
    audit_row: dict[str, Any]
    answer: dict[str, Any]
    attempt: Attempt | None = None
    dedup_key: str | None = None
    pid: int = 0
    host: str = ""
    at: float = 0.0
    # `pids.Holder` of the writer (set by `begin`): tells its end from a reuse of its pid.
    holder: str = ""

    @property
    def path(self) -> str:
        return f"{JOURNAL}{self.write_id}.json"

    def encode(self) -> bytes:
        return json.dumps(
            {
                "write_id": self.write_id,
                "board_path": self.board_path,
                "derived": [[p, base64.b64encode(d).decode()] for p, d in self.derived],
                "audit_row": self.audit_row,
                "answer": self.answer,
                "attempt": (
                    None
                    if self.attempt is None
                    else [self.attempt.record_id, self.attempt.fingerprint]
                ),
                "dedup_key": self.dedup_key,
                "pid": self.pid,
                "host": self.host,
                "at": self.at,
                "holder": self.holder,
            }
        ).encode()

    @classmethod
    def decode(cls, data: bytes) -> Entry:
        raw = json.loads(data)
        attempt = raw.get("attempt")
        return cls(
            write_id=str(raw["write_id"]),
            board_path=str(raw["board_path"]),
            derived=[(str(p), base64.b64decode(d)) for p, d in raw["derived"]],
            audit_row=dict(raw["audit_row"]),
            answer=dict(raw["answer"]),
            attempt=None if attempt is None else Attempt(str(attempt[0]), str(attempt[1])),
            dedup_key=raw.get("dedup_key"),
            pid=int(raw.get("pid", 0)),
            host=str(raw.get("host", "")),
            at=float(raw.get("at", 0.0)),
            holder=str(raw.get("holder", "")),
        )


def owner() -> tuple[int, str]:
    return os.getpid(), socket.gethostname()


def begin(hub: Hub, entry: Entry) -> None:
    """Record the intent, before the board file is written. The audit side never fails a
    post (seed §8): if the AUDIT_BUCKET refuses, the post goes on without crash recovery,
    and the loss is logged and counted with the audit failures."""
    me = pids.Holder.me()
    recorded = replace(entry, holder=str(me)) if entry.pid == me.pid else entry
    try:
        hub.store.write_batch(
            hub.settings.audit_bucket, Batch(adds=[(entry.path, recorded.encode())])
        )
    except StorageUnavailable as exc:
        hub.audit.failures += 1
        hub.audit.last_error = f"journal: {exc.message}"
        log.error("post %s not journaled: %s", entry.write_id, exc.message)


def roll_back(hub: Hub, entry: Entry) -> None:
    """The board file did not land: delete the derived files that may have, then the
    entry. A failure leaves the entry for the next start to roll back."""
    try:
        if entry.derived:
            hub.store.write_batch(hub.central, Batch(deletes=[p for p, _ in entry.derived]))
            for path, _data in entry.derived:
                hub.read_model.invalidate(folder_of(path))
        hub.store.write_batch(hub.settings.audit_bucket, Batch(deletes=[entry.path]))
    except StorageUnavailable as exc:
        log.error("post %s not rolled back yet (%s); the next start will", entry.write_id, exc)


def complete(hub: Hub, entry: Entry, *, audit: bool = False) -> None:
    """Record the answer and the dedup filename, and close the entry; with `audit`, also
    the post's audit row: in the same batch where the store has no append (HF: one Hub
    request for all the bookkeeping), appended first where it has."""
    part = hub.audit.part(entry.audit_row) if audit else None
    if audit and part is None:
        hub.audit.append(entry.audit_row)
    adds = [part] if part is not None else []
    now = hub.clock.now().timestamp()
    if entry.attempt is not None:
        answer = Answer(201, entry.answer)
        adds.append(
            (
                idempotency.record_path(entry.attempt.record_id),
                idempotency.encode_record(entry.attempt, answer, now),
            )
        )
    if entry.dedup_key is not None:
        record = json.dumps({"filename": entry.answer["filename"]}).encode()
        adds.append((_dedup_path(entry.dedup_key), record))
    batch = Batch(adds=adds, deletes=[entry.path])
    try:
        hub.store.write_batch(hub.settings.audit_bucket, batch)
    except StorageUnavailable as exc:
        # The post stands; the journal entry (if any) lets the next start finish this.
        if part is not None:
            hub.audit.lost(entry.audit_row, exc)
        hub.audit.failures += 1
        hub.audit.last_error = f"journal: {exc.message}"
        log.error("post %s answer not recorded: %s", entry.write_id, exc.message)
        return
    if part is not None:
        hub.audit.landed()
    if entry.attempt is not None:
        entry.attempt.recorded = True


def _dedup_path(key: str) -> str:
    return f"dedup/{hashlib.sha256(key.encode()).hexdigest()}.json"


def refuse_promoted(hub: Hub, key: str) -> None:
    """AlreadyPromoted if `key` (a source hash and folder) became a post before, even
    before this process started."""
    data = hub.store.read(hub.settings.audit_bucket, _dedup_path(key))
    if data is None:
        return
    filename = str(json.loads(data).get("filename", ""))
    raise AlreadyPromoted(
        f"this source was already promoted as {filename}",
        filename=filename,
        hint=f"existing filename: {filename}",
    )


@dataclass(frozen=True)
class Recovery:
    completed: int
    rolled_back: int


def recover(hub: Hub, keys: RunningGate | None = None, *, starting: bool = True) -> Recovery:
    """Complete each abandoned entry whose board file exists (missing derived files, the
    audit row if missing, answer, dedup), roll back the others, and free in `keys` the
    Idempotency-Key each one held, so a retry is answered now rather than after the gate's
    lease. At start (`starting`), entries of this pid are a previous incarnation's; while
    serving (a gate found a dead holder) they are this process's posts in flight."""
    audit_bucket = hub.settings.audit_bucket
    if hub.store.info(audit_bucket) is None:
        return Recovery(0, 0)
    completed = dropped = 0
    # One recovery at a time across workers: two would both append a missing audit row.
    with hub.locks.hold(RECOVERY_LOCK):
        now = hub.clock.now().timestamp()
        for file in hub.store.list(audit_bucket, JOURNAL):
            data = hub.store.read(audit_bucket, file.path)
            if data is None:
                continue
            try:
                entry = Entry.decode(data)
            except (ValueError, KeyError, TypeError):
                log.error("unreadable journal entry %s left in place", file.path)
                continue
            if not _abandoned(entry, now, starting=starting):
                continue
            if _recover_one(hub, entry):
                completed += 1
            else:
                dropped += 1
            if keys is not None and entry.attempt is not None:
                keys.release_abandoned(entry.attempt.record_id)
    if completed or dropped:
        log.warning("journal: completed %d posts, rolled back %d", completed, dropped)
    return Recovery(completed, dropped)


def _recover_one(hub: Hub, entry: Entry) -> bool:
    """Complete `entry` (True) if its board file landed, else roll it back (False)."""
    if hub.store.read(hub.central, entry.board_path) is None:
        roll_back(hub, entry)
        return False
    missing = [(p, d) for p, d in entry.derived if hub.store.read(hub.central, p) is None]
    if missing:
        hub.write_central(missing)
    month = str(entry.audit_row.get("ts", ""))[:7].replace("-", "")
    if not hub.audit.has_row(month, entry.write_id):
        hub.audit.append(entry.audit_row)
    complete(hub, entry)
    return True


def _abandoned(entry: Entry, now: float, *, starting: bool) -> bool:
    pid, host = owner()
    if now - entry.at > ABANDONED_AFTER_S:
        return True
    holder = pids.Holder.parse(entry.holder)
    if holder is not None and (gone := holder.gone()) is not None:
        return gone
    if entry.host != host:
        return False
    if entry.pid == pid:
        # Recovery at start runs before serving: our pid is then a previous incarnation's.
        return starting
    return not pids.alive(entry.pid)
