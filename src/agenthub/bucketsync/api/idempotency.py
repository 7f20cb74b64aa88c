"""The `Idempotency-Key` middleware: every POST carrying the header is answered once per
key and body (see `core.idempotency`); a replayed answer carries `Idempotent-Replayed: true`.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agenthub.bucketsync import deadlines
from agenthub.bucketsync.api.errors import STATUS, error_response, render
from agenthub.bucketsync.core import idempotency
from agenthub.bucketsync.core.idempotency import Answer, Attempt, BucketIdempotency
from agenthub.bucketsync.errors import BucketSyncError
from agenthub.httperrors import read_body, replay

REPLAYED = "Idempotent-Replayed"
# Of a gate's lease, kept back for recording the answer once the request has run.
FINISH_MARGIN_S = 5.0


class IdempotencyKeys:
    def __init__(self, app: ASGIApp, *, keys: BucketIdempotency) -> None:
        self.app = app
        self.keys = keys

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = Headers(scope=scope) if scope["type"] == "http" else None
        key = headers.get(idempotency.HEADER) if headers is not None else None
        if headers is None or key is None or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        if not key or len(key) > idempotency.MAX_KEY_LENGTH or not key.isprintable():
            response = error_response(
                400,
                "INVALID_REQUEST",
                "Idempotency-Key must be 1-255 printable characters",
                "use a fresh UUID per request, and the same one for its retries",
            )
            await response(scope, receive, send)
            return
        body = await read_body(receive)
        attempt = Attempt.of(key, headers.get("authorization"), "POST", scope["path"], body)
        try:
            answer = await run_in_threadpool(self.keys.begin, attempt)
        except BucketSyncError as exc:
            await render(exc, STATUS.get(type(exc), 409))(scope, receive, send)
            return
        if answer is not None:
            replayed = _json_response(answer, {REPLAYED: "true"})
            await replayed(scope, receive, send)
            return
        status = 0
        chunks: list[bytes] = []

        async def capture(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))
            await send(message)

        token = idempotency.current.set(attempt)
        finished = False
        lease = self.keys.lease_s
        # A key held with a lease (Redis, many workers) bounds every backend call of its
        # request: none is still running when another worker could take the key over.
        bound = (
            deadlines.within(max(0.0, lease - FINISH_MARGIN_S))
            if lease is not None
            else contextlib.nullcontext()
        )
        try:
            with bound:
                await self.app(scope, replay(body, receive), capture)
            if 200 <= status < 300:
                try:
                    answered: Any = json.loads(b"".join(chunks) or b"null")
                except ValueError:
                    answered = None
                if answered is not None:
                    await run_in_threadpool(self.keys.finish, attempt, Answer(status, answered))
                    finished = True
        finally:
            idempotency.current.reset(token)
            if not finished:
                self.keys.abandon(attempt)


def _json_response(answer: Answer, headers: dict[str, str]) -> JSONResponse:
    return JSONResponse(answer.body, status_code=answer.status, headers=headers)
