"""`/ports/projections/statehub-inbox`: the authenticated, read-only inbox pilot."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Header, Query, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from agenthub.hubcore.api.errors import documented
from agenthub.hubcore.auth import OperatorToken
from agenthub.hubcore.canonical import canonical_timestamp
from agenthub.hubcore.errors import MethodNotAllowed, ReadsDisabled
from agenthub.hubcore.freshness import Freshness
from agenthub.hubcore.projection import DEFAULT_LIMIT, MAX_LIMIT, InboxProjection, InboxQuery
from agenthub.hubcore.schemas import SLUG_SCHEMA, MessageRead
from agenthub.statehub.api.bodies import json_response, messages_json

PATH = "/ports/projections/statehub-inbox"
MODE_HEADER = "X-Hub-Core-Read-Mode"

router = APIRouter(tags=["projections"])


# The dependencies are `async def`: they only compare values, and a sync dependency
# costs a threadpool hop of its own. The route returns its body encoded once (the
# bytes State Hub's own list route sends), in one threadpool hop with the read.


async def require_enabled(request: Request) -> None:
    if request.app.state.projection is None:
        raise ReadsDisabled(
            "not found", hint="the inbox pilot is off (HUB_CORE_STATEHUB_INBOX_READS is not 1)"
        )


async def require_operator(
    request: Request, authorization: Annotated[str | None, Header()] = None
) -> None:
    token: OperatorToken = request.app.state.operator_token
    token.verify(authorization)


def projection(request: Request) -> InboxProjection:
    service: InboxProjection = request.app.state.projection
    return service


def _freshness_headers(fresh: Freshness) -> dict[str, str]:
    headers = {"Cache-Control": "no-store", MODE_HEADER: fresh.mode}
    if fresh.source_instance is not None:
        headers["X-Hub-Core-Source-Instance"] = fresh.source_instance
    if fresh.source_time is not None:
        headers["X-Hub-Core-Source-Time"] = canonical_timestamp(fresh.source_time, "source_time")
    if fresh.lag_seconds is not None:
        headers["X-Hub-Core-Lag-Seconds"] = f"{fresh.lag_seconds:.3f}"
    return headers


@router.get(
    PATH,
    response_model=list[MessageRead],
    dependencies=[Depends(require_enabled), Depends(require_operator)],
    responses=documented(401, 403, 404),
)
async def statehub_inbox(
    request: Request,
    to_agent: Annotated[str, Query(json_schema_extra=SLUG_SCHEMA)],
    from_agent: Annotated[str | None, Query(json_schema_extra=SLUG_SCHEMA)] = None,
    unread_only: bool = False,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = DEFAULT_LIMIT,
    peek: Annotated[
        bool,
        Query(
            description=(
                "State Hub's `peek`: return the unread set without stamping "
                "`delivered_at`. The projection never writes, so every read here is a "
                "peek; the parameter is accepted so a poller can send the same query "
                "to either service."
            )
        ),
    ] = False,
) -> Response:
    service = projection(request)
    query = InboxQuery(
        to_agent=to_agent, from_agent=from_agent, unread_only=unread_only, limit=limit
    )

    def read() -> tuple[bytes, Freshness]:
        page = service.list(query)
        return messages_json(page.messages), page.freshness

    body, fresh = await run_in_threadpool(read)
    response = json_response(body)
    response.headers.update(_freshness_headers(fresh))
    return response


@router.api_route(
    PATH,
    methods=["POST", "PUT", "PATCH", "DELETE"],
    dependencies=[Depends(require_enabled)],
    include_in_schema=False,
)
def no_writes() -> None:
    raise MethodNotAllowed(
        "the inbox projection is read-only",
        hint="send, read, ack and archive through State Hub; hub-core never writes messages",
    )
