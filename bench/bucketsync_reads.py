"""bucket-sync read benchmark: a 20,000-message board with 300 agents on the local store.

Prints requests/s and p50/p99 latency for the hot read paths over real HTTP against a
`agenthub bucketsync serve` subprocess, then fires a polling storm of 500 concurrent clients
inside one listing TTL window and reports how many bucket listings each folder cost.

    PYTHONPATH=src python3 bench/bucketsync_reads.py [--messages 20000] [--agents 300]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

sys.path.insert(1, str(Path(__file__).resolve().parent.parent))

from agenthub.bucketsync.board.backfill import backfill_inbox
from agenthub.bucketsync.core import frontmatter, naming
from agenthub.bucketsync.storage.base import Batch
from agenthub.bucketsync.storage.local import LocalBucketStore
from bench._servers import free_port, wait_until_up

ORG, SLUG = "bench", "chal"
CENTRAL = f"{ORG}/{SLUG}-main-bucket"
WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "zeta",
    "eta",
    "theta",
    "iota",
    "kappa",
    "lambda",
    "mu",
    "nu",
    "xi",
]


def build_board(data_dir: Path, messages: int, agents: int, rng: random.Random) -> list[str]:
    store = LocalBucketStore(data_dir, durable=False)
    store.create(CENTRAL, creator="bucket-sync")
    store.create(f"{ORG}-admin/{SLUG}-audit", creator="bucket-sync", private=True)
    ids = [f"agent-{i:03d}" for i in range(agents)]
    start = datetime(2026, 1, 1, tzinfo=UTC)
    store.write_batch(
        CENTRAL,
        Batch(
            adds=[
                (
                    naming.registration_path(a),
                    frontmatter.render(
                        {
                            "agent_name": a,
                            "hf_user": f"user{i % 50}",
                            "agent_bucket": f"{ORG}/{SLUG}-{a}",
                            "joined": (start + timedelta(minutes=i)).isoformat(),
                            "model": "m",
                            "harness": "h",
                            "tools": [],
                        },
                        f"I am {a}.",
                    ),
                )
                for i, a in enumerate(ids)
            ]
        ),
    )
    adds: list[tuple[str, bytes]] = []
    for index in range(messages):
        author = rng.choice(ids)
        moment = start + timedelta(seconds=index * 7, milliseconds=rng.randrange(1000))
        stamp = naming.stamp(moment)
        mentioned = " ".join(f"@{m}" for m in rng.sample(ids, rng.choice((0, 0, 1, 1, 2))))
        body = f"{' '.join(rng.choices(WORDS, k=30))} {mentioned}\n"
        data = frontmatter.render(
            {
                "agent": author,
                "timestamp": naming.stamp_to_iso(stamp),
                "via": "bucket",
                "type": rng.choice(("agent", "question", "note")),
            },
            body,
        )
        adds.append((f"message_board/{naming.message_filename(stamp, author)}", data))
        if len(adds) == 2000:
            store.write_batch(CENTRAL, Batch(adds=adds))
            adds = []
    if adds:
        store.write_batch(CENTRAL, Batch(adds=adds))
    report = backfill_inbox(store, CENTRAL, fanout_cap=10)
    print(f"built: {messages} messages, {agents} agents, {report.copies_written} inbox copies")
    return ids


def measure(client: httpx.Client, label: str, urls: list[str]) -> None:
    for url in urls[:20]:  # warm the caches
        client.get(url).raise_for_status()
    latencies = []
    started = time.perf_counter()
    for url in urls:
        t0 = time.perf_counter()
        client.get(url).raise_for_status()
        latencies.append((time.perf_counter() - t0) * 1000)
    elapsed = time.perf_counter() - started
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    print(
        f"{label:<48} {len(urls) / elapsed:8.1f} req/s   p50 {statistics.median(latencies):7.2f} ms"
        f"   p99 {p99:7.2f} ms"
    )


async def storm(base: str, handles: list[str], clients: int) -> float:
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=base, limits=limits, timeout=60) as client:
        started = time.perf_counter()
        responses = await asyncio.gather(
            *(
                client.get(f"/v1/inbox/{handles[i % len(handles)]}", params={"expand": "true"})
                for i in range(clients)
            )
        )
        assert all(r.status_code == 200 for r in responses)
        return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--agents", type=int, default=300)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--storm", type=int, default=500)
    parser.add_argument("--ttl", type=float, default=20.0)
    args = parser.parse_args()
    rng = random.Random(7)
    with tempfile.TemporaryDirectory(prefix="bucketsync-bench-") as tmp:
        data_dir = Path(tmp)
        t0 = time.perf_counter()
        ids = build_board(data_dir, args.messages, args.agents, rng)
        print(f"build time {time.perf_counter() - t0:.1f} s")
        port = free_port()
        env = {
            **os.environ,
            "ORG": ORG,
            "COLLAB_SLUG": SLUG,
            "AUDIT_BUCKET": f"{ORG}-admin/{SLUG}-audit",
            "BUCKETSYNC_DATA_DIR": str(data_dir),
            "LISTING_TTL_S": str(args.ttl),
        }
        server = subprocess.Popen(
            [sys.executable, "-m", "agenthub.cli", "bucketsync", "serve", "--port", str(port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        base = f"http://127.0.0.1:{port}"
        try:
            with httpx.Client(base_url=base, timeout=120) as client:
                wait_until_up(client, tries=200)
                t_cold = time.perf_counter()
                client.get(
                    "/v1/messages", params={"limit": 50, "expand": "true"}
                ).raise_for_status()
                cold_ms = 1000 * (time.perf_counter() - t_cold)
                print(f"{'cold first page (listing + 50 reads)':<48} {cold_ms:8.0f} ms")
                newest = client.get("/v1/messages", params={"limit": 400}).json()["items"]
                after = newest[-1]
                n = args.requests
                measure(client, "GET /v1/messages?limit=50", ["/v1/messages?limit=50"] * n)
                measure(
                    client,
                    "GET /v1/messages?limit=50&expand=true",
                    ["/v1/messages?limit=50&expand=true"] * n,
                )
                measure(
                    client,
                    "GET /v1/messages?q=<word>&limit=50 (20k scan)",
                    [
                        f"/v1/messages?q={rng.choice(WORDS)}%20{rng.choice(WORDS)}&limit=50"
                        for _ in range(n // 3)
                    ],
                )
                measure(
                    client,
                    "GET /v1/messages?q=<same word>&limit=50 (memo)",
                    ["/v1/messages?q=theta%20iota&limit=50"] * n,
                )
                measure(
                    client,
                    "GET /v1/inbox/{h}?after=...&expand=true",
                    [f"/v1/inbox/{rng.choice(ids)}?after={after}&expand=true" for _ in range(n)],
                )
                measure(
                    client,
                    "GET /v1/digest?as={h}",
                    [f"/v1/digest?as={rng.choice(ids)}" for _ in range(n // 3)],
                )
                # Polling storm: let the TTL lapse, then 500 clients inside one window.
                time.sleep(args.ttl + 0.5)
                before = client.get("/v1/healthz").json()["read_model"]["listings_by_folder"]
                took = asyncio.run(storm(base, ids, args.storm))
                after_h = client.get("/v1/healthz").json()["read_model"]["listings_by_folder"]
                delta = {k: after_h.get(k, 0) - before.get(k, 0) for k in after_h}
                print(
                    f"polling storm: {args.storm} concurrent inbox polls in {took:.2f} s "
                    f"(TTL {args.ttl:.0f} s); bucket listings per folder: {delta}"
                )
        finally:
            server.terminate()
            server.wait(10)


if __name__ == "__main__":
    main()
