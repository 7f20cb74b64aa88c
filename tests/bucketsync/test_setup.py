"""`GET /v1/setup` (a harness's setup in one call), the unread hook it configures,
`/llms.txt`, and `api_version`/`feature_level` on `GET /v1` (kept in CHANGELOG.md)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession

from agenthub.bucketsync.agentside.watch import WatchClient
from tests.bucketsync.conftest import World
from tests.bucketsync.test_collab_watch import Server, server
from tests.bucketsync.test_mcp import SRC, payload, with_mcp

__all__ = ["server"]

CHANGELOG = Path(__file__).resolve().parents[2] / "CHANGELOG.md"
HARNESSES = ["claude-code", "codex", "gemini", "generic"]


def get_setup(server: Server, harness: str, agent: str = "agent-1", **headers: str) -> Any:
    response = server.world.client.get(
        "/v1/setup", params={"harness": harness, "agent_id": agent}, headers=headers
    )
    assert response.status_code == 200, response.text
    return response.json()


def bearer(server: Server, agent: str = "agent-1") -> dict[str, str]:
    return {"Authorization": f"Bearer {server.world.tokens[f'user-{agent}']}"}


def mcp_server_of(recipe: dict[str, Any]) -> dict[str, Any]:
    """The MCP server entry, read back out of the snippet in the harness's own format."""
    mcp = recipe["mcp"]
    if mcp["format"] == "toml":
        entry: dict[str, Any] = tomllib.loads(mcp["snippet"])["mcp_servers"][mcp["name"]]
    else:
        entry = json.loads(mcp["snippet"])["mcpServers"][mcp["name"]]
    assert entry == mcp["server"]
    return entry


def run_env(server: Server) -> dict[str, str]:
    """The agent's machine: this checkout on the path, its own HOME and watch state."""
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
        "HOME": str(server.home),
        "COLLAB_WATCH_DIR": str(server.state),
    }


@pytest.mark.parametrize("harness", HARNESSES)
def test_each_harness_config_starts_the_mcp_server_and_digest_works(
    server: Server, harness: str
) -> None:
    recipe = get_setup(server, harness, **bearer(server))
    entry = mcp_server_of(recipe)
    assert entry["env"] == {
        "BUCKETSYNC_URL": server.base,
        "AGENT_ID": "agent-1",
        "SCRATCH_BUCKET": server.world.bucket("agent-1"),
        "BUCKETSYNC_TOKEN": server.world.tokens["user-agent-1"],
    }
    assert recipe["needs"] == []
    mention = server.world.raw("agent-2", "hello @agent-1").json()["filename"]

    async def body(session: ClientSession) -> Any:
        return payload(await session.call_tool("digest", {}))

    digest = with_mcp(
        {**run_env(server), **entry["env"]}, body, command=entry["command"], args=entry["args"]
    )
    assert digest["updates"]["unread"] >= 1
    assert mention in json.dumps(digest)


def test_claude_code_gets_settings_hooks_and_the_others_instructions(server: Server) -> None:
    claude = get_setup(server, "claude-code")["hooks"]
    settings = json.loads(claude["snippet"])
    for event in ("SessionStart", "UserPromptSubmit"):
        [group] = settings["hooks"][event]
        assert group["hooks"] == [{"type": "command", "command": claude["command"]}]
    assert (claude["kind"], claude["file"]) == ("settings", ".claude/settings.json")
    for harness, file in (("codex", "AGENTS.md"), ("gemini", "GEMINI.md")):
        hooks = get_setup(server, harness)["hooks"]
        assert (hooks["kind"], hooks["file"]) == ("instructions", file)
        assert hooks["command"] == claude["command"] and hooks["command"] in hooks["snippet"]


def test_without_a_bearer_the_token_is_named_as_needed_not_invented(server: Server) -> None:
    recipe = get_setup(server, "generic")
    assert "BUCKETSYNC_TOKEN" not in recipe["mcp"]["server"]["env"]
    assert [need.split(":")[0] for need in recipe["needs"]] == ["BUCKETSYNC_TOKEN"]


def test_the_hook_prints_one_line_of_counts_after_the_watch_cursor(server: Server) -> None:
    world: World = server.world
    hook = shlex.split(get_setup(server, "claude-code")["hooks"]["command"])
    secret = "the body must never reach the hook"

    def line() -> str:
        done = subprocess.run(hook, env=run_env(server), capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        return done.stdout

    # Baseline the cursor where the watcher would (nothing is pending yet).
    watcher = WatchClient(server.base, "agent-1", state_dir=server.state)
    watcher.baseline()
    assert line() == "0 unread for you (mentions: 0)\n"

    world.raw("agent-2", f"@agent-1 {secret}")
    world.raw("agent-2", f"and again @agent-1 {secret}")
    world.user("boss", role="admin", email="boss@example.org")
    sent = world.client.post(
        "/v1/messages",
        json={"agent_id": "human-boss", "body": f"to everyone: {secret}", "broadcast": True},
        headers=world.auth("boss"),
    )
    assert sent.status_code == 201, sent.text
    shown = line()
    assert shown == "3 unread for you (mentions: 2)\n"
    assert secret not in shown

    page = watcher.next_page(max_wait=5)
    assert page is not None
    watcher.ack(page)
    assert line() == "0 unread for you (mentions: 0)\n"


def test_a_bad_harness_or_agent_id_is_refused_with_a_hint(server: Server) -> None:
    client = server.world.client
    bad = client.get("/v1/setup", params={"harness": "vim", "agent_id": "agent-1"})
    assert bad.status_code == 400
    assert "claude-code|codex|gemini|generic" in bad.json()["error"]["hint"]
    assert client.get("/v1/setup", params={"harness": "codex", "agent_id": "A!"}).status_code == 400


def test_get_v1_reports_the_feature_level_the_changelog_ends_at(server: Server) -> None:
    described = server.world.client.get("/v1").json()
    levels = [int(n) for n in re.findall(r"^### Feature level (\d+)$", CHANGELOG.read_text(), re.M)]
    assert described["api_version"] == "1"
    assert levels == sorted(levels, reverse=True) == list(range(max(levels), 0, -1))
    assert described["feature_level"] == max(levels)


def test_llms_txt_summarises_the_api_with_working_links(server: Server) -> None:
    client = server.world.client
    response = client.get("/llms.txt")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/markdown")
    text = response.text
    assert text.startswith("# bucket-sync")
    assert "cursor" in text.lower() and "after=" in text
    links = re.findall(r"\]\((http[^)]+)\)", text)
    assert f"{server.base}/v1/setup?harness=generic&agent_id=my-agent" in links
    for link in links:
        assert client.get(link).status_code == 200, link
