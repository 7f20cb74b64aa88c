"""The `Idempotency-Key` header on every POST (see `statehub.idempotency`)."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable

from sqlalchemy import Engine
from sqlalchemy.orm import Session
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agenthub.clock import Clock
from agenthub.db import Transience, transience
from agenthub.httperrors import read_body, replay
from agenthub.statehub import idempotency
from agenthub.statehub.idempotency import Answer, Claim, KeyTaken, Stored

HEADER = b"idempotency-key"
JSON = "application/json"
# How long a repeat waits for the first request's answer before saying it is in doubt.
ANSWER_WAIT_S = 10.0
ANSWER_POLL_S = 0.05
RECORD_ATTEMPTS = 3
_TAKEN = "taken"
_LOST = "lost"

log = logging.getLogger(__name__)


def answer_with_write(
    answer_of: Callable[[object], tuple[int, bytes]],
) -> Callable[[Session, object], None]:
    """A `Database.on_made` hook: inside a keyed write's transaction, store the answer
    `answer_of` gives for what the write made, so the answer commits with the write."""

    def store(session: Session, made: object) -> None:
        if idempotency.claim_inserted():
            status, body = answer_of(made)
            idempotency.store_answer(session, Answer(status, JSON, body))

    return store


class IdempotencyKeys:
    """ASGI middleware: POSTs carrying `Idempotency-Key` are answered once per key."""

    def __init__(self, app: ASGIApp, *, engine: Callable[[], Engine], clock: Clock) -> None:
        self.app = app
        self.engine = engine
        self.clock = clock

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        key = _header(scope, HEADER) if scope["type"] == "http" else None
        if key is None or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        if not idempotency.is_valid_key(key):
            await _send_json(
                send,
                422,
                {
                    "detail": "Idempotency-Key must be 1-255 printable ASCII characters",
                    "code": "invalid_request",
                    "hint": "use a UUID per logical request, and the same one for its retries",
                },
            )
            return
        body = await read_body(receive)
        claim = Claim(
            key=key,
            fingerprint=idempotency.fingerprint(
                scope["method"], scope["path"], scope.get("query_string", b""), body
            ),
            now=self.clock.now(),
        )
        engine = self.engine()
        stored = await asyncio.to_thread(idempotency.lookup, engine, key, claim.now)
        if stored is not None:
            await self._repeat(engine, claim, stored, send, wait=True)
            return
        outcome = await self._first(claim, scope, replay_body(body, receive))
        if isinstance(outcome, list):
            for message in outcome:
                await send(message)
            return
        stored = await asyncio.to_thread(idempotency.lookup, engine, key, claim.now)
        await self._repeat(engine, claim, stored, send, wait=outcome is _TAKEN)

    async def _first(
        self, claim: Claim, scope: Scope, receive: Callable[[], Receive]
    ) -> list[Message] | str:
        """Run the request: its answer (stored when its write claimed the key), `_TAKEN`
        when a concurrent request with the same key claimed it first, or `_LOST` when
        the write committed but the connection died before saying so."""
        for attempt in (1, 2):
            try:
                return await self._run(claim, scope, receive())
            except KeyTaken:
                return _TAKEN
            except Exception as exc:
                if not claim.inserted or transience(exc) is not Transience.OUTCOME_UNKNOWN:
                    raise
                # The claim row commits with the write: it tells whether the COMMIT landed.
                engine = self.engine()
                if await asyncio.to_thread(idempotency.lookup, engine, claim.key, claim.now):
                    return _LOST
                if attempt == 2:
                    raise
                claim.inserted = False
                claim.answer = None
        raise AssertionError("unreachable")

    async def _run(self, claim: Claim, scope: Scope, receive: Receive) -> list[Message]:
        messages: list[Message] = []

        async def keep(message: Message) -> None:
            messages.append(message)

        token = idempotency.CURRENT.set(claim)
        try:
            await self.app(scope, receive, keep)
        finally:
            idempotency.CURRENT.reset(token)
        status = int(messages[0]["status"])
        if claim.inserted and status < 500:
            content_type = _header(messages[0], b"content-type") or JSON
            body = b"".join(m.get("body", b"") for m in messages[1:])
            sent = Answer(status, content_type, body)
            # Normally the answer committed with the write; storing it again after the
            # commit is only for a write that stored none or another one.
            if claim.answer != sent:
                if claim.answer is not None and status < 300:
                    log.error(
                        "the answer stored with the write for Idempotency-Key %r differs "
                        "from the one sent (%d, stored %d); storing the one sent",
                        claim.key,
                        status,
                        claim.answer.status,
                    )
                await self._record(claim.key, status, content_type, body)
        return messages

    async def _record(self, key: str, status: int, content_type: str, body: bytes) -> None:
        """Store the answer; the write it answers has committed, so a failure to store it
        must not turn the answer into an error (a repeat then learns it was applied)."""
        for attempt in range(RECORD_ATTEMPTS):
            try:
                await asyncio.to_thread(
                    idempotency.record_answer, self.engine(), key, status, content_type, body
                )
                return
            except Exception as exc:
                if transience(exc) is None or attempt == RECORD_ATTEMPTS - 1:
                    log.error(
                        "could not store the answer for Idempotency-Key %r", key, exc_info=exc
                    )
                    return

    async def _repeat(
        self, engine: Engine, claim: Claim, stored: Stored | None, send: Send, *, wait: bool
    ) -> None:
        waited = 0.0 if wait else ANSWER_WAIT_S
        while stored is not None and stored.status_code is None and waited < ANSWER_WAIT_S:
            if stored.fingerprint != claim.fingerprint:
                break
            await asyncio.sleep(ANSWER_POLL_S)
            waited += ANSWER_POLL_S
            stored = await asyncio.to_thread(idempotency.lookup, engine, claim.key, claim.now)
        if stored is None:
            # Only a claim older than 24 h disappears: the key is free again, try again.
            await _send_json(
                send,
                409,
                {
                    "detail": f"Idempotency-Key {claim.key!r} expired while this request waited",
                    "code": "idempotency_key_expired",
                    "hint": "send the request again",
                },
                retry_after=True,
            )
            return
        if stored.fingerprint != claim.fingerprint:
            await _send_json(
                send,
                409,
                {
                    "detail": f"Idempotency-Key {claim.key!r} was used for a different request",
                    "code": "idempotency_key_reused",
                    "hint": "use a new key for a new request; reuse a key only to retry",
                },
            )
            return
        if stored.status_code is None:
            await _send_json(send, 409, _in_doubt(claim.key))
            return
        body = stored.body or b""
        headers = [
            (b"content-type", (stored.content_type or "application/json").encode()),
            (b"content-length", str(len(body)).encode()),
            (b"idempotent-replayed", b"true"),
        ]
        await send(
            {"type": "http.response.start", "status": stored.status_code, "headers": headers}
        )
        await send({"type": "http.response.body", "body": body})


def replay_body(body: bytes, receive: Receive) -> Callable[[], Receive]:
    """A fresh `receive` holding the body for each run of the request."""
    return lambda: replay(body, receive)


def _in_doubt(key: str) -> dict[str, str]:
    return {
        "detail": f"the request with Idempotency-Key {key!r} was applied, "
        "but its answer was not recorded",
        "code": "idempotency_answer_lost",
        "hint": "do not send it again; list the messages to see what it created",
    }


def _header(scope_or_message: Scope | Message, name: bytes) -> str | None:
    for header, value in scope_or_message.get("headers", []):
        if header.lower() == name:
            return bytes(value).decode("latin-1")
    return None


async def _send_json(
    send: Send, status: int, body: dict[str, str], *, retry_after: bool = False
) -> None:
    raw = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode())]
    if retry_after:
        headers.append((b"retry-after", b"1"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": raw})
