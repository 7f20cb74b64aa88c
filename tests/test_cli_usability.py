"""The `agenthub` command as a newcomer meets it (issue 28, point 6): a version, user
management that names its store, hints for a missing environment or a wrong URL, a quiet
follower that refuses a second one on its database, State Hub's `/messages` without the
slash, and the MCP server reporting agenthub's version."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from typer.testing import CliRunner

import agenthub
from agenthub.cli import app
from agenthub.db import make_engine
from agenthub.hubcore.followlock import AnotherFollower, sole_follower
from agenthub.statehub.app import create_app as create_statehub
from agenthub.statehub.settings import StateHubSettings
from tests.bucketsync.test_collab_watch import Server, server
from tests.bucketsync.test_mcp import mcp_env
from tests.support.databases import require_pg, temporary_pg_database
from tests.support.servers import live_server

__all__ = ["server"]

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ("ORG", "COLLAB_SLUG", "AUDIT_BUCKET", "CENTRAL_BUCKET", "BUCKETSYNC_DATA_DIR")


def invoke(args: list[str], cwd: Path, **env: str | None) -> tuple[int, str, str]:
    base: dict[str, str | None] = dict.fromkeys(CONFIG)
    base.update({"BUCKETSYNC_URL": None, "AGENT_ID": None, **env})
    old = Path.cwd()
    os.chdir(cwd)
    try:
        result = CliRunner().invoke(app, args, env=base)
    finally:
        os.chdir(old)
    return result.exit_code, result.stdout, result.stderr


def test_version_is_the_packages() -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    code, out, _err = invoke(["--version"], ROOT)
    assert code == 0 and out.strip() == f"agenthub {version}" == f"agenthub {agenthub.__version__}"


def test_users_add_list_remove_on_the_store_serve_reads(tmp_path: Path) -> None:
    (tmp_path / "var" / "bucketsync").mkdir(parents=True)
    code, token, err = invoke(["bucketsync", "users", "add", "alice", "--role", "admin"], tmp_path)
    store = tmp_path / "var" / "bucketsync" / "users.json"
    assert code == 0 and token.startswith("bst_") and str(store) in err
    assert invoke(["bucketsync", "users", "add", "bob", "--role", "contributor"], tmp_path)[0] == 0

    code, out, _err = invoke(["bucketsync", "users", "list"], tmp_path)
    assert code == 0 and out.splitlines() == ["alice\tadmin\t", "bob\tcontributor\t"]

    code, _out, err = invoke(["bucketsync", "users", "remove", "bob"], tmp_path)
    assert code == 0 and "no longer works" in err
    assert invoke(["bucketsync", "users", "list"], tmp_path)[1].splitlines() == ["alice\tadmin\t"]
    code, _out, err = invoke(["bucketsync", "users", "remove", "bob"], tmp_path)
    assert code != 0 and "does not exist" in err and "alice" in err


def test_users_add_elsewhere_refuses_to_start_a_second_store(tmp_path: Path) -> None:
    code, out, err = invoke(["bucketsync", "users", "add", "alice", "--role", "admin"], tmp_path)

    assert code != 0 and out == ""
    assert "no bucket-sync data directory" in err and "BUCKETSYNC_DATA_DIR" in err
    assert not (tmp_path / "var").exists()


def test_serve_without_its_environment_says_to_source_the_challenge_env(tmp_path: Path) -> None:
    code, _out, err = invoke(["bucketsync", "serve", "--port", "0"], tmp_path)
    assert code != 0 and "ORG" in err and ". var/challenge.env" in err


def test_unread_reads_bucketsync_url_and_agent_id(server: Server, tmp_path: Path) -> None:
    code, out, err = invoke(
        ["bucketsync", "unread"], tmp_path, BUCKETSYNC_URL=server.base, AGENT_ID="agent-1"
    )
    assert code == 0, err
    assert out.strip().endswith("unread for you (mentions: 0)")


def test_a_url_without_scheme_is_refused_with_the_fix(tmp_path: Path) -> None:
    code, _out, err = invoke(
        ["buckets", "whoami"], tmp_path, BUCKETSYNC_URL="127.0.0.1:8300", BUCKETSYNC_TOKEN="t"
    )
    assert code != 0 and "http://127.0.0.1:8300" in err
    code, _out, err = invoke(
        ["bucketsync", "unread", "--agent", "a"], tmp_path, BUCKETSYNC_URL="localhost:8300"
    )
    assert code != 0 and "http://localhost:8300" in err


def test_a_url_pointing_at_state_hub_is_named(tmp_path: Path) -> None:
    statehub = create_statehub(StateHubSettings(database_url=f"sqlite:///{tmp_path / 's.db'}"))
    with live_server(statehub) as base:
        code, _out, err = invoke(
            ["buckets", "whoami"], tmp_path, BUCKETSYNC_URL=base, BUCKETSYNC_TOKEN="t"
        )
        unread = invoke(["bucketsync", "unread", "--agent", "a"], tmp_path, BUCKETSYNC_URL=base)
    assert code != 0 and "is State Hub, not bucket-sync" in err and "8300" in err
    assert unread[0] != 0 and "is State Hub, not bucket-sync" in unread[2]


def test_state_hub_serves_messages_without_the_slash(tmp_path: Path) -> None:
    import httpx

    statehub = create_statehub(StateHubSettings(database_url=f"sqlite:///{tmp_path / 's.db'}"))
    with live_server(statehub) as base:
        sent = httpx.post(
            f"{base}/messages",
            json={"from_agent": "alice", "to_agent": "bob", "subject": "s", "body": "hi"},
        )
        listed = httpx.get(f"{base}/messages", params={"to_agent": "bob"})
    assert sent.status_code == 201 and sent.json()["body"] == "hi"
    assert listed.status_code == 200 and [m["body"] for m in listed.json()] == ["hi"]


def test_mcp_server_info_carries_agenthubs_version(server: Server) -> None:
    async def main() -> str:
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "agenthub.cli", "bucketsync", "mcp"],
            env=mcp_env(server),
        )  # fmt: skip
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            result = await session.initialize()
            return str(result.serverInfo.version)

    assert asyncio.run(main()) == agenthub.__version__


def follow(tmp_path: Path, statehub: str) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT / "src"),
        "HUBCORE_DATABASE_URL": f"sqlite:///{tmp_path / 'h.db'}",
    }
    return subprocess.Popen(
        [sys.executable, "-m", "agenthub.cli", "hubcore", "follow", "--statehub-url", statehub],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def test_follow_is_quiet_and_a_second_follower_on_its_database_is_refused(
    tmp_path: Path,
) -> None:
    statehub = create_statehub(StateHubSettings(database_url=f"sqlite:///{tmp_path / 's.db'}"))
    with live_server(statehub) as base:
        first = follow(tmp_path, base)
        try:
            assert first.stdout is not None
            assert first.stdout.readline().startswith("following ")
            second = follow(tmp_path, base)
            _out, err = second.communicate(timeout=60)
        finally:
            first.terminate()
            _first_out, first_err = first.communicate(timeout=30)
    assert second.returncode != 0
    assert "another follower is following into" in err and "hint:" in err
    assert "alembic" not in first_err.lower() and "Context impl" not in first_err


def test_an_in_memory_database_needs_no_follower_lock() -> None:
    engine = make_engine("sqlite://")
    with sole_follower(engine), sole_follower(engine):
        pass


@pytest.mark.pg
def test_on_postgresql_the_second_follower_is_refused_until_the_first_stops() -> None:
    with temporary_pg_database(require_pg()) as url:
        first, second = make_engine(url), make_engine(url)
        try:
            with sole_follower(first), pytest.raises(AnotherFollower), sole_follower(second):
                pass
            with sole_follower(second):  # released when the first stopped
                pass
        finally:
            first.dispose()
            second.dispose()


def test_challenge_init_names_the_next_commands(tmp_path: Path) -> None:
    challenge = ROOT / "examples" / "bucketsync-challenge" / "challenge.yaml"
    code, out, err = invoke(["challenge", "init", str(challenge)], tmp_path)
    assert code == 0, err
    assert "agenthub bucketsync serve" in out
    assert "agenthub bucketsync users add NAME --role" in out
