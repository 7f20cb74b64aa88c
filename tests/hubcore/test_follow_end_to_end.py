"""End to end over HTTP: write on State Hub, read the change through hub-core's
authenticated endpoint while hub-core's own server follows the feed."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from agenthub.hubcore.app import create_app as create_hubcore
from agenthub.hubcore.settings import HubCoreSettings
from agenthub.statehub.app import create_app as create_statehub
from agenthub.statehub.settings import StateHubSettings
from tests.hubcore.follow_support import ok, send
from tests.support.servers import live_server

PATH = "/ports/projections/statehub-inbox"
TOKEN = "follow-e2e-token"
AGENT = "operator"


def read_until(client: httpx.Client, message_id: str, timeout: float = 10.0) -> httpx.Response:
    deadline = time.monotonic() + timeout
    while True:
        response = client.get(
            PATH, params={"to_agent": AGENT}, headers={"Authorization": f"Bearer {TOKEN}"}
        )
        assert response.status_code == 200, response.text
        if any(m["id"] == message_id for m in response.json()):
            return response
        assert time.monotonic() < deadline, f"{message_id} never reached hub-core"
        time.sleep(0.02)


def test_a_write_on_state_hub_is_read_live_through_hub_core(
    statehub_url: str, hubcore_url: str
) -> None:
    statehub = create_statehub(StateHubSettings(database_url=statehub_url))
    with live_server(statehub) as statehub_base, httpx.Client(base_url=statehub_base) as source:
        hubcore = create_hubcore(
            HubCoreSettings(
                database_url=hubcore_url,
                inbox_reads=True,
                operator_token=TOKEN,
                inbox_agent=AGENT,
                statehub_url=statehub_base,
                follow_wait_s=2,
            )
        )
        with live_server(hubcore) as hubcore_base, httpx.Client(base_url=hubcore_base) as reader:
            first = send(source, subject="one")
            read_until(reader, first)
            started = time.monotonic()
            second = send(source, subject="two")
            response = read_until(reader, second)
            elapsed = time.monotonic() - started
            assert response.headers["x-hub-core-read-mode"] == "live"
            assert float(response.headers["x-hub-core-lag-seconds"]) < 30
            assert "x-hub-core-source-time" in response.headers
            assert elapsed < 2.0, f"the change took {elapsed:.2f}s: long-poll did not wake"
            health = ok(reader.get("/healthz"))
            assert health["mode"] == "live" and health["following"] is True
            assert health["cursor"] == health["high_water"] and health["last_error"] is None
            assert reader.get(PATH, params={"to_agent": AGENT}).status_code == 401


def test_agenthub_up_serves_a_state_hub_write_through_hub_core(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "src")}
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agenthub.cli",
            "up",
            "--statehub-port",
            "0",
            "--hubcore-port",
            "0",
            "--bucketsync-port",
            "0",
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        lines: list[str] = []
        deadline = time.monotonic() + 60
        while not any(line.startswith("Ctrl-C") for line in lines):
            line = process.stdout.readline()
            assert line or process.poll() is None, process.stderr.read() if process.stderr else ""
            assert time.monotonic() < deadline, "agenthub up did not print its URLs"
            lines.append(line)
        text = "".join(lines)
        statehub_url = re.search(r"^State Hub\s+(\S+)", text, re.M)
        hubcore_url = re.search(r"^hub-core\s+(\S+)", text, re.M)
        token = re.search(r"^token\s+(\S+)", text, re.M)
        assert statehub_url and hubcore_url and token, text
        assert (tmp_path / "var" / "operator-token").read_text().strip() == token.group(1)
        assert (tmp_path / "var" / "operator-token").stat().st_mode & 0o777 == 0o600
        with httpx.Client(base_url=statehub_url.group(1)) as source:
            message_id = send(source, to=AGENT, subject="via up")
        deadline = time.monotonic() + 10
        with httpx.Client(base_url=hubcore_url.group(1)) as reader:
            while True:
                response = reader.get(
                    PATH,
                    params={"to_agent": AGENT},
                    headers={"Authorization": f"Bearer {token.group(1)}"},
                )
                assert response.status_code == 200, response.text
                if [m["id"] for m in response.json()] == [message_id]:
                    break
                assert time.monotonic() < deadline, response.text
                time.sleep(0.05)
        assert response.headers["x-hub-core-read-mode"] == "live"
        bucketsync_url = re.search(r"^bucket-sync\s+(\S+)", text, re.M)
        alice = re.search(r"^token alice\s+(\S+)", text, re.M)
        assert bucketsync_url and alice, text
        post_through_bucketsync(bucketsync_url.group(1), alice.group(1))
    finally:
        process.send_signal(signal.SIGINT)
        try:
            code = process.wait(timeout=20)
        finally:
            if process.poll() is None:
                process.kill()
    assert code == 0, process.stderr.read() if process.stderr else ""


def post_through_bucketsync(base: str, token: str) -> None:
    """The first-user path `agenthub up` prints: the example challenge is initialised and a
    message posted through bucket-sync's API is readable back."""
    auth = {"Authorization": f"Bearer {token}"}
    bucket = "local/primes-agent-1"
    with httpx.Client(base_url=base, timeout=10) as client:
        readme = client.get("/local/buckets/local/primes-main-bucket/files/README.md", headers=auth)
        assert readme.status_code == 200 and "# Prime hunt" in readme.text
        assert f"{base}/v1/agents/register" in readme.text
        assert client.post(f"/local/buckets/{bucket}", headers=auth).status_code in (200, 201)
        put = client.put(
            f"/local/buckets/{bucket}/files/.bucket-sync-handshake", content=b"alice", headers=auth
        )
        assert put.status_code == 201, put.text
        registered = client.post(
            "/v1/agents/register",
            json={"agent_id": "agent-1", "model": "m", "harness": "h"},
            headers=auth,
        )
        assert registered.status_code == 201, registered.text
        note = client.put(
            f"/local/buckets/{bucket}/files/notes/hi.md", content=b"hello, board", headers=auth
        )
        assert note.status_code == 201, note.text
        posted = client.post("/v1/messages", json={"source": f"hf://buckets/{bucket}/notes/hi.md"})
        assert posted.status_code == 201, posted.text
        filename = posted.json()["filename"]
        read = client.get(f"/v1/messages/{filename}")
        assert read.status_code == 200 and "hello, board" in read.json()["body"]
        assert read.json()["frontmatter"]["agent"] == "agent-1"
