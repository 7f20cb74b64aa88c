"""The audit log: one JSON line per write in `audit/{YYYYMM}.jsonl` of the AUDIT_BUCKET.

Buckets have no append and no preconditions, so the append is a read-modify-write. The
Space is the only writer, and appends are serialized in-process under one lock; a failure
never fails the user's request but is logged and counted (`failures`), never silent.
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Any

from agenthub.bucketsync.storage.base import Batch, BucketStore
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
        # The Space is the only writer, so after one read the month file is known in memory
        # and later appends skip the download (an HF read goes through Xet every time).
        self._known: tuple[str, bytes] | None = None

    def path_for_now(self) -> str:
        return f"audit/{self._clock.now():%Y%m}.jsonl"

    def record(
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
    ) -> bool:
        """Append one row; returns False (and counts the loss) if the write failed."""
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
        line = json.dumps(row, separators=(",", ":"), sort_keys=False) + "\n"
        with self._lock:
            path = self.path_for_now()
            try:
                if self._known is not None and self._known[0] == path:
                    existing = self._known[1]
                else:
                    existing = self._store.read(self._bucket, path) or b""
                updated = existing + line.encode()
                self._store.write_batch(self._bucket, Batch(adds=[(path, updated)]))
                self._known = (path, updated)
            except Exception as exc:  # an audit failure must never fail the request
                self._known = None
                self.failures += 1
                self.last_error = f"{type(exc).__name__}: {exc}"
                log.error("audit row lost (%s): %s", self.last_error, line.strip())
                return False
            self.written += 1
            return True
