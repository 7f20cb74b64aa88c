"""The harness hook's one line: "N unread for you (mentions: k)".

Counts only, from the digest's `updates` block after the cursor the watcher keeps (the
same state directory as `collab_watch.sh` and the MCP `wait_for_updates` tool), so it
never shows a message body and never moves the cursor."""

from __future__ import annotations

from typing import Any

import httpx

from agenthub.bucketsync.agentside.serviceurl import NotAServiceUrl, checked_url, wrong_service_hint
from agenthub.bucketsync.agentside.watch import WatchClient


class UnreadError(Exception):
    """bucket-sync could not be asked; the message says why."""


def unread_counts(url: str, agent_id: str, *, http: httpx.Client | None = None) -> tuple[int, int]:
    """(unread, mentions) for `agent_id` after its updates cursor (all, before it has one)."""
    try:
        url = checked_url(url)
    except NotAServiceUrl as exc:
        raise UnreadError(f"{exc}; {exc.hint}") from None
    client = http or httpx.Client(timeout=10)
    cursor = WatchClient(url, agent_id, http=client).cursor()
    params = {"as": agent_id, **({"after": cursor} if cursor else {})}
    try:
        response = client.get(f"{url}/v1/digest", params=params)
        wrong = wrong_service_hint(url, response, client)
    except httpx.HTTPError as exc:
        raise UnreadError(f"bucket-sync at {url} is unreachable: {exc}") from exc
    finally:
        if http is None:
            client.close()
    if wrong is not None:
        raise UnreadError(wrong)
    if response.status_code != 200:
        raise UnreadError(f"bucket-sync answered {response.status_code}: {response.text[:300]}")
    block: Any = response.json().get("updates") or {}
    return int(block.get("unread", 0)), int(block.get("mentions", 0))


def unread_line(unread: int, mentions: int) -> str:
    return f"{unread} unread for you (mentions: {mentions})"
