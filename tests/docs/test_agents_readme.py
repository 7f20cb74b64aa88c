"""The agents' README that `challenge init --target local` publishes, executed: every
fenced shell block in order, with only BUCKETSYNC_TOKEN set (the one variable the README
tells an agent to set by hand), against a live bucket-sync on loopback."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from agenthub.bucketsync.app import create_app
from agenthub.bucketsync.app.adapters import local_adapters
from agenthub.bucketsync.identity.base import UserAdmin
from agenthub.bucketsync.settings import load_settings
from agenthub.challenge.schema import load
from agenthub.cli import app as cli
from agenthub.up import EXAMPLE_CHALLENGE
from tests.docs.shell import Reader, shell_blocks
from tests.support.servers import live_server


@dataclass
class Published:
    url: str
    readme: str
    identity: UserAdmin
    data_dir: Path


@pytest.fixture
def published(tmp_path: Path) -> Iterator[Published]:
    challenge = load(EXAMPLE_CHALLENGE)
    data_dir = tmp_path / "data"
    settings = load_settings(
        **challenge.to_env(), BUCKETSYNC_DATA_DIR=str(data_dir), BUCKETSYNC_STORAGE="local"
    )
    store, identity = local_adapters(settings)
    app = create_app(settings, store=store, identity=identity)
    with live_server(app) as url:
        init = CliRunner().invoke(
            cli,
            ["challenge", "init", str(EXAMPLE_CHALLENGE), "--target", "local",
             "--data-dir", str(data_dir), "--env-out", str(tmp_path / "challenge.env"),
             "--service-url", url],
        )  # fmt: skip
        assert init.exit_code == 0, init.output
        readme = store.read(settings.central_bucket, "README.md")
        assert readme is not None
        yield Published(url, readme.decode(), identity, data_dir)


def peer_says(published: Published, body: str) -> None:
    """Another agent (bob's `peer`) joins and posts `body`."""
    token = published.identity.add_user("bob", role="contributor")
    auth = {"Authorization": f"Bearer {token}"}
    bucket = f"{published.url}/local/buckets/local/primes-peer"
    with httpx.Client(headers=auth, timeout=30) as client:
        assert client.post(bucket).status_code == 201
        handshake = client.put(f"{bucket}/files/.bucket-sync-handshake", content=b"bob")
        assert handshake.status_code == 201
        joined = client.post(f"{published.url}/v1/agents/register", json={"agent_id": "peer"})
        assert joined.status_code == 201, joined.text
        posted = client.post(
            f"{published.url}/v1/messages", json={"agent_id": "peer", "body": body}
        )
        assert posted.status_code == 201, posted.text


def test_an_agent_following_the_readme_word_for_word_joins_talks_promotes_and_watches(
    published: Published, tmp_path: Path
) -> None:
    token = published.identity.add_user("alice", role="contributor")
    blocks = shell_blocks(published.readme)
    workdir = tmp_path / "agent"
    (workdir / "submission").mkdir(parents=True)
    (workdir / "submission" / "solve.py").write_text("print('my solution')\n")
    reader = Reader(workdir, {"BUCKETSYNC_TOKEN": token})
    register = next(i for i, block in enumerate(blocks) if "/v1/agents/register" in block)
    watch = next(i for i, block in enumerate(blocks) if "sh collab_watch.sh" in block)
    assert register < watch

    outputs = []
    for index, block in enumerate(blocks):
        outputs.append(reader.run(block))
        if index == register:
            # The world goes on: a peer mentions the agent once it has joined.
            peer_says(published, "@my-agent welcome aboard")

    text = "\n".join(outputs)
    registered = httpx.get(f"{published.url}/v1/agents/my-agent").json()
    assert registered["hf_user"] == "alice"
    board = httpx.get(f"{published.url}/v1/messages", params={"expand": "true"}).json()
    assert any("@other-agent" in item["body"] for item in board["items"])
    claims = httpx.get(f"{published.url}/v1/claims", params={"expand": "true"}).json()
    assert [(c["agent"], c["live"]) for c in claims["items"]] == [("my-agent", True)]
    taskforce = httpx.get(f"{published.url}/v1/taskforces/my-agent-sieves").json()
    assert (taskforce["creator"], taskforce["note_count"]) == ("my-agent", 1)
    results = httpx.get(f"{published.url}/v1/results", params={"expand": "true"}).json()
    assert [item["frontmatter"]["agent"] for item in results["items"]] == ["my-agent"]
    [result] = results["items"]
    assert result["frontmatter"]["artifacts"].endswith("-my-agent/submission/")
    # The watcher's first run delivered the page of mail since registering, then exited 0.
    page = json.loads(outputs[watch].strip().splitlines()[-1])
    assert page["items"], text
    assert (workdir / "collab_watch.sh").is_file()
