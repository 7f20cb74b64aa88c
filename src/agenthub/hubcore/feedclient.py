"""Where the follower reads State Hub's change feed from: a small `FeedSource` protocol.

* `HttpFeedSource`: the real adapter, `GET /messages/feed` and the paged
  `GET /messages/feed/snapshot` over httpx against `HUBCORE_STATEHUB_URL`;
* `InProcessFeedSource`: the local one, State Hub's own feed service called in
  the same process (embedded runs, and tests that need no HTTP round trip).

Both translate the source's refusals into hub-core's error tree: a 409/410
`resnapshot_required` becomes `ResnapshotRequired`, anything else unexpected
`SourceUnavailable`. Pages are returned as the plain dicts State Hub serves.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

import httpx
import orjson

from agenthub.hubcore.errors import ResnapshotRequired, SourceUnavailable
from agenthub.statehub.api.errors import error_body, status_of
from agenthub.statehub.errors import StateHubError
from agenthub.statehub.feed import FeedService
from agenthub.statehub.snapshot import PagedSnapshots

# The request may park on the server for `wait` seconds; allow that plus slack.
HTTP_SLACK_S = 15.0


class FeedSource(Protocol):
    async def page(
        self,
        after: str,
        *,
        limit: int,
        wait: float,
        source_instance: str | None,
        source_epoch: str | None,
    ) -> dict[str, Any]:
        """One feed page after `after` (long-polling up to `wait` seconds while empty)."""
        ...

    async def snapshot_page(self, *, page_size: int, token: str | None) -> dict[str, Any]:
        """The first page of a new paged snapshot (`token=None`) or the page `token` names."""
        ...

    async def aclose(self) -> None: ...


def _refusal(status: int, body: Any) -> ResnapshotRequired | SourceUnavailable:
    detail = body.get("detail") if isinstance(body, dict) else None
    if status in (409, 410) and isinstance(body, dict) and body.get("resnapshot_required"):
        return ResnapshotRequired(
            f"State Hub answered {status}: {detail}",
            gone=status == 410,
            hint="the follower re-snapshots by itself; nothing to do unless it keeps failing",
        )
    return SourceUnavailable(
        f"State Hub answered {status}: {detail or str(body)[:200]}",
        hint="check HUBCORE_STATEHUB_URL points at a State Hub serving statehub.inbox-feed.v1",
    )


class HttpFeedSource:
    """State Hub's feed over HTTP. Owns its client unless one is passed in."""

    def __init__(self, base_url: str, *, client: httpx.AsyncClient | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self._own = client is None
        self._client = client or httpx.AsyncClient(
            base_url=self.base_url, timeout=httpx.Timeout(30.0, read=None)
        )

    async def _get(
        self, path: str, params: dict[str, Any], timeout: float, *, fast: bool = False
    ) -> dict[str, Any]:
        try:
            response = await self._client.get(path, params=params, timeout=timeout)
        except httpx.HTTPError as exc:
            raise SourceUnavailable(
                f"cannot reach State Hub at {self.base_url}: {type(exc).__name__} {exc}",
                hint="is State Hub running, and is HUBCORE_STATEHUB_URL right?",
            ) from exc
        try:
            # orjson parses a 5000-row snapshot page in a fraction of json's time; it
            # reads an integer beyond 64 bits as a float, which the snapshot's row
            # checks refuse anyway, so feed pages keep json's exact integers.
            body = orjson.loads(response.content) if fast else response.json()
        except ValueError:
            body = response.text
        if response.status_code != 200 or not isinstance(body, dict):
            raise _refusal(response.status_code, body)
        return body

    async def page(
        self,
        after: str,
        *,
        limit: int,
        wait: float,
        source_instance: str | None,
        source_epoch: str | None,
    ) -> dict[str, Any]:
        params: dict[str, Any] = {"after": after, "limit": limit}
        if wait > 0:
            params["wait"] = wait
        if source_instance is not None:
            params["source_instance"] = source_instance
        if source_epoch is not None:
            params["source_epoch"] = source_epoch
        return await self._get("/messages/feed", params, wait + HTTP_SLACK_S)

    async def snapshot_page(self, *, page_size: int, token: str | None) -> dict[str, Any]:
        params: dict[str, Any] = {"page_size": page_size}
        if token is not None:
            params["page"] = token
        return await self._get("/messages/feed/snapshot", params, 300.0, fast=True)

    async def aclose(self) -> None:
        if self._own:
            await self._client.aclose()


class InProcessFeedSource:
    """State Hub's feed service called directly (same process, no HTTP).

    While a page would be empty it re-reads every `poll_s` until `wait` runs out
    (State Hub's wake lives in its server's event loop, which this does not use).
    """

    def __init__(self, feed: FeedService, paged: PagedSnapshots, *, poll_s: float = 0.02) -> None:
        self.feed = feed
        self.paged = paged
        self.poll_s = poll_s

    async def _call(self, fn: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        try:
            result: dict[str, Any] = await asyncio.to_thread(fn, *args, **kwargs)
        except StateHubError as exc:
            raise _refusal(status_of(exc), error_body(exc)) from exc
        return result

    async def page(
        self,
        after: str,
        *,
        limit: int,
        wait: float,
        source_instance: str | None,
        source_epoch: str | None,
    ) -> dict[str, Any]:
        deadline = asyncio.get_running_loop().time() + wait
        while True:
            page = await self._call(
                self.feed.page,
                after,
                limit,
                source_instance=source_instance,
                source_epoch=source_epoch,
            )
            remaining = deadline - asyncio.get_running_loop().time()
            if page["changes"] or remaining <= 0:
                return page
            await asyncio.sleep(min(self.poll_s, remaining))

    async def snapshot_page(self, *, page_size: int, token: str | None) -> dict[str, Any]:
        if token is None:
            return await self._call(self.paged.first_page, page_size)
        return await self._call(self.paged.next_page, token, page_size)

    async def aclose(self) -> None:
        self.paged.close_all()
