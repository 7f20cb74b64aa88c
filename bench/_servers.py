"""Benchmark plumbing: throw-away databases and real servers in subprocesses."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from agenthub.bucketsync.identity.local import LocalIdentity
from agenthub.db import normalize_url

PG_SERVER = os.environ.get("AGENTHUB_BENCH_PG_URL") or os.environ.get(
    "AGENTHUB_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def pg_database(prefix: str = "agenthub_bench") -> Iterator[str]:
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    admin = create_engine(normalize_url(PG_SERVER), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(PG_SERVER).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@contextmanager
def statehub_server(
    database_url: str, *, access_log: bool = True, **env: str
) -> Iterator[tuple[str, int]]:
    """Run `agenthub statehub serve` in a subprocess; yields (base URL, pid)."""
    port = free_port()
    environment = {**os.environ, "STATEHUB_DATABASE_URL": database_url, **env}
    argv = [sys.executable, "-m", "agenthub.cli", "statehub", "serve", "--port", str(port)]
    proc = subprocess.Popen(
        argv if access_log else [*argv, "--no-access-log"],
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{base}/state/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("State Hub did not start")
            time.sleep(0.1)
        yield base, proc.pid
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def wait_until_up(client: httpx.Client, path: str = "/v1/healthz", tries: int = 300) -> None:
    """Poll `path` until the server answers at all (it may still be starting)."""
    for _ in range(tries):
        try:
            client.get(path)
            return
        except httpx.TransportError:
            time.sleep(0.1)


def register_agent(
    client: httpx.Client | TestClient, identity: LocalIdentity, agent: str, *, org: str, slug: str
) -> None:
    """Register `agent` on a local-store bucket-sync the way an agent does: a user token,
    its scratch bucket, the handshake file, `POST /v1/agents/register`."""
    token = identity.add_user(f"user-{agent}", role="contributor")
    auth = {"Authorization": f"Bearer {token}"}
    bucket = f"{org}/{slug}-{agent}"
    client.post(f"/local/buckets/{bucket}", headers=auth)
    client.put(
        f"/local/buckets/{bucket}/files/.bucket-sync-handshake",
        content=f"user-{agent}".encode(),
        headers=auth,
    )
    answer = client.post(
        "/v1/agents/register", json={"agent_id": agent, "model": "m", "harness": "h"}, headers=auth
    )
    assert answer.status_code == 201, answer.text


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]
