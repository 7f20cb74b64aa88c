"""A typed watch client for agent harnesses written in Python, with `collab_watch.sh`'s
semantics (seed §13) and state layout, so the two can take turns on one state directory:

- cold start baselines at the newest item from before the handle registered, so the first
  page is what arrived for it since (never older history); a handle that is no registered
  agent baselines at the newest item;
- the cursor is only ever the response's top-level `cursor`, persisted verbatim;
- `run(handler)` acks (advances the cursor) only when the handler returns, and after
  `exec_retries` failures on the same page dead-letters it and moves on;
- 5xx and connection errors back off 2 → 60 s; ten in a row raise `Offline`;
  a 4xx raises `WatchError` with the server's error body.

    client = WatchClient("http://127.0.0.1:8300", "agent-1")
    page = client.next_page(max_wait=300)   # None when nothing came in time
    if page: handle(page); client.ack(page)
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import httpx

Page = dict[str, Any]
Stream = Literal["updates", "inbox", "feed"]


class WatchError(Exception):
    """The server refused the request (4xx) or answered something that is not a page."""

    def __init__(self, message: str, *, status: int | None = None, body: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.body = body


class Offline(WatchError):
    """The server failed or was unreachable too many times in a row."""


def default_state_dir(base_url: str, handle: str) -> Path:
    """`$COLLAB_WATCH_DIR` (the state directory itself, as collab_watch.sh reads it), else
    `~/.collab-watch/<host>/<handle>`. A COLLAB_WATCH_DIR holding `<host>/<handle>/` and
    no cursor of its own is the earlier layout (a base directory) and is still used."""
    host = "".join(c if c.isalnum() or c in "._-" else "_" for c in urlsplit(base_url).netloc)
    configured = os.environ.get("COLLAB_WATCH_DIR")
    if not configured:
        return Path.home() / ".collab-watch" / host / handle
    state = Path(configured)
    nested = state / host / handle
    if nested.is_dir() and not any(state.glob("cursor.*")):
        return nested
    return state


def joined_stamp(joined: object) -> str | None:
    """A registration time (ISO 8601, or upstream's `YYYY-MM-DD HH:MM UTC`) as the compact
    stamp filenames start with; None when it is not a time."""
    if not isinstance(joined, str):
        return None
    text = joined.strip().replace(" UTC", "+00:00").replace("Z", "+00:00")
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    moment = moment.astimezone(UTC)
    return moment.strftime("%Y%m%d-%H%M%S-") + f"{moment.microsecond // 1000:03d}"


@dataclass
class WatchClient:
    base_url: str
    handle: str
    stream: Stream = "updates"
    state_dir: Path | None = None
    wait_s: float = 55.0
    exec_retries: int = 3
    backoff_s: float = 2.0
    max_failures: int = 10
    http: httpx.Client | None = None
    sleep: Callable[[float], None] = time.sleep
    _failures: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        self.base_url = self.base_url.rstrip("/")
        if self.state_dir is None:
            self.state_dir = default_state_dir(self.base_url, self.handle)
        self.state_dir.mkdir(parents=True, exist_ok=True)
        if self.http is None:
            self.http = httpx.Client(timeout=self.wait_s + 30)

    # -- state --------------------------------------------------------------------------
    @property
    def _state(self) -> Path:
        assert self.state_dir is not None
        return self.state_dir

    @property
    def cursor_path(self) -> Path:
        return self._state / f"cursor.{self.stream}"

    def cursor(self) -> str | None:
        """The persisted cursor; None before the cold-start baseline, "" for an empty
        stream at baseline time."""
        try:
            return self.cursor_path.read_text().strip()
        except FileNotFoundError:
            return None

    def _write_cursor(self, value: str) -> None:
        tmp = self.cursor_path.with_suffix(".tmp")
        tmp.write_text(value + "\n")
        tmp.replace(self.cursor_path)

    def _journal(self, name: str, **row: Any) -> None:
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        with (self._state / name).open("a") as out:
            out.write(json.dumps({"ts": stamp, "stream": self.stream, **row}) + "\n")

    def _heartbeat(self, status: str) -> None:
        """`<epoch> <status> <pid> <stream>`, the line collab_watch.sh writes and reads."""
        tmp = self._state / "heartbeat.tmp"
        tmp.write_text(f"{int(time.time())} {status} {os.getpid()} {self.stream}\n")
        tmp.replace(self._state / "heartbeat")

    # -- HTTP ---------------------------------------------------------------------------
    def _url(self) -> str:
        if self.stream == "inbox":
            return f"{self.base_url}/v1/inbox/{self.handle}"
        if self.stream == "feed":
            return f"{self.base_url}/v1/channels/feed"
        return f"{self.base_url}/v1/updates"

    def _fetch(self, url: str, params: dict[str, str]) -> tuple[int, Any]:
        """GET with the backoff: (status, JSON body) of the first answer below 500."""
        assert self.http is not None
        while True:
            try:
                response = self.http.get(url, params=params)
            except httpx.HTTPError as exc:
                self._fail(f"{self.base_url} unreachable: {exc}")
                continue
            if response.status_code >= 500:
                self._fail(f"{self.base_url} answered {response.status_code}")
                continue
            self._failures = 0
            try:
                return response.status_code, response.json()
            except ValueError:
                raise WatchError("the response is not JSON", status=response.status_code) from None

    def _get(self, params: dict[str, str]) -> Page:
        if self.stream != "inbox":
            params = {"as": self.handle, **params}
        status, body = self._fetch(self._url(), params)
        if status >= 400:
            error = body.get("error", body) if isinstance(body, dict) else body
            raise WatchError(f"{status}: {error}", status=status, body=body)
        if not isinstance(body, dict) or "cursor" not in body or "items" not in body:
            raise WatchError("the response has no cursor; is this a bucket-sync server?")
        return body

    def _registered_at(self) -> str | None:
        """The handle's registration as a compact stamp; None for a handle that is no
        registered agent (a human-<name> handle)."""
        status, body = self._fetch(f"{self.base_url}/v1/agents/{self.handle}", {})
        if status >= 400 or not isinstance(body, dict):
            return None
        return joined_stamp(body.get("joined"))

    def _fail(self, message: str) -> None:
        self._failures += 1
        if self._failures >= self.max_failures:
            raise Offline(f"{message} ({self._failures} failures in a row)")
        self.sleep(min(60.0, self.backoff_s * 2 ** (self._failures - 1)))

    def poll(self, wait_s: float = 0.0) -> Page:
        """One request from the persisted cursor (never moves it)."""
        params = {"expand": "true", "order": "asc", "wait": f"{max(0.0, wait_s):g}"}
        cursor = self.cursor()
        if cursor:
            params["after"] = cursor
        return self._get(params)

    def baseline(self) -> None:
        """Cold start: remember the newest item from before the handle registered (`before`
        is exclusive), so what arrived since is delivered and older history never is."""
        if self.cursor() is None:
            params = {"limit": "1", "order": "desc", "wait": "0"}
            joined = self._registered_at()
            if joined is not None:
                params["before"] = joined
            page = self._get(params)
            self._write_cursor(str(page["cursor"] or ""))

    # -- watching -----------------------------------------------------------------------
    def next_page(self, *, max_wait: float | None = None) -> Page | None:
        """Block until a page with items arrives (returned, not yet acked), or None once
        `max_wait` seconds pass without one."""
        self.baseline()
        deadline = None if max_wait is None else time.monotonic() + max_wait
        while True:
            self._heartbeat("waiting")
            wait = self.wait_s
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    self._heartbeat("no_mail")
                    return None
                wait = min(wait, left)
            asked = time.monotonic()
            page = self.poll(wait)
            if page["items"]:
                if not page.get("cursor"):
                    raise WatchError("a page with items but no cursor; refusing to guess one")
                return page
            if time.monotonic() - asked < min(2.0, wait * 0.9):
                # Degraded or instantly-empty answers: never hot-loop.
                self.sleep(self.backoff_s)

    def ack(self, page: Page) -> None:
        """Mark `page` delivered: journal first, then persist its server cursor."""
        cursor = str(page["cursor"])
        self._journal("delivered.jsonl", after=self.cursor() or "", cursor=cursor)
        self._write_cursor(cursor)
        self._heartbeat("delivered")

    def run(
        self,
        handler: Callable[[Page], None],
        *,
        should_stop: Callable[[], bool] = lambda: False,
        poll_s: float | None = None,
    ) -> None:
        """`--exec` semantics: ack when `handler` returns; after `exec_retries` failures on
        the same page, dead-letter it and move on. Runs until `should_stop()`."""
        failures = 0
        failing_after: str | None = None
        while not should_stop():
            page = self.next_page(max_wait=poll_s)
            if page is None:
                continue
            after = self.cursor() or ""
            if after != failing_after:
                failing_after, failures = after, 0
            try:
                handler(page)
            except Exception as exc:
                failures += 1
                if failures < self.exec_retries:
                    self.sleep(self.backoff_s)
                    continue
                self._journal(
                    "dead-letter.jsonl",
                    after=after,
                    cursor=page["cursor"],
                    error=repr(exc),
                    page=page,
                )
                self._write_cursor(str(page["cursor"]))
                failures = 0
                continue
            self.ack(page)
            failures = 0

    # -- coordination (issue 18) --------------------------------------------------------
    def _call(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        """One plain request (no backoff: the caller decides whether to retry); a 4xx or 5xx
        raises `WatchError` with the server's error body."""
        assert self.http is not None
        response = self.http.request(method, f"{self.base_url}{path}", **kwargs)
        try:
            body = response.json()
        except ValueError:
            raise WatchError("the response is not JSON", status=response.status_code) from None
        if response.status_code >= 400:
            error = body.get("error", body) if isinstance(body, dict) else body
            raise WatchError(
                f"{response.status_code}: {error}", status=response.status_code, body=body
            )
        if not isinstance(body, dict):
            raise WatchError("the response is not a JSON object", status=response.status_code)
        return body

    def digest(
        self, *, budget_tokens: int | None = None, after: str | None = None
    ) -> dict[str, Any]:
        """This handle's digest; with `budget_tokens`, what is new since `after` (a
        budgeted digest's `cursor`) packed into at most that many tokens, priority first,
        long bodies cut with an `expand` route and `omitted` counting what did not fit."""
        params = {"as": self.handle}
        if budget_tokens is not None:
            params["budget_tokens"] = str(budget_tokens)
        if after is not None:
            params["after"] = after
        return self._call("GET", "/v1/digest", params=params)

    def post_message(
        self,
        body: str | None = None,
        *,
        source: str | None = None,
        type: str | None = None,
        refs: str | list[str] | None = None,
        channel: str | None = None,
    ) -> dict[str, Any]:
        """Post as this handle: a raw `body` (best-effort attribution) or a `source` already
        in your scratch bucket. The answer's `reach` says which recipients are `woken`
        now, will see it at their `next_poll`, or are `unreachable` (nobody watching)."""
        given = {"body": body, "type": type, "refs": refs, "channel": channel}
        payload: dict[str, Any] = {k: v for k, v in given.items() if v is not None}
        if source is not None:
            payload["source"] = source
        else:
            payload["agent_id"] = self.handle
        return self._call("POST", "/v1/messages", json=payload)

    def claim(self, source: str) -> dict[str, Any]:
        """Promote a claim file (`idea`, `tags`, `ttl_hours` frontmatter) already in your
        scratch bucket; the answer lists its `near_duplicates`."""
        return self._call("POST", "/v1/claims", json={"source": source})

    def claims(self, *, live: bool | None = True, **params: str) -> Page:
        """Claims, expanded (list grammar); `live=None` includes the expired ones."""
        query = {"expand": "true", **params}
        if live is not None:
            query["live"] = "true" if live else "false"
        return self._call("GET", "/v1/claims", params=query)

    def directives(self, *, active: bool = True) -> Page:
        """Directives with their ack counts; `active` leaves out superseded ones."""
        query = {"expand": "true", **({"active": "true"} if active else {})}
        return self._call("GET", "/v1/directives", params=query)

    def pending_directives(self) -> list[dict[str, Any]]:
        """The active directives this handle has not acknowledged, newest first."""
        block = self._call("GET", "/v1/digest", params={"as": self.handle})["directives"]
        return list(block["items"])

    def directive(self, filename: str) -> dict[str, Any]:
        """One directive with who has (`acked`) and has not (`not_acked`) acknowledged it."""
        return self._call("GET", f"/v1/directives/{filename}")

    def ack_directive(self, filename: str, source: str) -> dict[str, Any]:
        """Acknowledge a directive; `source` is any file of your scratch bucket (the proof
        that you are its owner). Acking twice changes nothing."""
        return self._call("POST", f"/v1/directives/{filename}/ack", json={"source": source})

    def subscribe_leaderboard(self, source: str, notify: str = "all") -> dict[str, Any]:
        """Set which landscape events reach your updates: `all` adds every champion change
        to the events about your own results (`mine`, the default level)."""
        return self._call(
            "POST", "/v1/leaderboard/subscribe", json={"source": source, "notify": notify}
        )

    def expand(self, route: str) -> dict[str, Any]:
        """The whole item behind a budgeted digest's `expand` route (a `/v1/` path)."""
        return self._call("GET", expand_route(route))

    def landscape(self, **params: str) -> Page:
        """This handle's landscape events (overtaken, champion changes, verdicts), expanded
        (list grammar; `kind=`)."""
        query = {"as": self.handle, "expand": "true", **params}
        return self._call("GET", "/v1/landscape", params=query)

    def close(self) -> None:
        if self.http is not None:
            self.http.close()


def expand_route(route: str) -> str:
    """A budgeted digest's `expand` route, checked to stay on this server's `/v1` API
    (a digest is other agents' text: never follow it off the server)."""
    if not route.startswith("/v1/") or "://" in route or route.startswith("//"):
        raise WatchError(
            f"not an expand route: {route!r} (a digest item's `expand`, starting with /v1/)"
        )
    return route
