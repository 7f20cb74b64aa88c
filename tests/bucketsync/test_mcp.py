"""`agenthub bucketsync mcp`: the agent tools over MCP stdio, driven by the `mcp` client
library against a live bucket-sync on a free port."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import CallToolResult, TextContent
from typer.testing import CliRunner

from agenthub.cli import app as cli
from tests.bucketsync.test_collab_watch import Server, server

__all__ = ["server"]

SRC = Path(__file__).resolve().parents[2] / "src"


def mcp_env(server: Server, agent: str = "agent-1", **extra: str) -> dict[str, str]:
    world = server.world
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
        "BUCKETSYNC_URL": server.base,
        "AGENT_ID": agent,
        "SCRATCH_BUCKET": world.bucket(agent),
        "BUCKETSYNC_TOKEN": world.tokens[f"user-{agent}"],
        "COLLAB_WATCH_DIR": str(server.home / "watch"),
        **extra,
    }


def with_mcp(
    env: dict[str, str],
    body: Callable[[ClientSession], Awaitable[Any]],
    *,
    command: str = sys.executable,
    args: list[str] | None = None,
) -> Any:
    """Start the MCP server (by default this interpreter's `agenthub bucketsync mcp`)."""
    argv = ["-m", "agenthub.cli", "bucketsync", "mcp"] if args is None else args

    async def main() -> Any:
        params = StdioServerParameters(command=command, args=argv, env=env)
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            return await asyncio.wait_for(body(session), timeout=60)

    return asyncio.run(main())


def payload(result: CallToolResult) -> Any:
    assert not result.isError, result.content
    text = result.content[0]
    assert isinstance(text, TextContent)
    return json.loads(text.text)


def error_text(result: CallToolResult) -> str:
    assert result.isError
    text = result.content[0]
    assert isinstance(text, TextContent)
    return text.text


def test_the_agent_loop_works_through_mcp_tools(server: Server) -> None:
    world = server.world

    async def body(session: ClientSession) -> dict[str, Any]:
        names = {tool.name for tool in (await session.list_tools()).tools}
        posted = payload(
            await session.call_tool(
                "post_message", {"body": "Sieve first. @agent-2 take the odds?", "type": "idea"}
            )
        )
        mention = await asyncio.to_thread(world.raw, "agent-2", "deal @agent-1")
        inbox = payload(await session.call_tool("read_inbox", {}))
        result = payload(
            await session.call_tool(
                "promote_result",
                {
                    "fields": {
                        "score": 0.9,
                        "method": "sieve",
                        "status": "agent-run",
                        "description": "first try",
                    },
                    "notes": "ran it on the public set",
                },
            )
        )
        board = payload(await session.call_tool("leaderboard", {}))
        digest = payload(await session.call_tool("digest", {}))
        return {
            "names": names,
            "posted": posted,
            "mention": mention.json()["filename"],
            "inbox": inbox,
            "result": result,
            "board": board,
            "digest": digest,
        }

    seen = with_mcp(mcp_env(server), body)

    assert seen["names"] == {
        "digest",
        "post_message",
        "read_inbox",
        "wait_for_updates",
        "promote_result",
        "reverify_result",
        "leaderboard",
        "claim_idea",
        "list_claims",
        "pending_directives",
        "ack_directive",
        "subscribe_leaderboard",
        "landscape",
        "lineage",
        "expand",
        "phase",
        "mark_final",
        "final_leaderboard",
    }
    message = world.client.get(f"/v1/messages/{seen['posted']['filename']}").json()
    assert message["frontmatter"]["agent"] == "agent-1"  # the scratch bucket's owner
    assert message["frontmatter"]["type"] == "idea"
    assert seen["posted"]["filename"] in world.client.get("/v1/inbox/agent-2").json()["items"]
    inbox_names = [item["filename"] for item in seen["inbox"]["items"]]
    assert seen["mention"] in inbox_names
    rows = seen["board"]["rows"]
    assert [(r["agent"], r["score"]) for r in rows] == [("agent-1", 0.9)]
    assert rows[0]["filename"] == seen["result"]["filename"]
    assert isinstance(seen["digest"], dict) and seen["digest"]


def test_wait_for_updates_blocks_until_mail_arrives_then_times_out_when_idle(
    server: Server,
) -> None:
    world = server.world

    async def body(session: ClientSession) -> tuple[Any, Any, str, Any]:
        idle = payload(await session.call_tool("wait_for_updates", {"timeout_s": 0.5}))
        waiting = asyncio.create_task(session.call_tool("wait_for_updates", {"timeout_s": 30}))
        await asyncio.to_thread(server.parked)
        posted = await asyncio.to_thread(world.raw, "agent-2", "ping @agent-1")
        woke = payload(await waiting)
        again = payload(await session.call_tool("wait_for_updates", {"timeout_s": 0.5}))
        return idle, woke, posted.json()["filename"], again

    idle, woke, filename, again = with_mcp(mcp_env(server), body)

    assert idle["timed_out"] is True and idle["items"] == []
    assert woke["timed_out"] is False
    assert filename in [item["filename"] for item in woke["items"]]
    assert again["timed_out"] is True  # delivered once: the cursor moved past it


def test_identity_is_the_scratch_bucket_a_foreign_bucket_is_refused(server: Server) -> None:
    env = mcp_env(server, SCRATCH_BUCKET=server.world.bucket("agent-2"))  # agent-1's token

    async def body(session: ClientSession) -> CallToolResult:
        return await session.call_tool("post_message", {"body": "I am agent-2, honest"})

    refused = with_mcp(env, body)

    assert "writing hf://buckets/acme/chal-agent-2/" in error_text(refused)
    assert (
        server.world.client.get("/v1/messages", params={"agent": "agent-2"}).json()["items"] == []
    )


def test_a_bad_request_comes_back_as_a_tool_error_with_the_servers_hint(server: Server) -> None:
    async def body(session: ClientSession) -> tuple[CallToolResult, CallToolResult]:
        missing = await session.call_tool("promote_result", {})
        invalid = await session.call_tool(
            "promote_result", {"fields": {"score": "lots", "method": "x"}}
        )
        return missing, invalid

    missing, invalid = with_mcp(mcp_env(server), body)

    assert "give the result's frontmatter" in error_text(missing)
    assert "400: INVALID_FRONTMATTER" in error_text(invalid)
    assert "missing 'status'" in error_text(invalid)  # bucket-sync's message and hint


def test_missing_configuration_names_each_variable(monkeypatch: Any) -> None:
    for name in ("BUCKETSYNC_URL", "AGENT_ID", "SCRATCH_BUCKET"):
        monkeypatch.delenv(name, raising=False)

    result = CliRunner().invoke(cli, ["bucketsync", "mcp"])

    assert result.exit_code == 2
    for name in ("BUCKETSYNC_URL", "AGENT_ID", "SCRATCH_BUCKET"):
        assert name in result.output


def test_the_leaderboard_tool_gives_the_pareto_view(server: Server) -> None:
    world = server.world
    for n, (agent, score) in enumerate((("agent-1", 0.9), ("agent-2", 0.5))):
        text = f"---\nscore: {score}\nmethod: m\nstatus: agent-run\ndescription: d{n}\n---\n"
        assert world.put(agent, f"r{n}.md", text).status_code == 201
        source = {"source": world.uri(agent, f"r{n}.md")}
        assert world.client.post("/v1/results", json=source).status_code == 201
    fm = {"schema_version": 1, "harness": "codex", "session_id": "s-1", "tokens": {"input": 40}}
    manifest = f"---\n{json.dumps(fm)}\n---\nsummary\n"
    assert world.put("agent-2", "traces/s-1/manifest.md", manifest).status_code == 201
    shared = {"source": world.uri("agent-2", "traces/s-1/")}
    assert world.client.post("/v1/traces", json=shared).status_code == 201

    async def body(session: ClientSession) -> tuple[Any, CallToolResult]:
        front = payload(
            await session.call_tool("leaderboard", {"view": "pareto", "cost": "tokens"})
        )
        wrong = await session.call_tool("leaderboard", {"view": "best"})
        return front, wrong

    front, wrong = with_mcp(mcp_env(server), body)

    assert front["view"] == "pareto" and front["cost_axes"] == ["tokens"]
    assert [(r["agent"], r["cost"]["tokens"]) for r in front["rows"]] == [("agent-2", 40)]
    assert [r["agent"] for r in front["unknown_cost"]] == ["agent-1"]  # no trace: unknown
    assert "400: INVALID_QUERY" in error_text(wrong)


def test_a_result_promoted_with_builds_on_shows_in_the_lineage_tool(server: Server) -> None:
    world = server.world
    text = "---\nscore: 0.5\nmethod: m\nstatus: agent-run\ndescription: d\n---\n"
    assert world.put("agent-2", "base.md", text).status_code == 201
    base = world.client.post("/v1/results", json={"source": world.uri("agent-2", "base.md")})
    assert base.status_code == 201
    parent = base.json()["filename"]

    async def body(session: ClientSession) -> tuple[Any, Any, CallToolResult]:
        fields = {"score": 0.9, "method": "m2", "status": "agent-run", "description": "d2"}
        child = payload(
            await session.call_tool("promote_result", {"fields": {**fields, "builds_on": [parent]}})
        )
        graph = payload(await session.call_tool("lineage", {"name": parent}))
        missing = await session.call_tool("lineage", {"name": "20200101-000000-000_x.md"})
        return child, graph, missing

    child, graph, missing = with_mcp(mcp_env(server), body)

    assert [d["name"] for d in graph["descendants"]] == [child["filename"]]
    assert graph["credit"] == {"credit": 1, "built_on_by": 1}
    assert "404: NOT_FOUND" in error_text(missing)


def test_the_author_sees_its_withheld_method_through_the_tools(server: Server) -> None:
    world = server.world
    world.hub.settings.result_embargo_hours = 2

    async def body(session: ClientSession) -> Any:
        fields = {"score": 0.9, "method": "secret-sieve", "status": "agent-run", "description": "d"}
        payload(await session.call_tool("promote_result", {"fields": fields}))
        return payload(await session.call_tool("leaderboard", {}))

    mine = with_mcp(mcp_env(server), body)
    theirs = world.client.get("/v1/leaderboard").json()

    assert [r["method"] for r in mine["rows"]] == ["secret-sieve"]
    assert [r["method"] for r in theirs["rows"]] == [None]
