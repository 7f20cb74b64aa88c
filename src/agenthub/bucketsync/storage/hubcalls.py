"""`HubCalls`: every `huggingface_hub` call the hf adapters make, under a deadline, never
sleeping, with every failure translated into a retryable domain error.

huggingface_hub 2.x retries inside its own calls (`http_backoff`: 5 retries, sleeping 1 to 8 s
and, on a 429, the whole `Retry-After`, e.g. 301 s) and sets no HTTP timeout. Its shared
`httpx2.Client` is built by a replaceable factory; the one installed here wraps the
transport so that, while a `HubCalls.run` is active in the thread (a context variable, so
nothing else in the process changes):

    each request gets the time left until the call's deadline as its timeouts;
    a 408/429/5xx answer raises `HubRefused` (with the `Retry-After`) instead of being
    handed back to a retry loop; a transport error raises `HubUnreachable`; neither is an
    exception huggingface_hub retries, so nothing sleeps.

hf_xet moves file content outside httpx2; its session is created here with one attempt and
timeouts equal to the deadline (`bound_xet_session`), and its errors (`OSError`,
`RuntimeError`) are translated like the rest.

With a `HubGovernor` (the token's request budget), every request is first counted by it,
or refused before it is sent (`BudgetSpent` → `StorageUnavailable` with the window's
`Retry-After`); a call's priority is `write` for writes, else `HUB_PRIORITY`. A request
made outside a call with a governed token (hf_xet fetching a Xet token from its own thread,
the change feed's follower) is counted by that token's governor, at `write` priority.

A call inside `deadlines.within(lease)` (a lock or key held with a lease) gets the lesser
of its deadline and what is left of the lease, and is not sent once the lease is over.

Failure → error, and what a write's client is told:

    connection refused/connect timeout, a 429     StorageUnavailable: not applied
    Xet upload failed (before /batch was sent)    StorageUnavailable: not applied
    any other 4xx (a refusal)                     StorageUnavailable: not applied
    reset/timeout/5xx after a write was sent      WriteOutcomeUnknown: may have been applied
    a 429's Retry-After                           passed on as `retry_after_s`
"""

from __future__ import annotations

import contextvars
import os
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

import httpx2
from huggingface_hub.errors import HfHubHTTPError

from agenthub.bucketsync import deadlines
from agenthub.bucketsync.errors import StorageUnavailable, WriteOutcomeUnknown
from agenthub.bucketsync.storage.base import HUB_PRIORITY, HubPriority
from agenthub.bucketsync.storage.governor import BudgetSpent, HubGovernor

T = TypeVar("T")

DEFAULT_DEADLINE_S = 15.0
RETRY_HINT = "retry in a few seconds"
UNKNOWN_HINT = "retry with the same Idempotency-Key"
_RETRYABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504})
XET_TOKEN_PATH = "/api/buckets/xet-token"  # what `unseen` requests are counted as


class HubRefused(Exception):
    """The Hub answered 408/429/5xx."""

    def __init__(self, status: int, message: str, retry_after_s: float | None) -> None:
        super().__init__(f"{status} {message}".strip())
        self.status = status
        self.retry_after_s = retry_after_s


class HubUnreachable(Exception):
    """No answer: `sent` says whether the request may have reached the Hub."""

    def __init__(self, message: str, *, sent: bool) -> None:
        super().__init__(message)
        self.sent = sent


@dataclass
class _Call:
    deadline: float
    write: bool
    governor: HubGovernor | None = None
    priority: HubPriority = "write"
    write_sent: bool = False


_CURRENT: contextvars.ContextVar[_Call | None] = contextvars.ContextVar("hub_call", default=None)
# The governors by the `authorization` header of their token, for requests made outside
# a call (weak: a governor lives as long as the adapters holding it).
_GOVERNORS: weakref.WeakValueDictionary[str, HubGovernor] = weakref.WeakValueDictionary()


def _retry_after(response: httpx2.Response) -> float | None:
    value = response.headers.get("retry-after", "")
    return float(value) if value.strip().isdigit() else None


class GuardedTransport(httpx2.BaseTransport):
    """Wraps huggingface_hub's transport; outside `HubCalls.run` it only counts a governed
    token's requests."""

    def __init__(self, inner: httpx2.BaseTransport) -> None:
        self._inner = inner

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        call = _CURRENT.get()
        if call is None:
            authorization = request.headers.get("authorization")
            governor = _GOVERNORS.get(authorization) if authorization else None
            if governor is not None:
                governor.spend(request.url.path, "write", authorization)
            return self._inner.handle_request(request)
        if call.governor is not None:
            call.governor.spend(
                request.url.path, call.priority, request.headers.get("authorization")
            )
        left = call.deadline - time.monotonic()
        if left <= 0:
            raise HubUnreachable("the call's deadline passed", sent=False)
        request.extensions["timeout"] = {"connect": left, "read": left, "write": left, "pool": left}
        if call.write and request.method not in ("GET", "HEAD"):
            call.write_sent = True
        try:
            response = self._inner.handle_request(request)
        except (httpx2.ConnectError, httpx2.ConnectTimeout, httpx2.PoolTimeout) as exc:
            raise HubUnreachable(f"{type(exc).__name__}: {exc}", sent=False) from exc
        except httpx2.TransportError as exc:
            raise HubUnreachable(f"{type(exc).__name__}: {exc}", sent=True) from exc
        if response.status_code in _RETRYABLE_STATUS:
            try:
                response.read()
                message = response.headers.get("x-error-message") or response.text[:200]
            except httpx2.HTTPError:
                message = ""
            finally:
                response.close()
            raise HubRefused(response.status_code, message, _retry_after(response))
        return response

    def close(self) -> None:
        self._inner.close()


_INSTALL_LOCK = threading.Lock()
_installed = False


def install_guard() -> None:
    """Make huggingface_hub's shared client use `GuardedTransport` (once per process)."""
    global _installed
    with _INSTALL_LOCK:
        if _installed:
            return
        from huggingface_hub import set_client_factory
        from huggingface_hub.utils._http import hf_request_event_hook

        def factory() -> httpx2.Client:
            return httpx2.Client(
                transport=GuardedTransport(httpx2.HTTPTransport()),
                event_hooks={"request": [hf_request_event_hook]},
                follow_redirects=True,
                timeout=None,
            )

        set_client_factory(factory)
        _installed = True


def bound_xet_session(deadline_s: float) -> None:
    """Create huggingface_hub's global Xet session with one attempt and deadline-long
    timeouts (its defaults: 5 attempts, 360 s of retries, a 300 s read timeout). Uses the
    holder huggingface_hub keeps in `utils._xet`; a session it already made is kept."""
    from hf_xet import XetConfig, XetSession
    from huggingface_hub.utils import _xet

    holder: Any = getattr(_xet, "_GLOBAL_XET_HOLDER", None)
    if holder is None or not hasattr(holder, "_lock"):
        return
    limit = timedelta(seconds=deadline_s)
    config = XetConfig().with_config(
        {
            "client.retry_max_attempts": 1,
            "client.retry_max_duration": limit,
            "client.connect_timeout": limit,
            "client.read_timeout": limit,
        }
    )
    with holder._lock:
        if holder._session is None:
            holder._session = XetSession(config)
            holder._session_pid = os.getpid()


class HubCalls:
    """Runs huggingface_hub calls for one adapter: `run(what, fn, write=...)`."""

    def __init__(
        self, *, deadline_s: float = DEFAULT_DEADLINE_S, governor: HubGovernor | None = None
    ) -> None:
        install_guard()
        self.deadline_s = deadline_s
        self.governor = governor
        if governor is not None and governor.bearer is not None:
            _GOVERNORS[governor.bearer] = governor

    def run(self, what: str, fn: Callable[[], T], *, write: bool = False, unseen: int = 0) -> T:
        """`fn()` under the deadline and the budget. `unseen`: API requests the call makes
        outside huggingface_hub's client, which the budget counts up front (hf_xet fetches
        its Xet token itself: one per transfer)."""
        budget = self.deadline_s
        outer = deadlines.remaining()  # a lease held around this call (deadlines.within)
        if outer is not None:
            if outer <= 0:
                raise StorageUnavailable(
                    f"{what}: the lease this request holds ran out; nothing was sent",
                    hint=RETRY_HINT,
                )
            budget = min(budget, outer)
        priority: HubPriority = "write" if write else HUB_PRIORITY.get()
        call = _Call(
            deadline=time.monotonic() + budget,
            write=write,
            governor=self.governor,
            priority=priority,
        )
        token = _CURRENT.set(call)
        try:
            if self.governor is not None:
                self.governor.admit(priority)
                for _ in range(unseen):
                    self.governor.spend(XET_TOKEN_PATH, priority, self.governor.bearer)
            return fn()
        except StorageUnavailable:
            raise
        except BudgetSpent as exc:
            text = f"not sent: {exc}"
            raise self._failed(
                what, text, call, call.write_sent, retry_after_s=exc.retry_after_s
            ) from exc
        except HubRefused as exc:
            raise self._refused(what, exc, call) from exc
        except HubUnreachable as exc:
            raise self._failed(what, f"the Hub did not answer ({exc})", call, exc.sent) from exc
        except HfHubHTTPError as exc:
            status = getattr(exc.response, "status_code", None)
            # A 4xx is a refusal: the Hub did not apply the request.
            refused = status is not None and 400 <= status < 500
            text = f"the Hub answered {status}: {exc}"
            raise self._failed(what, text, call, not refused) from exc
        except (httpx2.HTTPError, httpx2.StreamError, OSError, RuntimeError) as exc:
            # OSError and RuntimeError: hf_xet's transfer errors (and a local temp file).
            text = f"the transfer failed ({type(exc).__name__}: {exc})"
            raise self._failed(what, text, call, call.write_sent) from exc
        except (ValueError, KeyError) as exc:
            text = f"the Hub's answer was not understood ({type(exc).__name__}: {exc})"
            raise self._failed(what, text, call, call.write_sent) from exc
        finally:
            _CURRENT.reset(token)

    def _refused(self, what: str, exc: HubRefused, call: _Call) -> StorageUnavailable:
        if exc.status == 429:
            return StorageUnavailable(
                f"{what}: the Hub is rate limiting this token (429); nothing was applied",
                hint=RETRY_HINT if exc.retry_after_s is None else "retry after Retry-After",
                retry_after_s=exc.retry_after_s,
            )
        return self._failed(
            what, f"the Hub answered {exc}", call, call.write_sent, retry_after_s=exc.retry_after_s
        )

    @staticmethod
    def _failed(
        what: str,
        text: str,
        call: _Call,
        maybe_sent: bool,
        *,
        retry_after_s: float | None = None,
    ) -> StorageUnavailable:
        if call.write and maybe_sent and call.write_sent:
            return WriteOutcomeUnknown(
                f"{what}: {text}; the write may have been applied",
                hint=UNKNOWN_HINT,
                retry_after_s=retry_after_s,
            )
        applied = "; nothing was applied" if call.write else ""
        return StorageUnavailable(
            f"{what}: {text}{applied}", hint=RETRY_HINT, retry_after_s=retry_after_s
        )
