"""The phase tools over MCP stdio, against a live bucket-sync without phases: the tools
reach their routes and say what those answer."""

from __future__ import annotations

from typing import Any

from mcp import ClientSession

from tests.bucketsync.phases.conftest import RESULT
from tests.bucketsync.test_collab_watch import Server, server
from tests.bucketsync.test_mcp import error_text, mcp_env, payload, with_mcp

__all__ = ["server"]


def test_phase_tools_answer_as_their_routes_do(server: Server) -> None:
    world = server.world
    world.put("agent-1", "results/r.md", RESULT)
    filename = world.client.post(
        "/v1/results", json={"source": world.uri("agent-1", "results/r.md")}
    ).json()["filename"]

    async def body(session: ClientSession) -> tuple[Any, Any, str]:
        phase = payload(await session.call_tool("phase", {}))
        final = payload(await session.call_tool("final_leaderboard", {}))
        marked = await session.call_tool("mark_final", {"filename": filename})
        return phase, final, error_text(marked)

    phase, final, refused = with_mcp(mcp_env(server), body)

    assert phase == {"phase": None}
    assert final["status"] == "sealed" and final["rows"] == []
    assert "PHASE_CLOSED" in refused and "no phases" in refused
