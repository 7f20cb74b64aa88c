"""The private split: each result's score on the private eval set, in the private audit
bucket, read by nothing a participant can reach until the reveal (`schedule.revealed`).

`private_split/{result filename}.json` = {score, recorded_at, mode}: one file per result,
written when the verifier or the eval-space evaluator re-scores the result with the private
set mounted (`scoring.verdicts.VerdictBook.record`), so concurrent verdicts never
read-modify-write a shared file. `scores()` lists the prefix and reads only files that are
new or changed since the last read (by content hash), at most once per LISTING_TTL_S, so
after the reveal the final leaderboard costs one listing per TTL window.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Mapping
from typing import Any

from agenthub.bucketsync.core import naming
from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.core.perreadmodel import PerReadModel
from agenthub.bucketsync.phases.schedule import has_private_split
from agenthub.bucketsync.storage.base import Batch

PREFIX = "private_split/"


def path_of(filename: str) -> str:
    return f"{PREFIX}{filename}.json"


def numeric(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def record(hub: Hub, filename: str, summary: Mapping[str, Any], *, mode: str) -> bool:
    """Keep `filename`'s private-split score from a re-run's `summary`; False when the
    challenge has no private split or the summary has no numeric score."""
    if not has_private_split(hub.settings):
        return False
    score = numeric(summary.get(hub.settings.score_field))
    if score is None:
        return False
    body = {
        "result": filename,
        "score": score,
        "recorded_at": naming.iso_now(hub.clock.now(), "milliseconds"),
        "mode": mode,
    }
    data = json.dumps(body, sort_keys=True).encode()
    hub.store.write_batch(hub.settings.audit_bucket, Batch(adds=[(path_of(filename), data)]))
    _CACHE.of(hub.read_model).forget()
    return True


class PrivateScores:
    """The private scores as last read, refreshed by content hash (see the module)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._hashes: dict[str, str] = {}
        self._scores: dict[str, float] = {}
        self._read_at: float | None = None

    def forget(self) -> None:
        with self._lock:
            self._read_at = None

    def scores(self, hub: Hub) -> dict[str, float]:
        with self._lock:
            now = hub.clock.monotonic()
            ttl = hub.settings.listing_ttl_s
            if self._read_at is not None and now - self._read_at < ttl:
                return self._by_result()
            bucket = hub.settings.audit_bucket
            listed = {
                e.path: e.content_hash
                for e in hub.store.list(bucket, PREFIX)
                if e.path.endswith(".json")
            }
            for gone in [p for p in self._hashes if p not in listed]:
                del self._hashes[gone]
                self._scores.pop(gone, None)
            fresh = [p for p, h in listed.items() if self._hashes.get(p) != h]
            for path, data in (hub.store.read_many(bucket, fresh) if fresh else {}).items():
                try:
                    score = numeric(json.loads(data).get("score"))
                except (ValueError, AttributeError):
                    score = None
                self._hashes[path] = listed[path]
                if score is None:
                    self._scores.pop(path, None)
                else:
                    self._scores[path] = score
            self._read_at = now
            return self._by_result()

    def _by_result(self) -> dict[str, float]:
        return {path[len(PREFIX) : -len(".json")]: score for path, score in self._scores.items()}


_CACHE = PerReadModel(PrivateScores)


def scores(hub: Hub) -> dict[str, float]:
    """Result filename -> private-split score. Only the final leaderboard, after the
    reveal, may call this (the private scores must not reach any other read)."""
    return _CACHE.of(hub.read_model).scores(hub)
