"""`Idempotency-Key` on POST: the same key and body within `TTL_S` get the first answer
again; the same key with another body is a 409 CONFLICT; a duplicate sent while the first
is still running waits for it and gets its answer.

An attempt is named by the key and the caller (a hash of the `Authorization` header), and
fingerprinted by method, path and body. Answers are recorded in the AUDIT_BUCKET
(`idempotency/{id}.json`, `BucketIdempotency`: one worker) or in Redis
(`scaleout.idempotency.RedisIdempotency`: many workers); either survives a restart. A board
post or a result records its answer in the same step that completes its journal
(`core.journal`), so a write that landed before a crash is answered, not repeated, when the
client retries.
"""

from __future__ import annotations

import contextvars
import hashlib
import json
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Protocol

from agenthub.bucketsync.errors import Conflict, StorageUnavailable
from agenthub.bucketsync.storage.base import Batch, BucketStore
from agenthub.clock import Clock

log = logging.getLogger(__name__)

HEADER = "idempotency-key"
TTL_S = 24 * 3600
# How long a duplicate waits for the first request's answer before it is told to retry.
WAIT_S = 30.0
MAX_KEY_LENGTH = 255


@dataclass(frozen=True)
class Answer:
    status: int
    body: Any


@dataclass
class Attempt:
    """One request under a key; `recorded` is set once its answer is stored."""

    record_id: str
    fingerprint: str
    recorded: bool = False

    @classmethod
    def of(
        cls, key: str, authorization: str | None, method: str, path: str, body: bytes
    ) -> Attempt:
        caller = hashlib.sha256((authorization or "").encode()).hexdigest()
        record_id = hashlib.sha256(f"{caller}\n{key}".encode()).hexdigest()
        fingerprint = hashlib.sha256(f"{method} {path}\n".encode() + body).hexdigest()
        return cls(record_id, fingerprint)


# The attempt of the request being handled (set by the API, read by the board write path).
current: contextvars.ContextVar[Attempt | None] = contextvars.ContextVar(
    "idempotency_attempt", default=None
)


class RunningGate(Protocol):
    """Holds a key while its request runs, so a concurrent duplicate waits for it."""

    @property
    def lease_s(self) -> float | None:
        """How long a held key stays held without its holder (None: as long as the process
        lives). The request holding it must end its backend calls by then (`deadlines`)."""
        ...

    def acquire(self, record_id: str, timeout_s: float) -> bool:
        """Hold `record_id`, waiting up to `timeout_s` while another holds it."""
        ...

    def release(self, record_id: str) -> None: ...

    def release_abandoned(self, record_id: str) -> None:
        """Release `record_id` if its holder has ended (recovery answered its request)."""
        ...


class LocalGate:
    """The gate of one process: its holders are requests of this live process, so none is
    ever abandoned (a crash takes the gate with it, and recovery runs before serving)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: dict[str, threading.Event] = {}

    def acquire(self, record_id: str, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while True:
            with self._lock:
                running = self._running.get(record_id)
                if running is None:
                    self._running[record_id] = threading.Event()
                    return True
            if not running.wait(max(0.0, deadline - time.monotonic())):
                return False

    def release(self, record_id: str) -> None:
        with self._lock:
            event = self._running.pop(record_id, None)
        if event is not None:
            event.set()

    def release_abandoned(self, record_id: str) -> None:
        return None

    @property
    def lease_s(self) -> None:
        return None


def record_path(record_id: str) -> str:
    return f"idempotency/{record_id}.json"


def encode_record(attempt: Attempt, answer: Answer, now: float) -> bytes:
    return json.dumps(
        {
            "fingerprint": attempt.fingerprint,
            "status": answer.status,
            "body": answer.body,
            "at": now,
        }
    ).encode()


def replay(attempt: Attempt, data: bytes | None, now: float) -> Answer | None:
    """The answer a stored record gives `attempt`: None if absent or expired."""
    if data is None:
        return None
    try:
        record = json.loads(data)
        at = float(record["at"])
        fingerprint = str(record["fingerprint"])
        answer = Answer(int(record["status"]), record["body"])
    except (ValueError, KeyError, TypeError):
        return None
    if now - at > TTL_S:
        return None
    if fingerprint != attempt.fingerprint:
        raise Conflict(
            "this Idempotency-Key was already used with a different request",
            hint="use a new key for a new request; retry with the same body to get the "
            "first answer",
        )
    return answer


class BucketIdempotency:
    """Answers recorded in the AUDIT_BUCKET; the gate (in-process, or Redis for many
    workers) holds a key while its request runs."""

    def __init__(self, store: BucketStore, bucket: str, clock: Clock, gate: RunningGate) -> None:
        self._store = store
        self._bucket = bucket
        self._clock = clock
        self._gate = gate

    def begin(self, attempt: Attempt) -> Answer | None:
        """The recorded answer to replay, or None when the caller should proceed (the key
        is then held until `finish` or `abandon`); raises Conflict for another body, or
        when the first request is still running after `WAIT_S`."""
        if not self._gate.acquire(attempt.record_id, WAIT_S):
            raise Conflict(
                "a request with this Idempotency-Key is still running",
                hint="retry in a moment to get its answer",
            )
        try:
            data = self._store.read(self._bucket, record_path(attempt.record_id))
            found = replay(attempt, data, self._clock.now().timestamp())
        except BaseException:
            self._gate.release(attempt.record_id)
            raise
        if found is not None:
            self._gate.release(attempt.record_id)
        return found

    def finish(self, attempt: Attempt, answer: Answer) -> None:
        """Record the answer (unless the write path already did) and release the key."""
        try:
            if not attempt.recorded:
                self._store.write_batch(self._bucket, Batch(adds=[self.record(attempt, answer)]))
                attempt.recorded = True
        except StorageUnavailable as exc:
            # The answer was sent; a retry will run again rather than replay it.
            log.error("Idempotency-Key answer not recorded: %s", exc.message)
        finally:
            self._gate.release(attempt.record_id)

    @property
    def lease_s(self) -> float | None:
        """The gate's lease: how long a held key stays held after its holder vanished
        (None: for the life of the process)."""
        return self._gate.lease_s

    def abandon(self, attempt: Attempt) -> None:
        """Release the key without an answer (the request failed: a retry runs again)."""
        self._gate.release(attempt.record_id)

    def record(self, attempt: Attempt, answer: Answer) -> tuple[str, bytes]:
        """The file recording `answer` (the write journal writes it in its last batch)."""
        return record_path(attempt.record_id), encode_record(
            attempt, answer, self._clock.now().timestamp()
        )
