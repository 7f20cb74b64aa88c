"""A write as a careful agent sends it: one `Idempotency-Key` for the request and all its
retries, retried on a lost connection, a 5xx, a 429 (after its Retry-After) and a 409
"still running", until it is acknowledged or the budget is spent."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx

from bench.fleet.ledger import Ledger

RETRYABLE_409 = "still running"


class GaveUp(Exception):
    def __init__(self, last: str, answer: httpx.Response | None = None) -> None:
        super().__init__(last)
        self.answer = answer  # the final 4xx, when that is what ended the retries


def until_acked(
    client: httpx.Client,
    ledger: Ledger,
    service: str,
    url: str,
    *,
    key: str,
    body: dict[str, Any] | None = None,
    content: bytes | None = None,
    method: str = "POST",
    headers: dict[str, str] | None = None,
    budget_s: float = 240.0,
) -> tuple[httpx.Response, float]:
    """The acknowledging answer (2xx) and its round trip; raises GaveUp with the last
    error when the budget runs out or the answer is a 4xx that no retry can change."""
    deadline = time.monotonic() + budget_s
    pause = 0.25
    last = "no attempt"
    first = True
    while time.monotonic() < deadline:
        if not first:
            ledger.retried()
        first = False
        started = time.monotonic()
        try:
            answer = client.request(
                method,
                url,
                json=body,
                content=content,
                headers={**(headers or {}), "Idempotency-Key": key},
                timeout=30,
            )
        except httpx.HTTPError as exc:
            ledger.transport_error(service)
            last = f"{type(exc).__name__}: {exc}"
        else:
            took = time.monotonic() - started
            ledger.answer(service, answer.status_code, url.split("?")[0])
            if answer.status_code < 300:
                if answer.headers.get("Idempotent-Replayed") == "true":
                    ledger.replay()
                return answer, took
            last = f"{answer.status_code} {answer.text[:200]}"
            if answer.status_code == 429:
                pause = max(pause, float(answer.headers.get("Retry-After") or 1))
            elif answer.status_code == 409 and RETRYABLE_409 in answer.text:
                pass
            elif answer.status_code < 500:
                raise GaveUp(last, answer)
        time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
        pause = min(pause * 2, 5.0)
    raise GaveUp(last)


def acknowledged(
    client: httpx.Client,
    ledger: Ledger,
    service: str,
    url: str,
    *,
    op: str,
    kind: str,
    body: dict[str, Any],
    headers: dict[str, str] | None = None,
    recover: Callable[[GaveUp], dict[str, Any] | None] | None = None,
) -> tuple[dict[str, Any], float] | None:
    """`until_acked` with `op` as the key: the answer's JSON and round trip, or None when
    the write was given up on (recorded in the ledger). `recover(error)` may still find
    what a write given up on created (as the server's answer says), round trip then 0."""
    try:
        answer, took = until_acked(client, ledger, service, url, key=op, body=body, headers=headers)
    except GaveUp as exc:
        found = recover(exc) if recover is not None else None
        if found is not None:
            ledger.recovered(service, op, str(exc))
            return found, 0.0
        ledger.gave_up(op, kind, str(exc))
        return None
    return answer.json(), took
