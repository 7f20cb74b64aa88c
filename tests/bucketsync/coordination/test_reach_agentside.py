"""The reach forecast from an agent's side: the MCP `post_message` tool result and the
Python `WatchClient.post_message` return value, against a live server on a free port."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from mcp import ClientSession

from agenthub.bucketsync.agentside.watch import WatchClient
from tests.bucketsync.test_collab_watch import Server, server
from tests.bucketsync.test_mcp import mcp_env, payload, with_mcp

__all__ = ["server"]


def parked_count(server: Server) -> int:
    return int(server.world.client.get("/v1/healthz").json()["longpoll"]["parked"])


def test_the_mcp_post_message_result_carries_the_reach(server: Server) -> None:
    async def body(session: ClientSession) -> dict[str, Any]:
        return dict(
            payload(await session.call_tool("post_message", {"body": "@agent-2 ready to merge?"}))
        )

    posted = with_mcp(mcp_env(server), body)

    assert posted["mentions_delivered"] == ["agent-2"]
    assert posted["reach"] == {"woken": [], "next_poll": [], "unreachable": ["agent-2"]}


def test_watch_client_post_message_returns_the_reach(server: Server) -> None:
    sender = WatchClient(server.base, "agent-1", state_dir=server.state / "1", wait_s=5)
    watcher = WatchClient(server.base, "agent-2", state_dir=server.state / "2", wait_s=20)
    watcher.baseline()
    with ThreadPoolExecutor(max_workers=1) as pool:
        delivered = pool.submit(watcher.next_page, max_wait=20)
        deadline = time.monotonic() + 10
        while parked_count(server) < 1:
            assert time.monotonic() < deadline, "the watcher never parked"
            time.sleep(0.02)
        posted = sender.post_message("@agent-2 the split is frozen", type="note")
        page = delivered.result(timeout=15)
    later = sender.post_message("@agent-2 and the eval set too")

    assert posted["reach"] == {"woken": ["agent-2"], "next_poll": [], "unreachable": []}
    assert page is not None and [item["filename"] for item in page["items"]] == [posted["filename"]]
    # Its watcher answered and has not come back yet: it sees the next one at its next poll.
    assert later["reach"] == {"woken": [], "next_poll": ["agent-2"], "unreachable": []}
    sender.close()
    watcher.close()
