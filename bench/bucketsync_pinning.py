"""bucket-sync pinning benchmark, on the local store over real HTTP against an
`agenthub bucketsync serve` subprocess.

1. `POST /v1/results` naming a 2,000-file submission (the result is pinned: the folder is
   listed and every file's hash recorded) against the same promotion naming none,
   interleaved in one run. The first pin of a folder hashes every file (the local store
   caches hashes by inode afterwards; HF's listing carries xet hashes, so HF pays only the
   listing); both are reported, with their ratio to the unpinned promotion.
2. Verifier throughput with the pinned copy: results promoted in a row, each beating the
   last, verified one at a time (VERIFIER_CONCURRENCY=1) by the local runner: the pinned
   files compared, copied by hash, the harness run; results verified per minute.

    PYTHONPATH=src python3 bench/bucketsync_pinning.py [--files 2000] [--pairs 10] [--verify 8]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
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
SCORER = """
import argparse, json, pathlib
p = argparse.ArgumentParser()
p.add_argument("--submission-dir", type=pathlib.Path)
p.add_argument("--state-dir", type=pathlib.Path)
p.add_argument("--private-dir", type=pathlib.Path)
a, _ = p.parse_known_args()
score = float((a.submission_dir / "score.txt").read_text())
(a.state_dir / "summary.json").write_text(json.dumps({"score": score}))
"""


def build(data_dir: Path, agents: int, files: int, *, scored: bool = False) -> list[str]:
    """Registered agents, each with a `sub/` folder of `files` files (plus score.txt)."""
    store = LocalBucketStore(data_dir, durable=False)
    store.create(CENTRAL, creator="bucket-sync")
    store.create(AUDIT, creator="bucket-sync", private=True)
    store.write_batch(CENTRAL, Batch(adds=[("harness/run.py", SCORER.encode())]))
    store.write_batch(AUDIT, Batch(adds=[("private/eval.json", b"[]")]))
    ids = [f"agent-{i:03d}" for i in range(agents)]
    start = datetime(2026, 1, 1, tzinfo=UTC)
    registrations = []
    for i, agent in enumerate(ids):
        bucket = f"{ORG}/{SLUG}-{agent}"
        store.create(bucket, creator=f"user{i}")
        fm = {
            "agent_name": agent,
            "hf_user": f"user{i}",
            "agent_bucket": bucket,
            "joined": (start + timedelta(minutes=i)).isoformat(),
        }
        registrations.append((naming.registration_path(agent), frontmatter.render(fm, "")))
        adds = [(f"sub/part-{n:04d}.bin", os.urandom(512)) for n in range(files)]
        if scored:
            adds.append(("sub/score.txt", f"{0.1 + i / 100:.2f}".encode()))
        store.write_batch(bucket, Batch(adds=adds))
    store.write_batch(CENTRAL, Batch(adds=registrations))
    return ids


@contextmanager
def serve(data_dir: Path, **env: str) -> Iterator[httpx.Client]:
    port = free_port()
    environment = {
        **os.environ,
        "ORG": ORG,
        "COLLAB_SLUG": SLUG,
        "AUDIT_BUCKET": AUDIT,
        "BUCKETSYNC_DATA_DIR": str(data_dir),
        **env,
    }
    server = subprocess.Popen(
        [sys.executable, "-m", "agenthub.cli", "bucketsync", "serve", "--port", str(port)],
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=300) as client:
            wait_until_up(client, tries=300)
            yield client
    finally:
        server.terminate()
        server.wait(30)


def promote(
    client: httpx.Client, store: LocalBucketStore, agent: str, n: int, score: float, pinned: bool
) -> float:
    path = f"results/r-{n}.md"
    artifacts = "artifacts: sub/\n" if pinned else ""
    body = (
        f"---\nscore: {score}\nmethod: bench\nstatus: agent-run\n"
        f"description: run {n}\n{artifacts}---\nnotes\n"
    )
    store.write_batch(f"{ORG}/{SLUG}-{agent}", Batch(adds=[(path, body.encode())]))
    source = f"hf://buckets/{ORG}/{SLUG}-{agent}/{path}"
    t0 = time.perf_counter()
    response = client.post("/v1/results", json={"source": source})
    elapsed = time.perf_counter() - t0
    response.raise_for_status()
    return elapsed


def line(label: str, samples: list[float], base: float | None = None) -> float:
    p50 = statistics.median(samples)
    ratio = f"   x{p50 / base:5.2f} vs unpinned" if base else ""
    print(f"{label:<52} p50 {1000 * p50:8.1f} ms   n={len(samples)}{ratio}")
    return p50


def promotion(files: int, pairs: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bucketsync-pin-bench-") as tmp:
        data_dir = Path(tmp)
        ids = build(data_dir, pairs, files)
        store = LocalBucketStore(data_dir, durable=False)
        plain: list[float] = []
        cold: list[float] = []
        warm: list[float] = []
        with serve(data_dir) as client:
            for i, agent in enumerate(ids):  # interleaved: plain, pinned, plain, pinned again
                plain.append(promote(client, store, agent, 4 * i, 0.5, False))
                cold.append(promote(client, store, agent, 4 * i + 1, 0.5, True))
                plain.append(promote(client, store, agent, 4 * i + 2, 0.5, False))
                warm.append(promote(client, store, agent, 4 * i + 3, 0.5, True))
        print(f"promotion, {files:,}-file submission, local store:")
        base = line("POST /v1/results, no submission named (unpinned)", plain)
        line(f"POST /v1/results, pinned, first pin ({files:,} hashed)", cold, base)
        line("POST /v1/results, pinned, folder seen before", warm, base)


def throughput(files: int, results: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bucketsync-verify-bench-") as tmp:
        data_dir = Path(tmp)
        ids = build(data_dir, results, files, scored=True)
        store = LocalBucketStore(data_dir, durable=False)
        env = {
            "JOBS_ENABLED": "true",
            "VERIFIER_ENABLED": "true",
            "JOB_POLL_S": "0.1",
            "VERIFIER_HEARTBEAT_S": "5",
        }
        with serve(data_dir, **env) as client:
            t0 = time.perf_counter()
            for i, agent in enumerate(ids):  # rising scores: each one is a new champion
                promote(client, store, agent, 0, round(0.1 + i / 100, 2), True)
            while True:
                index = json.loads(store.read(CENTRAL, "results/verification_status.json") or b"{}")
                if len(index) >= results:
                    break
                if time.perf_counter() - t0 > 600:
                    raise SystemExit(f"only {len(index)} of {results} verified in 10 min")
                time.sleep(0.1)
            elapsed = time.perf_counter() - t0
            queue = client.get("/v1/queue").json()
        verdicts = sorted(set(index.values()))
        median = queue["durations"]["verification"]["median_s"]
        print(f"verifier, pinned copy of a {files:,}-file submission, local runner:")
        print(
            f"{'results verified':<52} {results} in {elapsed:6.1f} s = "
            f"{60 * results / elapsed:6.1f} per minute   verdicts {verdicts}   "
            f"median run {median:.2f} s"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--verify", type=int, default=8)
    args = parser.parse_args()
    promotion(args.files, args.pairs)
    throughput(args.files, args.verify)
    throughput(20, args.verify)


if __name__ == "__main__":
    main()
