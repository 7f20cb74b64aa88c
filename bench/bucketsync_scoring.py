"""bucket-sync scoring benchmark: the leaderboard over 50,000 results and 300 agents, and
`artifacts:sync` of 2,000 files, on the local store over real HTTP against an
`agenthub bucketsync serve` subprocess.

Prints p50/p99 of `GET /v1/leaderboard` warm (ranking cached for the listing version) and
right after a new result (the promotion invalidates the ranking, so the next read re-ranks
all 50k from the content cache), plus the time of `POST /v1/artifacts:sync` of 2,000 files.

    PYTHONPATH=src python3 bench/bucketsync_scoring.py [--results 50000] [--agents 300]
"""

from __future__ import annotations

import argparse
import json
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

from agenthub.bucketsync.core import frontmatter, naming
from agenthub.bucketsync.storage.base import Batch
from agenthub.bucketsync.storage.local import LocalBucketStore
from bench._servers import free_port, wait_until_up

ORG, SLUG = "bench", "chal"
CENTRAL = f"{ORG}/{SLUG}-main-bucket"
AUDIT = f"{ORG}-admin/{SLUG}-audit"


def build(data_dir: Path, results: int, agents: int, rng: random.Random) -> list[str]:
    store = LocalBucketStore(data_dir, durable=False)
    store.create(CENTRAL, creator="bucket-sync")
    store.create(AUDIT, creator="bucket-sync", private=True)
    ids = [f"agent-{i:03d}" for i in range(agents)]
    start = datetime(2026, 1, 1, tzinfo=UTC)
    registrations = []
    for i, agent in enumerate(ids):
        bucket = f"{ORG}/{SLUG}-{agent}"
        store.create(bucket, creator=f"user{i % 50}")
        fm = {
            "agent_name": agent,
            "hf_user": f"user{i % 50}",
            "agent_bucket": bucket,
            "joined": (start + timedelta(minutes=i)).isoformat(),
        }
        registrations.append((naming.registration_path(agent), frontmatter.render(fm, "")))
    store.write_batch(CENTRAL, Batch(adds=registrations))
    adds: list[tuple[str, bytes]] = []
    index: dict[str, str] = {}
    for n in range(results):
        agent = rng.choice(ids)
        stamp = naming.stamp(start + timedelta(seconds=n * 3, milliseconds=rng.randrange(1000)))
        filename = naming.message_filename(stamp, agent)
        status = "negative" if rng.random() < 0.1 else "agent-run"
        fm = {
            "agent": agent,
            "timestamp": naming.stamp_to_iso(stamp),
            "via": "bucket",
            "score": round(rng.uniform(0.1, 0.99), 5),
            "method": rng.choice(("beam", "greedy", "sampling")),
            "status": status,
            "description": f"run {n}",
        }
        adds.append((naming.result_path(filename), frontmatter.render(fm, "notes\n")))
        if rng.random() < 0.05:
            index[filename] = rng.choice(("valid", "invalid"))
        if len(adds) == 5000:
            store.write_batch(CENTRAL, Batch(adds=adds))
            adds = []
    adds.append(("results/verification_status.json", json.dumps(index).encode()))
    store.write_batch(CENTRAL, Batch(adds=adds))
    sync_bucket = f"{ORG}/{SLUG}-{ids[0]}"
    store.write_batch(
        sync_bucket,
        Batch(adds=[(f"model/shard-{i:04d}.bin", os.urandom(256)) for i in range(2000)]),
    )
    print(f"built: {results} results, {agents} agents, {len(index)} verdicts, 2000 sync files")
    return ids


def report(label: str, latencies: list[float]) -> None:
    ordered = sorted(latencies)
    p50 = statistics.median(ordered)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    print(f"{label:<52} p50 {1000 * p50:8.1f} ms   p99 {1000 * p99:8.1f} ms   n={len(ordered)}")


def timed(client: httpx.Client, method: str, url: str, **kwargs: object) -> float:
    t0 = time.perf_counter()
    response = client.request(method, url, **kwargs)  # type: ignore[arg-type]
    elapsed = time.perf_counter() - t0
    response.raise_for_status()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--results", type=int, default=50_000)
    parser.add_argument("--agents", type=int, default=300)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--new-results", type=int, default=30)
    args = parser.parse_args()
    rng = random.Random(11)
    with tempfile.TemporaryDirectory(prefix="bucketsync-scoring-bench-") as tmp:
        data_dir = Path(tmp)
        t0 = time.perf_counter()
        ids = build(data_dir, args.results, args.agents, rng)
        print(f"build time {time.perf_counter() - t0:.1f} s")
        port = free_port()
        env = {
            **os.environ,
            "ORG": ORG,
            "COLLAB_SLUG": SLUG,
            "AUDIT_BUCKET": AUDIT,
            "BUCKETSYNC_DATA_DIR": str(data_dir),
            "LISTING_TTL_S": "600",
        }
        server = subprocess.Popen(
            [sys.executable, "-m", "agenthub.cli", "bucketsync", "serve", "--port", str(port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        store = LocalBucketStore(data_dir, durable=False)
        try:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=300) as client:
                wait_until_up(client, tries=300)
                cold = timed(client, "GET", "/v1/leaderboard")
                print(f"{'cold GET /v1/leaderboard (list + parse 50k)':<52} {1000 * cold:8.0f} ms")
                warm = [timed(client, "GET", "/v1/leaderboard") for _ in range(args.requests)]
                report("GET /v1/leaderboard (warm)", warm)
                strict = [
                    timed(client, "GET", "/v1/leaderboard?verification=valid&limit=10")
                    for _ in range(args.requests)
                ]
                report("GET /v1/leaderboard?verification=valid (warm)", strict)
                after_new = []
                for n in range(args.new_results):
                    agent = ids[1 + n % (len(ids) - 1)]
                    path = f"results/new-{n}.md"
                    body = (
                        f"---\nscore: {rng.uniform(0.1, 0.99):.5f}\nmethod: new\n"
                        f"status: agent-run\ndescription: fresh {n}\n---\nnotes\n"
                    )
                    store.write_batch(f"{ORG}/{SLUG}-{agent}", Batch(adds=[(path, body.encode())]))
                    source = f"hf://buckets/{ORG}/{SLUG}-{agent}/{path}"
                    response = client.post("/v1/results", json={"source": source})
                    response.raise_for_status()
                    after_new.append(timed(client, "GET", "/v1/leaderboard"))
                report("GET /v1/leaderboard right after a new result", after_new)
                sync_times = []
                for n in range(3):
                    source = f"hf://buckets/{ORG}/{SLUG}-{ids[0]}/model/"
                    sync_times.append(
                        timed(
                            client,
                            "POST",
                            "/v1/artifacts:sync",
                            json={"source": source, "dest_slug": f"bench-{n}"},
                        )
                    )
                print(
                    f"{'POST /v1/artifacts:sync (2,000 files, local store)':<52} "
                    + "  ".join(f"{1000 * t:.0f} ms" for t in sync_times)
                )
        finally:
            server.terminate()
            server.wait(10)


if __name__ == "__main__":
    main()
