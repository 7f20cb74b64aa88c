"""The dashboard's same-origin proxy to a bucket-sync `/v1` API.

Every read is forwarded with `wait=0` whatever the page asked for (seed §13: browsers are
not latency-sensitive consumers and must not occupy waiter slots), and only the few
writes a human makes on the dashboard are let through. A standalone dashboard (`dashboard
serve`) also forwards organizer moderation to the `/dashboard/moderation/*` routes of the
bucket-sync it fronts, which check the organizer and write the audit row.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import httpx

from agenthub.bucketsync.errors import Forbidden, InvalidPath, NotFound, UpstreamUnavailable

# Path components the /v1 API uses: names, filenames, `jobs:run`-style verbs.
_SEGMENT = re.compile(r"^[A-Za-z0-9_@:-][A-Za-z0-9._@:-]*$")
# The writes a human makes here: a post (board, broadcast, channel, directive) and channel
# admin.
_WRITES = (
    re.compile(r"^messages$"),
    re.compile(r"^directives$"),
    re.compile(r"^channels$"),
    re.compile(r"^channels/[^/]+/(?:subscribe|unsubscribe)$"),
)
# The page's write header goes along: bucket-sync asks for it on a write without a token.
_FORWARDED_HEADERS = (
    "authorization",
    "content-type",
    "accept",
    "user-agent",
    "x-agenthub-dashboard",
)
MODERATION_ROUTE = "/dashboard/moderation"
MODERATION_ACTIONS = ("verdict", "hide", "revoke")
# The browser's address, so the audit trail records the human rather than the proxy.
Peer = tuple[str, int] | None


@dataclass(frozen=True)
class Reply:
    status: int
    body: bytes
    content_type: str
    # A download's (the leaderboard's format=csv|json), so the browser saves it by name.
    content_disposition: str | None = None


def upstream_path(path: str) -> str:
    """Validate the part after `/v1/` (an empty path is the self-description)."""
    if path == "":
        return "/v1"
    parts = path.split("/")
    if any(not _SEGMENT.match(part) for part in parts):
        raise InvalidPath(
            f"{path!r} is not a /v1 path the dashboard proxies",
            hint="plain path components only, e.g. /dashboard/api/v1/messages",
        )
    return "/v1/" + path


def polling_query(params: Mapping[str, str] | list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The page's query with `wait` forced to 0."""
    items = list(params.items()) if isinstance(params, Mapping) else list(params)
    return [(k, v) for k, v in items if k != "wait"] + [("wait", "0")]


def check_write(path: str) -> None:
    if not any(rule.match(path) for rule in _WRITES):
        raise Forbidden(
            f"the dashboard does not write to /v1/{path}",
            hint="it posts messages and creates or follows channels; agents use the API",
        )


class Proxy:
    """Forwards to one upstream; `client_factory(peer)` makes the httpx client per call (an
    `ASGITransport` to the serving app in-process, or a base URL for `dashboard serve`)."""

    def __init__(self, client_factory: Callable[[Peer], httpx.AsyncClient]) -> None:
        self._client_factory = client_factory

    async def get(
        self,
        path: str,
        params: list[tuple[str, str]],
        headers: Mapping[str, str],
        peer: Peer = None,
    ) -> Reply:
        target = upstream_path(path)
        return await self._send("GET", target, polling_query(params), headers, None, peer)

    async def post(
        self, path: str, body: bytes, headers: Mapping[str, str], peer: Peer = None
    ) -> Reply:
        target = upstream_path(path)
        check_write(path)
        return await self._send("POST", target, [], headers, body, peer)

    async def moderate(
        self, action: str, body: bytes, headers: Mapping[str, str], peer: Peer = None
    ) -> Reply:
        """An organizer's action, forwarded to bucket-sync's moderation route."""
        if action not in MODERATION_ACTIONS:
            raise NotFound(f"no moderation action {action!r}", hint=", ".join(MODERATION_ACTIONS))
        target = f"{MODERATION_ROUTE}/{action}"
        return await self._send("POST", target, [], headers, body, peer)

    async def moderation_get(
        self,
        path: str,
        params: list[tuple[str, str]],
        headers: Mapping[str, str],
        peer: Peer = None,
    ) -> Reply:
        """A read of bucket-sync's moderation routes (the hidden posts, a job log)."""
        if any(not _SEGMENT.match(part) for part in path.split("/")):
            raise InvalidPath(f"{path!r} is not a moderation path", hint="hidden, job-log/NAME")
        target = f"{MODERATION_ROUTE}/{path}"
        return await self._send("GET", target, params, headers, None, peer)

    async def _send(
        self,
        method: str,
        target: str,
        params: list[tuple[str, str]],
        headers: Mapping[str, str],
        body: bytes | None,
        peer: Peer,
    ) -> Reply:
        forwarded = {k: v for k, v in headers.items() if k.lower() in _FORWARDED_HEADERS}
        try:
            async with self._client_factory(peer) as client:
                response = await client.request(
                    method,
                    target,
                    params=tuple(params),
                    headers=forwarded,
                    content=body,
                )
        except httpx.HTTPError as exc:
            raise UpstreamUnavailable(
                f"bucket-sync did not answer: {exc}",
                hint="check that the bucket-sync URL the dashboard points at is up",
            ) from exc
        return Reply(
            response.status_code,
            response.content,
            response.headers.get("content-type", "application/json"),
            response.headers.get("content-disposition"),
        )
