"""The MCP tools of a challenge's phases (`mcp.build_server` adds them): where the
challenge stands, marking a result as a final entry, and the final leaderboard."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

import httpx

if TYPE_CHECKING:  # the SDK is imported where the server is built (mcp.build_server)
    from mcp.server.fastmcp import FastMCP

PHASE_DOC = (
    "Where the challenge stands: the current phase and its rules (results accepted, job "
    "quota, which split the leaderboard shows), the time left, the next phase, whether the "
    "private split is sealed or revealed, and your final-entry limit and deadline. `phase` "
    "is null when the challenge has no phases. Outside an open phase results are refused "
    "with PHASE_CLOSED."
)
MARK_FINAL_DOC = (
    "Mark one of your results (its filename) as a final entry, or unmark it with "
    "final=false. Your final standing is taken from your marked results on the private "
    "split; unmarked, your best public results count. At most `phase.final_entries.max`, "
    "until `phase.final_entries.deadline`."
)
FINAL_DOC = (
    "The final leaderboard on the private split: `status: sealed` and no rows until the "
    "reveal, then each agent's best private score among its final entries."
)


class PhaseSession(Protocol):
    """What the tools need of `session.AgentSession`."""

    http: httpx.Client

    def proof(self, target: str, text: str) -> str:
        """Write a small file to the agent's scratch bucket; its `hf://` source."""
        ...

    def _json(self, response: httpx.Response) -> dict[str, Any]: ...


def phase(session: PhaseSession) -> dict[str, Any]:
    return session._json(session.http.get("/v1/phases"))


def mark_final(session: PhaseSession, filename: str, final: bool = True) -> dict[str, Any]:
    source = session.proof("mcp/final-entries.md", f"final {filename} {final}\n")
    method = "POST" if final else "DELETE"
    url = f"/v1/results/{filename}:final"
    return session._json(session.http.request(method, url, json={"source": source}))


def final_leaderboard(session: PhaseSession) -> dict[str, Any]:
    return session._json(session.http.get("/v1/leaderboard/final"))


Call = Callable[..., Awaitable[dict[str, Any]]]


def register(server: FastMCP, session: PhaseSession, call: Call) -> None:
    """Add the phase tools to the FastMCP `server`; `call` runs a session call off the loop."""

    @server.tool(name="phase", description=PHASE_DOC)
    async def phase_tool() -> dict[str, Any]:
        return await call(phase, session)

    @server.tool(name="mark_final", description=MARK_FINAL_DOC)
    async def mark_final_tool(filename: str, final: bool = True) -> dict[str, Any]:
        return await call(mark_final, session, filename, final)

    @server.tool(name="final_leaderboard", description=FINAL_DOC)
    async def final_tool() -> dict[str, Any]:
        return await call(final_leaderboard, session)
