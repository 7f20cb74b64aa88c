"""kill -9 of a real `agenthub bucketsync serve` during a burst of @mention posts: after
the restart no inbox copy is visible without its board file, every acknowledged post is
on the board with its audit row, nothing is left half-written, and retrying every request
with its Idempotency-Key duplicates nothing."""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from agenthub.bucketsync.identity.local import LocalIdentity
from tests.bucketsync.conftest import ORG
from tests.bucketsync.test_multiworker import HttpWorld, serve, serve_env

AGENTS = [f"agent-{i}" for i in range(1, 9)]
PER_AGENT = 4


def post(base: str, author: str, index: int) -> tuple[str, int | None, str | None]:
    key = f"{author}-{index}"
    others = " ".join(f"@{a}" for a in AGENTS if a != author)
    try:
        response = httpx.post(
            f"{base}/v1/messages",
            json={"agent_id": author, "body": f"post {index} to {others}"},
            headers={"Idempotency-Key": key},
            timeout=10,
        )
    except httpx.HTTPError:
        return key, None, None
    filename = response.json().get("filename") if response.status_code == 201 else None
    return key, response.status_code, filename


def test_kill9_during_a_burst_loses_nothing_and_leaves_no_orphan(tmp_path: Path) -> None:
    data = tmp_path / "data"
    env = serve_env(data)
    process, base = serve(env, tmp_path / "first.log")
    try:
        world = HttpWorld(base, LocalIdentity(data / "users.json", org=ORG))
        for agent in AGENTS:
            world.agent(agent)
        jobs = [(agent, index) for index in range(PER_AGENT) for agent in AGENTS]
        acknowledged = threading.Event()

        def send(job: tuple[str, int]) -> tuple[str, int | None, str | None]:
            result = post(base, *job)
            if result[1] == 201:
                acknowledged.set()
            return result

        with ThreadPoolExecutor(8) as pool:
            futures = [pool.submit(send, job) for job in jobs]
            assert acknowledged.wait(30), (tmp_path / "first.log").read_text()
            time.sleep(0.05)
            process.send_signal(signal.SIGKILL)
            results = [future.result() for future in futures]
        process.wait(timeout=10)
    finally:
        if process.poll() is None:
            process.kill()
    answered = {key: filename for key, status, filename in results if status == 201}
    assert answered and len(answered) < len(jobs), "the kill must land during the burst"

    process, base = serve(env, tmp_path / "second.log")
    try:
        client = httpx.Client(base_url=base, timeout=30)
        board = set(client.get("/v1/messages", params={"limit": 1000}).json()["items"])
        assert set(answered.values()) <= board
        for agent in AGENTS:
            inbox = client.get(f"/v1/inbox/{agent}", params={"limit": 1000}).json()["items"]
            orphans = [name for name in inbox if name not in board]
            assert orphans == [], f"inbox copies of posts not on the board: {orphans}"
        audit_file = data / "buckets" / "acme-admin" / "chal-audit" / "files" / "audit"
        rows = [
            json.loads(line)
            for path in sorted(audit_file.glob("*.jsonl"))
            for line in path.read_text().splitlines()
        ]
        audited = {row["target_path"] for row in rows if row["route"] == "/v1/messages"}
        assert {f"message_board/{name}" for name in board} <= audited
        assert list(data.rglob(".tmp-*")) == []

        # Retry everything with its key: answered ones replay, the rest land at most once.
        retried = {}
        for agent, index in jobs:
            key, status, filename = post(base, agent, index)
            assert status == 201, key
            retried[key] = filename
        assert all(retried[key] == filename for key, filename in answered.items())
        final = client.get("/v1/messages", params={"limit": 1000}).json()["items"]
        assert len(final) == len(jobs) == len(set(retried.values()))
        client.close()
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
