"""Offline, idempotent inbox rebuild from board history (the seed's backfill_inbox.py),
using the same recipient extraction as the write path. Broadcasts are skipped: they reach
inboxes by read-time union, not copies."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from agenthub.bucketsync.core import frontmatter, mentions, naming
from agenthub.bucketsync.storage.base import Batch, BucketStore

BATCH_SIZE = 500


@dataclass
class BackfillReport:
    messages: int = 0
    copies_written: int = 0
    already_present: int = 0
    broadcasts_skipped: int = 0
    recipients: dict[str, int] = field(default_factory=dict)


def backfill_inbox(
    store: BucketStore, bucket: str, *, fanout_cap: int, dry_run: bool = False
) -> BackfillReport:
    report = BackfillReport()
    registered = {
        entry.path.removeprefix(naming.AGENTS).removesuffix(".md")
        for entry in store.list(bucket, naming.AGENTS)
        if entry.path.endswith(".md")
    }
    existing = {entry.path: entry.content_hash for entry in store.list(bucket, naming.INBOX)}
    board = [
        entry
        for entry in store.list(bucket, naming.MESSAGE_BOARD)
        if naming.read_board_filename(entry.path.removeprefix(naming.MESSAGE_BOARD))
    ]
    pending: list[tuple[str, bytes]] = []
    for start in range(0, len(board), BATCH_SIZE):
        chunk = board[start : start + BATCH_SIZE]
        contents = store.read_many(bucket, [entry.path for entry in chunk])
        for entry in chunk:
            raw = contents.get(entry.path)
            if raw is None:
                continue
            report.messages += 1
            filename = entry.path.removeprefix(naming.MESSAGE_BOARD)
            document = frontmatter.parse_lenient(raw)
            _stamp, author = naming.read_board_filename(filename) or (None, None)
            author = author or str(document.frontmatter.get("agent") or "")
            if document.frontmatter.get("broadcast") is True:
                report.broadcasts_skipped += 1
                continue
            for handle in mentions.recipients(
                author=author,
                body=document.body,
                refs=mentions.normalize_refs(document.frontmatter.get("refs")),
                is_registered=registered.__contains__,
                cap=fanout_cap,
            ):
                target = naming.inbox_path(handle, filename)
                if existing.get(target) in (entry.content_hash, hashlib.sha256(raw).hexdigest()):
                    report.already_present += 1
                    continue
                pending.append((target, raw))
                report.recipients[handle] = report.recipients.get(handle, 0) + 1
        if not dry_run and len(pending) >= BATCH_SIZE:
            store.write_batch(bucket, Batch(adds=pending))
            report.copies_written += len(pending)
            pending = []
    if pending and not dry_run:
        store.write_batch(bucket, Batch(adds=pending))
        report.copies_written += len(pending)
    elif dry_run:
        report.copies_written = 0
    return report
