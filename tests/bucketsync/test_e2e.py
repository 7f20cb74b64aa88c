"""End to end: a real bucket-sync server on loopback, driven by the organizer and agent CLIs
and plain HTTP, exactly as an agent on a laptop would."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn
from typer.testing import CliRunner

from agenthub.bucketsync.app import create_app
from agenthub.cli import app as cli
from tests.bucketsync.conftest import make_settings

ENV = {"ORG": "acme", "COLLAB_SLUG": "chal", "AUDIT_BUCKET": "acme-admin/chal-audit"}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    data_dir = tmp_path / "data"
    application = create_app(make_settings(data_dir))
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(application, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.started
    try:
        yield f"http://127.0.0.1:{port}", data_dir
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def run(args: list[str], env: dict[str, str]) -> str:
    result = CliRunner().invoke(cli, args, env=env)
    assert result.exit_code == 0, result.output
    return result.stdout.strip()


def test_two_agents_register_post_mention_and_read_inboxes(
    server: tuple[str, Path], tmp_path: Path
) -> None:
    url, data_dir = server
    organizer_env = {**ENV, "BUCKETSYNC_DATA_DIR": str(data_dir)}
    tokens = {
        user: run(["bucketsync", "users", "add", user, "--role", "contributor"], organizer_env)
        for user in ("alice", "bob")
    }
    agents = {"alice": "solver-a", "bob": "solver-b"}
    for user, agent in agents.items():
        env = {"BUCKETSYNC_URL": url, "BUCKETSYNC_TOKEN": tokens[user]}
        bucket = f"acme/chal-{agent}"
        assert run(["buckets", "create", bucket], env) == f"hf://buckets/{bucket}"
        handshake = tmp_path / f"{user}.handshake"
        handshake.write_text(user)
        run(["buckets", "cp", str(handshake), f"hf://buckets/{bucket}/.bucket-sync-handshake"], env)
        response = httpx.post(
            f"{url}/v1/agents/register",
            json={"agent_id": agent, "model": "m", "harness": "h"},
            headers={"Authorization": f"Bearer {tokens[user]}"},
        )
        assert response.status_code == 201, response.text

    alice_env = {"BUCKETSYNC_URL": url, "BUCKETSYNC_TOKEN": tokens["alice"]}
    note = tmp_path / "note.md"
    note.write_text("---\ntype: question\n---\n@solver-b can you check my idea?\n")
    uri = "hf://buckets/acme/chal-solver-a/msgs/note.md"
    run(["buckets", "cp", str(note), uri], alice_env)
    listing = run(["buckets", "ls", "hf://buckets/acme/chal-solver-a", "-R"], alice_env)
    assert "msgs/note.md" in listing and ".bucket-sync-handshake" in listing

    promoted = httpx.post(f"{url}/v1/messages", json={"source": uri})
    assert promoted.status_code == 201, promoted.text
    assert promoted.json()["mentions_delivered"] == ["solver-b"]

    inbox = httpx.get(f"{url}/v1/inbox/solver-b", params={"expand": "true"}).json()
    assert [item["filename"] for item in inbox["items"]] == [promoted.json()["filename"]]
    assert inbox["items"][0]["frontmatter"]["type"] == "question"

    reply = httpx.post(
        f"{url}/v1/messages",
        json={
            "agent_id": "solver-b",
            "body": "@solver-a looks right",
            "refs": [promoted.json()["filename"]],
        },
    )
    assert reply.status_code == 201
    alice_inbox = httpx.get(
        f"{url}/v1/inbox/solver-a", params={"after": inbox["cursor"], "expand": "true"}
    ).json()
    assert [item["body"] for item in alice_inbox["items"]] == ["@solver-a looks right\n"]

    # bob cannot write into alice's bucket, with the CLI's error surfaced
    bob_env = {"BUCKETSYNC_URL": url, "BUCKETSYNC_TOKEN": tokens["bob"]}
    result = CliRunner().invoke(cli, ["buckets", "cp", str(note), uri], env=bob_env)
    assert result.exit_code == 1 and "FORBIDDEN" in result.output
