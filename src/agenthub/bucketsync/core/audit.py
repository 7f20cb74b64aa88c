"""The audit log: one JSON line per write, in the private AUDIT_BUCKET, by month.

An append costs the line, never the month: a store that appends in place (the local one)
keeps `audit/{YYYYMM}.jsonl`; a bucket without append (HF) gets one part file per row,
`audit/{YYYYMM}/{write_id}.jsonl`, written once and never rewritten. `rows(month)` reads
either layout (and the single month file earlier versions rewrote on HF).

A row may carry a `write_id` (the journal of a board post names its row), so a recovery
can tell whether the row already landed. In-place appends are serialized in-process under
one lock (part files need no order: concurrent rows share a batch); a failure never fails the user's request but is logged and counted (`failures`).
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
import uuid
from typing import Any

from agenthub.bucketsync.storage.base import AppendableStore, Batch, BucketStore
from agenthub.clock import Clock

log = logging.getLogger(__name__)


class AuditLog:
    def __init__(self, store: BucketStore, bucket: str, clock: Clock, *, two_org: bool) -> None:
        self._store = store
        self._bucket = bucket
        self._clock = clock
        self.two_org = two_org
        self._lock = threading.Lock()
        self.written = 0
        self.failures = 0
        self.last_error: str | None = None
        self._sequence = itertools.count()

    def path_for_now(self) -> str:
        """The month file (the layout of a store that appends in place)."""
        return f"audit/{self._clock.now():%Y%m}.jsonl"

    def new_write_id(self) -> str:
        """A time-ordered unique id for one write's row (the sequence orders ids of one
        microsecond; the random part keeps workers apart)."""
        stamp = f"{self._clock.now():%Y%m%dT%H%M%S%f}"
        return f"{stamp}-{next(self._sequence):09d}-{uuid.uuid4().hex[:12]}"

    def row(
        self,
        *,
        agent_id: str,
        route: str,
        via: str,
        source: str | None,
        target_path: str,
        size: int,
        status_code: int,
        caller_ip: str | None = None,
        user_agent: str | None = None,
        **extra: Any,
    ) -> dict[str, Any]:
        """The row `record` would append (a journal keeps it until the write completes)."""
        row: dict[str, Any] = {
            "ts": self._clock.now().isoformat().replace("+00:00", "Z"),
            "agent_id": agent_id,
            "route": route,
            "via": via,
            "source": source,
            "target_path": target_path,
            "bytes": size,
            "status_code": status_code,
            **extra,
        }
        if self.two_org:
            # Single-org audit buckets are readable by participants: no IPs there (§8).
            row["caller_ip"] = caller_ip
            row["user_agent"] = user_agent
        return row

    def record(self, **fields: Any) -> bool:
        """Append one row (the fields of `row`); returns False (and counts the loss) if the
        write failed."""
        return self.append(self.row(**fields))

    def append(self, row: dict[str, Any]) -> bool:
        """Append a built row; returns False (and counts the loss) if the write failed."""
        try:
            part = self.part(row)
            if part is None:  # a store that appends in place: one append at a time
                month = str(row["ts"])[:7].replace("-", "")
                assert isinstance(self._store, AppendableStore)
                with self._lock:
                    self._store.append(self._bucket, f"audit/{month}.jsonl", self._line(row))
            else:  # a part file of its own: concurrent rows share a batch (group commit)
                self._store.write_batch(self._bucket, Batch(adds=[part]))
        except Exception as exc:  # an audit failure must never fail the request
            self.lost(row, exc)
            return False
        self.landed()
        return True

    @staticmethod
    def _line(row: dict[str, Any]) -> bytes:
        return (json.dumps(row, separators=(",", ":"), sort_keys=False) + "\n").encode()

    def part(self, row: dict[str, Any]) -> tuple[str, bytes] | None:
        """The part file holding `row`, for a caller that writes it in its own batch (the
        board journal's last batch), or None on a store that appends in place (`append`)."""
        if isinstance(self._store, AppendableStore):
            return None
        month = str(row["ts"])[:7].replace("-", "")
        write_id = str(row.get("write_id") or self.new_write_id())
        return f"audit/{month}/{write_id}.jsonl", self._line(row)

    def landed(self) -> None:
        """A row landed (counted in `written`)."""
        with self._lock:
            self.written += 1

    def lost(self, row: dict[str, Any], exc: BaseException) -> None:
        """A row did not land: counted and logged, never failing the request."""
        with self._lock:
            self.failures += 1
            self.last_error = f"{type(exc).__name__}: {exc}"
        log.error("audit row lost (%s): %s", self.last_error, self._line(row).decode().strip())

    def rows(self, month: str) -> list[dict[str, Any]]:
        """Every row of `month` (YYYYMM), in write order, whichever layout holds it."""
        data = self._store.read(self._bucket, f"audit/{month}.jsonl") or b""
        parts = [e.path for e in self._store.list(self._bucket, f"audit/{month}/")]
        found = self._store.read_many(self._bucket, parts) if parts else {}
        data += b"".join(found[path] for path in sorted(found))
        return [json.loads(line) for line in data.decode().splitlines() if line.strip()]

    def has_row(self, month: str, write_id: str) -> bool:
        """Whether the row of `write_id` landed (a recovery's question)."""
        return any(row.get("write_id") == write_id for row in self.rows(month))
