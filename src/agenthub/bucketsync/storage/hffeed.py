"""`HfChangeFeed`: the `ChangeFeed` port on a Hub bucket's change feed
(`GET /api/buckets/{id}/events`, server-sent events), followed by huggingface_hub's own
`BucketFollower` thread (`_bucket_live_follow.py`): it resumes by cursor, replays what it
missed, and calls back with each batch and before each reconcile.

When the feed counts as live — and how the fallback to TTL listing is detected:

    live: a stream is open, it has sent `ready`, it was heard from (a byte, keep-alives
    included) within SILENCE_S, and the follower thread runs.

    Not live, so the read model's listings expire after LISTING_TTL_S as before:
    - the events route answers 401/403/404/501 (not served here, or not for this token):
      BucketFollower gives up and its thread ends; a new one tries after RETRY_S;
    - it answers anything else (405, 429, 5xx), refuses the connection or times out: no
      session reaches `ready`, and BucketFollower retries with its backoff (10 s to 80 s);
    - a stream ends or falls silent: not live until the next session's `ready` (resumed
      by cursor, so the changes missed meanwhile are applied before it);
    - a `reset`, or a session without a resume point (the first one): `reconcile` first
      (every listing is taken again), and `ready(from_scratch=True)` once more after it.

BucketFollower reports batches and reconciles, not whether a stream is open: this
subclass learns that from its two seams, `_follow_once` (one call per session) and
`subscribed` (set at each `ready`); both are huggingface_hub 2.4's, and
tests/bucketsync/test_feed_follow.py fails if either changes.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from huggingface_hub import constants
from huggingface_hub._bucket_live_follow import BucketFileChange, BucketFollower

from agenthub.bucketsync.storage.base import FeedSink, FileChange
from agenthub.bucketsync.storage.governor import HubGovernor
from agenthub.bucketsync.storage.hubcalls import install_guard
from agenthub.clock import Clock, SystemClock

log = logging.getLogger(__name__)

# The Hub pings an idle stream about every 30 s; a stream silent for longer is not trusted.
SILENCE_S = 45.0
# A follower that gave up (the feed is not served) is tried again this much later.
RETRY_S = 300.0


class _Follower(BucketFollower):
    """BucketFollower telling its feed when a session opens, is ready, and ends."""

    def __init__(self, feed: HfChangeFeed, **kwargs: Any) -> None:
        self._feed = feed
        self._was_ready = False
        super().__init__(**kwargs)

    @property
    def subscribed(self) -> bool:
        return self._was_ready

    @subscribed.setter
    def subscribed(self, value: bool) -> None:
        # BucketFollower sets it at every `ready` event (and False once, at start).
        self._was_ready = self._was_ready or value
        if value:
            self._feed._ready()

    def _follow_once(self) -> bool:
        try:
            return bool(super()._follow_once())
        finally:
            self._feed._session_ended()


class HfChangeFeed:
    """Follows one bucket's change feed (see the module docstring for `live`)."""

    def __init__(
        self,
        *,
        bucket: str,
        token: str | None,
        endpoint: str | None = None,
        governor: HubGovernor | None = None,
        clock: Clock | None = None,
        silence_s: float = SILENCE_S,
        retry_s: float = RETRY_S,
    ) -> None:
        # The follower's requests go through the guarded client: counted by the governor of
        # the token they carry (`hubcalls`), which `governor` keeps alive.
        install_guard()
        self.bucket = bucket
        self.governor = governor
        self._token = token
        self._endpoint = (endpoint or constants.ENDPOINT).rstrip("/")
        self._clock = clock or SystemClock()
        self._silence_s = silence_s
        self._retry_s = retry_s
        self._lock = threading.Lock()
        self._sink: FeedSink | None = None
        self._follower: _Follower | None = None
        self._ended_at: float | None = None  # when the last follower thread was seen dead
        self._stopped = False
        self._caught_up = False  # this session sent `ready` and has not ended
        self._from_scratch = True
        self._heard_at = float("-inf")
        self.counts = {"sessions_ready": 0, "batches": 0, "reconciles": 0, "starts": 0}

    # -- the ChangeFeed port ----------------------------------------------------------------
    def start(self, sink: FeedSink) -> None:
        with self._lock:
            self._sink = sink
            self._stopped = False
            self._spawn()

    def live(self) -> bool:
        follower = self._follower
        if follower is None or self._stopped:
            return False
        if not follower.is_alive():
            self._caught_up = False
            self._restart_later()
            return False
        return self._caught_up and self._clock.monotonic() - self._heard_at < self._silence_s

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            self._caught_up = False
            if self._follower is not None:
                self._follower.stop()

    def stats(self) -> dict[str, Any]:
        follower = self._follower
        return {
            "live": self.live(),
            "following": follower is not None and follower.is_alive(),
            **self.counts,
        }

    # -- the follower's callbacks (its thread) -----------------------------------------------
    def _spawn(self) -> None:
        self.counts["starts"] += 1
        self._from_scratch = True
        self._follower = _Follower(
            self,
            endpoint=self._endpoint,
            bucket_id=self.bucket,
            token=self._token,
            on_changes=self._changes,
            on_reconcile=self._reconcile,
            is_alive=self._heard,
        )
        self._follower.start()

    def _restart_later(self) -> None:
        with self._lock:
            follower = self._follower
            if self._stopped or follower is None or follower.is_alive():
                return
            now = self._clock.monotonic()
            if self._ended_at is None:
                self._ended_at = now
                log.warning(
                    "not following %s's change feed; listings refresh every TTL", self.bucket
                )
            elif now - self._ended_at >= self._retry_s:
                self._ended_at = None
                self._spawn()

    def _heard(self) -> bool:
        # Called before each session and at every chunk the stream sends.
        self._heard_at = self._clock.monotonic()
        return not self._stopped

    def _changes(self, changes: list[BucketFileChange]) -> None:
        self.counts["batches"] += 1
        if self._sink is not None:
            self._sink.changed([_change(change) for change in changes])

    def _reconcile(self) -> None:
        self._caught_up = False
        self._from_scratch = True
        self.counts["reconciles"] += 1
        if self._sink is not None:
            self._sink.reconcile()

    def _ready(self) -> None:
        from_scratch, self._from_scratch = self._from_scratch, False
        if self._sink is not None:
            self._sink.ready(from_scratch=from_scratch)  # before `live` turns True
        self.counts["sessions_ready"] += 1
        self._heard_at = self._clock.monotonic()
        self._caught_up = not self._stopped

    def _session_ended(self) -> None:
        self._caught_up = False


def _change(change: BucketFileChange) -> FileChange:
    return FileChange(
        path=change.path,
        deleted=change.op == "delete",
        size=change.size,
        content_hash=change.xet_hash,
    )
