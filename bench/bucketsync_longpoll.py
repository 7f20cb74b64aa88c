"""bucket-sync long-poll benchmark: 256 parked waiters, woken by mentions and broadcasts.

For each scenario it starts real `agenthub bucketsync serve` subprocesses on a fresh local
data directory, parks one `GET /v1/inbox/{handle}?wait=55` per agent (each waiter re-parks
from the response's cursor, like collab_watch.sh), then measures the wake latency from
`POST /v1/messages` returning to each woken waiter's response:

- mention wake: one agent mentioned per post, many rounds;
- broadcast wake: one organizer broadcast wakes all 256 (spreading off and on);
- the same with 2 workers on Redis (waiters split across them, posts to the first);

and the server RSS per parked waiter (VmRSS delta / waiters). Waiters and posts use the
lean client in `bench/_lean.py` (one raw keep-alive connection per waiter): through httpx
a trivial app scored the same as bucket-sync, so the client hid any server regression.

    PYTHONPATH=src python3 bench/bucketsync_longpoll.py [--waiters 256] [--rounds 60] [--skip-redis]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agenthub.bucketsync.core import frontmatter, naming
from agenthub.bucketsync.identity.local import add_user
from agenthub.bucketsync.storage.base import Batch
from agenthub.bucketsync.storage.local import LocalBucketStore
from bench._lean import LeanConnection

ORG, SLUG = "bench", "chal"
CENTRAL = f"{ORG}/{SLUG}-main-bucket"
AUDIT = f"{ORG}-admin/{SLUG}-audit"
REDIS = os.environ.get("AGENTHUB_BENCH_REDIS_URL", "redis://127.0.0.1:6379/15")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def seed(data_dir: Path, waiters: int, senders: int) -> str:
    """Register agents straight into the central bucket; returns an organizer token."""
    store = LocalBucketStore(data_dir, durable=False)
    store.create(CENTRAL, creator="bucket-sync")
    store.create(AUDIT, creator="bucket-sync", private=True)
    ids = [f"agent-{i:03d}" for i in range(waiters)] + [f"sender-{i:03d}" for i in range(senders)]
    adds = [
        (
            naming.registration_path(agent_id),
            frontmatter.render(
                {"agent_name": agent_id, "hf_user": "bench", "joined": "2026-01-01T00:00:00Z"},
                "",
            ),
        )
        for agent_id in ids
    ]
    store.write_batch(CENTRAL, Batch(adds=adds))
    return add_user(data_dir / "users.json", "boss", role="admin")


@contextmanager
def servers(data_dir: Path, count: int, extra_env: dict[str, str]) -> Iterator[list[Any]]:
    env = {
        **os.environ,
        "ORG": ORG,
        "COLLAB_SLUG": SLUG,
        "AUDIT_BUCKET": AUDIT,
        "BUCKETSYNC_DATA_DIR": str(data_dir),
        **extra_env,
    }
    started: list[tuple[subprocess.Popen[bytes], str]] = []
    try:
        for _ in range(count):
            port = free_port()
            process = subprocess.Popen(
                [sys.executable, "-m", "agenthub.cli", "bucketsync", "serve", "--port", str(port)],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            base = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 30
            while True:
                try:
                    if httpx.get(f"{base}/v1/healthz", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("bucket-sync did not start")
                time.sleep(0.1)
            started.append((process, base))
        yield started
    finally:
        for process, _base in started:
            process.terminate()
            process.wait(timeout=10)


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


class Waiters:
    """One long-poll loop per handle, each on its own lean keep-alive connection
    (`bench._lean`: one raw connection per waiter, so the figures are the
    server's, not an HTTP client's); records when each page arrives."""

    def __init__(self, bases: list[str], handles: list[str]):
        self.bases = bases
        self.handles = handles
        self.arrivals: dict[str, list[tuple[float, list[str]]]] = {h: [] for h in handles}
        self.events: dict[str, asyncio.Event] = {h: asyncio.Event() for h in handles}
        self.tasks: list[asyncio.Task[None]] = []
        self.retries = 0

    async def start(self) -> None:
        for index, handle in enumerate(self.handles):
            base = self.bases[index % len(self.bases)]
            self.tasks.append(asyncio.create_task(self._loop(base, handle)))

    async def _loop(self, base: str, handle: str) -> None:
        conn = await LeanConnection(base).open()
        try:
            path = f"/v1/inbox/{handle}"
            _status, body = await conn.request("GET", f"{path}?limit=1")
            cursor = json.loads(body)["cursor"]
            while True:
                params = {"wait": "55", "order": "asc"}
                if cursor:
                    params["after"] = cursor
                try:
                    _status, body = await conn.request("GET", f"{path}?{urlencode(params)}")
                except (ConnectionError, asyncio.IncompleteReadError):
                    self.retries += 1
                    continue
                page = json.loads(body)
                if page["items"]:
                    self.arrivals[handle].append((time.perf_counter(), list(page["items"])))
                    self.events[handle].set()
                    cursor = page["cursor"]
        finally:
            await conn.close()

    async def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


async def parked(bases: list[str], count: int) -> None:
    deadline = time.monotonic() + 60
    while True:
        total = 0
        for base in bases:
            conn = await LeanConnection(base).open()
            try:
                _status, body = await conn.request("GET", "/v1/healthz")
            finally:
                await conn.close()
            total += json.loads(body)["longpoll"]["parked"]
        if total >= count:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {total}/{count} waiters parked")
        await asyncio.sleep(0.05)


async def post(base: str, payload: dict[str, Any], token: str | None = None) -> float:
    """POST /v1/messages on a fresh lean connection; returns the moment it returned."""
    conn = await LeanConnection(base).open()
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    try:
        status, body = await conn.request(
            "POST", "/v1/messages", json.dumps(payload).encode(), headers
        )
    finally:
        await conn.close()
    returned = time.perf_counter()
    if status >= 400:
        raise RuntimeError(f"POST /v1/messages: HTTP {status} {body[:200]!r}")
    return returned


async def broadcast_wake(
    waiters: int, broadcasts: int, extra_env: dict[str, str] | None = None
) -> tuple[list[float], list[float]]:
    """One bucket-sync worker, `waiters` parked agents, `broadcasts` organizer
    broadcasts: (wake latencies from the POST's send, POST latencies), in ms.
    `extra_env` reaches the server (a `PYTHONPATH` runs another checkout's code)."""
    env = {
        "LONGPOLL_MAX_WAITERS_TOTAL": str(max(256, waiters + 16)),
        "LONGPOLL_WAKE_SPREAD_THRESHOLD": "1000000",
        **(extra_env or {}),
    }
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        token = seed(data, waiters, 1)
        with servers(data, 1, env) as started:
            bases = [base for _process, base in started]
            handles = [f"agent-{i:03d}" for i in range(waiters)]
            pool = Waiters(bases, handles)
            await pool.start()
            try:
                wake_ms, post_ms = await _broadcasts(pool, bases, token, broadcasts)
            finally:
                await pool.stop()
    return wake_ms, post_ms


async def _broadcasts(
    pool: Waiters, bases: list[str], token: str, broadcasts: int
) -> tuple[list[float], list[float]]:
    wake_ms: list[float] = []
    post_ms: list[float] = []
    for _ in range(broadcasts):
        await parked(bases, len(pool.handles))
        for event in pool.events.values():
            event.clear()
        sent = time.perf_counter()
        returned = await post(
            bases[0], {"agent_id": "human-boss", "body": "all hands", "broadcast": True}, token
        )
        post_ms.append((returned - sent) * 1000)
        await asyncio.wait_for(
            asyncio.gather(*(e.wait() for e in pool.events.values())), timeout=60
        )
        # From the POST's send: bucket-sync may answer waiters before the POST's own response.
        wake_ms.extend((pool.arrivals[h][-1][0] - sent) * 1000 for h in pool.handles)
    return wake_ms, post_ms


def summary(values_ms: list[float]) -> str:
    if not values_ms:
        return "n/a"
    ordered = sorted(values_ms)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return (
        f"p50 {statistics.median(ordered):7.1f} ms  p99 {p99:7.1f} ms  "
        f"max {ordered[-1]:7.1f} ms  (n={len(ordered)})"
    )


async def scenario(
    label: str,
    *,
    workers: int,
    waiters: int,
    rounds: int,
    broadcasts: int,
    env: dict[str, str],
) -> None:
    senders = rounds // 4 + 1  # raw messages are limited to 5/min per agent
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        token = seed(data, waiters, senders)
        with servers(data, workers, env) as started:
            bases = [base for _process, base in started]
            handles = [f"agent-{i:03d}" for i in range(waiters)]
            rss_before = [rss_kb(process.pid) for process, _ in started]
            pool = Waiters(bases, handles)
            await pool.start()
            await parked(bases, waiters)
            rss_after = [rss_kb(process.pid) for process, _ in started]
            per_waiter = (sum(rss_after) - sum(rss_before)) / waiters
            mention_ms: list[float] = []
            mention_send_ms: list[float] = []
            for round_no in range(rounds):
                handle = handles[(round_no * 37) % waiters]
                pool.events[handle].clear()
                sender = f"sender-{round_no // 4:03d}"
                sent_at = time.perf_counter()
                returned = await post(
                    bases[0], {"agent_id": sender, "body": f"ping @{handle} #{round_no}"}
                )
                await asyncio.wait_for(pool.events[handle].wait(), timeout=30)
                arrived = pool.arrivals[handle][-1][0]
                mention_ms.append((arrived - returned) * 1000)
                mention_send_ms.append((arrived - sent_at) * 1000)
                await parked(bases, waiters)
            broadcast_ms, _post_ms = await _broadcasts(pool, bases, token, broadcasts)
            await pool.stop()
            retries = pool.retries
    print(f"\n== {label}: {workers} worker(s), {waiters} parked waiters")
    print(f"  mention wake (from POST return):   {summary(mention_ms)}")
    print(f"  mention wake (from POST send):     {summary(mention_send_ms)}")
    print(f"  broadcast wake (from POST send):   {summary(broadcast_ms)}")
    print(f"  server RSS per parked waiter:      {per_waiter:.1f} KiB")
    print(f"  client reconnects (closed keep-alive connections): {retries}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--waiters", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--broadcasts", type=int, default=3)
    parser.add_argument("--skip-redis", action="store_true")
    args = parser.parse_args()
    no_spread = {"LONGPOLL_WAKE_SPREAD_THRESHOLD": "1000000"}
    common = {"LONGPOLL_MAX_WAITERS_TOTAL": str(max(256, args.waiters + 16))}
    await scenario(
        "spreading off",
        workers=1,
        waiters=args.waiters,
        rounds=args.rounds,
        broadcasts=args.broadcasts,
        env={**common, **no_spread},
    )
    await scenario(
        "spreading on (threshold 20, over 8 s)",
        workers=1,
        waiters=args.waiters,
        rounds=args.rounds // 3,
        broadcasts=1,
        env=common,
    )
    if not args.skip_redis:
        await scenario(
            "Redis bus, spreading off",
            workers=2,
            waiters=args.waiters,
            rounds=args.rounds,
            broadcasts=args.broadcasts,
            env={
                **common,
                **no_spread,
                "BUCKETSYNC_BUS_URL": REDIS,
                "BUCKETSYNC_BUS_PREFIX": f"bench:{uuid.uuid4().hex[:8]}:",
            },
        )


if __name__ == "__main__":
    asyncio.run(main())
