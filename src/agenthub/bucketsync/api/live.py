"""`/v1/*` routes of the live half (seed §11-§13): channels, the watched reads (`wait=`),
`/v1/updates`, `/v1/watching` and `/v1/watch.sh`.

Watched reads are `async` and park on the loop. Their reads are tried on the loop first,
from the read model's caches only (`cached_only`); a read that needs the bucket goes to the
threadpool instead. A broadcast wakes every waiter at once: answering the cached ones
without a thread hop each is most of what keeps that wake cheap.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from fastapi import APIRouter, Header, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, ConfigDict

from agenthub.bucketsync.api.answers import json_answer
from agenthub.bucketsync.api.openapi import ERRORS, served_as
from agenthub.bucketsync.api.routes import caller_info, hub_of
from agenthub.bucketsync.board import read as board
from agenthub.bucketsync.channels import read as channelviews
from agenthub.bucketsync.channels import write as channels
from agenthub.bucketsync.core import access
from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.core.readmodel import NotCached, cached_only
from agenthub.bucketsync.errors import InvalidQuery, NotFound, StorageUnavailable
from agenthub.bucketsync.live import updates

router = APIRouter(prefix="/v1", responses=ERRORS)
logger = logging.getLogger(__name__)

T = TypeVar("T")

CLIENT_SCRIPT = "collab_watch.sh"
_PACKAGED_CLIENTS = Path(__file__).resolve().parent.parent / "clients"


def parse_wait(hub: Hub, params: dict[str, str]) -> float:
    """`wait` clamped to [0, LONGPOLL_MAX_WAIT_S], never rejected for its range (BS-13.2);
    `wait>0` with `before` is the one grammar guard (a backward page never gains items)."""
    raw = params.get("wait")
    if raw is None or raw == "":
        return 0.0
    try:
        value = float(raw)
    except ValueError:
        raise InvalidQuery(
            f"wait={raw!r} is not a number", hint="wait=<seconds>, e.g. wait=55"
        ) from None
    if not math.isfinite(value):
        value = 0.0 if value < 0 or math.isnan(value) else math.inf
    assert hub.longpoll is not None
    wait = hub.longpoll.clamp(value)
    if wait > 0 and params.get("before"):
        raise InvalidQuery(
            "wait cannot be combined with before: a backward page never gains items",
            hint="long-poll forward with after=<cursor>",
        )
    return wait


async def watched(
    request: Request,
    *,
    owner: str,
    mode: str,
    prepare: Callable[[], list[str]],
    read: Callable[[], dict[str, Any]],
) -> Response:
    """A read that may park: `prepare()` validates the handle (404 before any slot or
    presence stamp) and returns the wake keys; `read()` is the plain poll. The page is
    sent as JSON by the route itself (`api.answers`)."""
    hub = hub_of(request)
    wait = parse_wait(hub, dict(request.query_params))
    longpoll = hub.longpoll
    assert longpoll is not None

    async def keys() -> list[str]:
        return await cached_or_threaded(prepare)

    async def check() -> dict[str, Any]:
        return await cached_or_threaded(read)

    work = longpoll.read(owner=owner, mode=mode, wait_s=wait, prepare=keys, check=check)
    if wait <= 0:
        return json_answer(await work)
    # The watch runs in this request's own task, so a woken waiter re-reads and sends its
    # page in one step: a broadcast's answers go out one by one as each is read, not all
    # after all the reads (as when the watch was a task of its own, a hop away from here).
    task = asyncio.current_task()
    assert task is not None
    gone = asyncio.create_task(_hang_up(request, task))
    try:
        page = await work
    except asyncio.CancelledError:
        if not gone.done() or gone.cancelled():
            raise  # not the hang-up's cancellation: let it run its course
        # The client left: the watch's `finally` freed its slot on the way out.
        task.uncancel()
        # Hanging up on a long-poll is what clients do; nobody reads this answer.
        logger.debug("%s long-poll for %s: the client hung up", mode, owner)
        return json_answer({"count": 0, "matched": 0, "items": [], "next": None, "cursor": None})
    finally:
        gone.cancel()
    return json_answer(page)


async def cached_or_threaded(read: Callable[[], T]) -> T:
    """`read()` on the loop if the read model's caches answer it, else in the threadpool.
    A read is side-effect free, so one that stopped at `NotCached` simply runs again."""
    try:
        with cached_only():
            return read()
    except NotCached:
        return await run_in_threadpool(read)


async def _hang_up(request: Request, task: asyncio.Task[Any]) -> None:
    """Cancel `task` (a watched read's request) when its client disconnects: that frees
    its slot now rather than at the end of its budget."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            task.cancel()
            return


@router.get("/inbox/{handle}", response_model=dict[str, Any])
async def inbox(handle: str, request: Request) -> Response:
    hub = hub_of(request)
    params = dict(request.query_params)

    def prepare() -> list[str]:
        access.require_handle(hub, handle)
        return [f"inbox:{handle}"]

    # Parsed at the first read (a bad query is a 400 after the handle's 404), once.
    query = functools.cache(lambda: board.parse_query(hub, params))
    return await watched(
        request,
        owner=handle,
        mode="inbox",
        prepare=prepare,
        read=lambda: board.inbox_page(hub, handle, query()),
    )


@router.get("/updates", response_model=dict[str, Any])
async def get_updates(request: Request, as_: str = Query(..., alias="as")) -> Response:
    hub = hub_of(request)
    params = dict(request.query_params)
    return await watched(
        request,
        owner=as_,
        mode="updates",
        prepare=lambda: updates.stream(hub, as_).keys,
        read=lambda: updates.updates(hub, as_, params),
    )


@router.get("/channels/feed", response_model=dict[str, Any])
async def channel_feed(request: Request, as_: str = Query(..., alias="as")) -> Response:
    hub = hub_of(request)
    params = dict(request.query_params)

    def prepare() -> list[str]:
        access.require_handle(hub, as_)
        return [f"channel:{name}" for name in channels.subscriptions(hub, as_)]

    return await watched(
        request,
        owner=as_,
        mode="feed",
        prepare=prepare,
        read=lambda: channelviews.feed(hub, as_, params),
    )


@router.get("/watching")
def watching(request: Request) -> dict[str, Any]:
    """Presence for every handle, for dashboards: O(waiters) under one lock, no bucket."""
    hub = hub_of(request)
    assert hub.longpoll is not None
    registry = hub.longpoll.registry
    return {
        "max_wait_s": hub.longpoll.max_wait_s,
        "fresh_s": hub.settings.watch_fresh_s,
        "watching": registry.watching(hub.settings.watch_fresh_s),
        "longpoll": registry.stats(),
    }


@router.get("/watch.sh", responses=served_as("text/x-shellscript"))
def watch_script(request: Request) -> Response:
    """The official client, read off disk on every request (a redeploy ships a new one)."""
    hub = hub_of(request)
    path = (hub.settings.clients_dir or _PACKAGED_CLIENTS) / CLIENT_SCRIPT
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise NotFound(
            f"{CLIENT_SCRIPT} is not installed on this server",
            hint="set BUCKETSYNC_CLIENTS_DIR to the directory holding it",
        ) from None
    except OSError as exc:
        raise StorageUnavailable(f"could not read {CLIENT_SCRIPT}: {exc}") from exc
    return Response(content=data, media_type="text/x-shellscript")


# -- channels -------------------------------------------------------------------------------
class ChannelBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    agent_id: str | None = None
    body: str | None = None
    source: str | None = None


class SubscribeBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    source: str | None = None
    agent_id: str | None = None
    notify: str | None = None


@router.post("/channels", status_code=201)
def create_channel(
    body: ChannelBody,
    request: Request,
    response: Response,
    authorization: str | None = Header(None),
) -> dict[str, Any]:
    status, result = channels.create(
        hub_of(request),
        name=body.name,
        agent_id=body.agent_id,
        body=body.body,
        source=body.source,
        authorization=authorization,
        caller_info=caller_info(request),
    )
    response.status_code = status
    return result


@router.get("/channels")
def list_channels(request: Request) -> dict[str, Any]:
    return channelviews.list_channels(hub_of(request), dict(request.query_params))


@router.get("/channels/{name}")
def channel_detail(name: str, request: Request) -> dict[str, Any]:
    return channelviews.detail(hub_of(request), name)


@router.get("/channels/{name}/messages")
def channel_messages(name: str, request: Request) -> dict[str, Any]:
    return channelviews.channel_messages(hub_of(request), name, dict(request.query_params))


@router.get("/channels/{name}/messages/{filename}")
def channel_message(name: str, filename: str, request: Request) -> dict[str, Any]:
    return channelviews.channel_message(hub_of(request), name, filename)


@router.post("/channels/{name}/subscribe")
def subscribe(
    name: str,
    body: SubscribeBody,
    request: Request,
    authorization: str | None = Header(None),
) -> dict[str, Any]:
    return channels.subscribe(
        hub_of(request),
        name,
        source=body.source,
        agent_id=body.agent_id,
        notify=body.notify,
        authorization=authorization,
        caller_info=caller_info(request),
    )


@router.post("/channels/{name}/unsubscribe")
def unsubscribe(
    name: str,
    body: SubscribeBody,
    request: Request,
    authorization: str | None = Header(None),
) -> dict[str, Any]:
    if body.notify is not None:
        raise InvalidQuery("unsubscribe takes no notify level", hint="drop notify")
    return channels.unsubscribe(
        hub_of(request),
        name,
        source=body.source,
        agent_id=body.agent_id,
        authorization=authorization,
        caller_info=caller_info(request),
    )
