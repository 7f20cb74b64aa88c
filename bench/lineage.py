"""Lineage cost: leaderboard and digest p50 on a 20,000-result, 200-agent challenge whose
results declare `builds_on`, against the same challenge without it.

Two apps on the local store, built from the same seed; the only difference is that in
one most results name one to three earlier results in `builds_on`. Reads are interleaved
(plain, lineage, plain, …) so drift hits both alike. Two phases:

- steady: repeated reads with no write between them (the credit counts are cached per
  results listing version, like the ranking);
- after a write: a new result lands before each read (for the lineage app one that
  builds on two earlier results), so the ranking and the lineage graph both catch up.

    PYTHONPATH=src python3 bench/lineage.py [--results 20000] [--agents 200] [--reads 60]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from fastapi.testclient import TestClient

sys.path.insert(1, str(Path(__file__).resolve().parent.parent))

from agenthub.bucketsync.app import create_app
from agenthub.bucketsync.core import frontmatter, naming
from agenthub.bucketsync.identity.local import LocalIdentity
from agenthub.bucketsync.results import lineage
from agenthub.bucketsync.settings import load_settings
from agenthub.bucketsync.storage.base import Batch
from agenthub.bucketsync.storage.local import LocalBucketStore
from agenthub.clock import FrozenClock

ORG, SLUG = "bench", "chal"
CENTRAL = f"{ORG}/{SLUG}-main-bucket"
START = datetime(2026, 1, 1, tzinfo=UTC)


def result(score: float, builds_on: list[str] | None, author: str, stamp: str) -> bytes:
    fm = {
        "agent": author,
        "timestamp": naming.stamp_to_iso(stamp),
        "via": "bucket",
        "score": round(score, 6),
        "method": "sieve variant",
        "status": "agent-run",
        "description": "a run",
    }
    if builds_on:
        fm["builds_on"] = builds_on
    return frontmatter.render(fm, "notes\n")


def build(data_dir: Path, results: int, agents: int, *, lineage: bool) -> list[str]:
    """The challenge's registrations and results, written straight to the store."""
    rng = random.Random(11)  # the same scores, authors and stamps in both apps
    store = LocalBucketStore(data_dir, durable=False)
    store.create(CENTRAL, creator="bucket-sync")
    store.create(f"{ORG}-admin/{SLUG}-audit", creator="bucket-sync", private=True)
    ids = [f"agent-{i:03d}" for i in range(agents)]
    adds = [
        (
            naming.registration_path(a),
            frontmatter.render({"agent_name": a, "hf_user": f"user{i}"}, f"I am {a}."),
        )
        for i, a in enumerate(ids)
    ]
    names: list[str] = []
    for index in range(results):
        author = rng.choice(ids)
        stamp = naming.stamp(START + timedelta(seconds=index * 3))
        picks = rng.sample(names, min(len(names), rng.choice((1, 2, 3)))) if names else []
        keep = rng.random() < 0.8
        refs = picks if lineage and keep else None
        name = naming.message_filename(stamp, author)
        adds.append((f"results/{name}", result(rng.uniform(0.1, 0.9), refs, author, stamp)))
        names.append(name)
        if len(adds) >= 2000:
            store.write_batch(CENTRAL, Batch(adds=adds))
            adds = []
    if adds:
        store.write_batch(CENTRAL, Batch(adds=adds))
    return names


class Variant:
    def __init__(self, label: str, root: Path, results: int, agents: int, lineage: bool) -> None:
        self.label = label
        self.lineage = lineage
        self.names = build(root / "data", results, agents, lineage=lineage)
        self.clock = FrozenClock(START + timedelta(days=30))
        settings = load_settings(
            ORG=ORG,
            COLLAB_SLUG=SLUG,
            AUDIT_BUCKET=f"{ORG}-admin/{SLUG}-audit",
            BUCKETSYNC_DATA_DIR=str(root / "data"),
            BUCKETSYNC_STORAGE="local",
            CONTENT_CACHE_MAX_BYTES=str(512 * 1024 * 1024),
            LISTING_TTL_S="3600",
        )
        identity = LocalIdentity(root / "users.json", org=ORG)
        self.app = create_app(settings, identity=identity, clock=self.clock)
        self.client = TestClient(self.app).__enter__()
        self.hub = self.app.state.hub
        self.rng = random.Random(5)
        self.samples: dict[str, list[float]] = {}

    def write_one(self) -> None:
        """A new result through the service's write path (write-through, new version)."""
        self.clock.advance(0.01)
        stamp = naming.stamp(self.clock.now())
        author = f"agent-{self.rng.randrange(200):03d}"
        refs = self.rng.sample(self.names, 2) if self.lineage else None
        name = naming.message_filename(stamp, author)
        self.hub.write_central([(f"results/{name}", result(0.5, refs, author, stamp))])
        self.names.append(name)

    def time(self, key: str, path: str) -> None:
        t0 = time.perf_counter()
        response = self.client.get(path)
        elapsed = (time.perf_counter() - t0) * 1000
        response.raise_for_status()
        self.samples.setdefault(key, []).append(elapsed)

    def close(self) -> None:
        self.client.__exit__(None, None, None)


def interleave(variants: list[Variant], reads: int, step: Callable[[Variant], None]) -> None:
    for _ in range(reads):
        for variant in variants:
            step(variant)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--results", type=int, default=20_000)
    parser.add_argument("--agents", type=int, default=200)
    parser.add_argument("--reads", type=int, default=60)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lineage-bench-") as tmp:
        t0 = time.perf_counter()
        plain = Variant("without lineage", Path(tmp) / "a", args.results, args.agents, False)
        linked = Variant("with lineage", Path(tmp) / "b", args.results, args.agents, True)
        variants = [plain, linked]
        print(f"built two challenges of {args.results} results in {time.perf_counter() - t0:.1f} s")
        for v in variants:  # cold: the first reads parse every result once
            t1 = time.perf_counter()
            v.client.get("/v1/leaderboard").raise_for_status()
            v.client.get("/v1/digest").raise_for_status()
            print(
                f"{v.label:<16} cold leaderboard + digest {1000 * (time.perf_counter() - t1):8.0f} ms"
            )
        edges = sum(len(e.nodes) for e in _graph(linked).out.values())
        print(f"lineage graph: {len(_graph(linked).out)} results with builds_on, {edges} edges")

        def steady(v: Variant) -> None:
            v.time("steady leaderboard", "/v1/leaderboard")
            v.time("steady digest", "/v1/digest")

        def after_write(v: Variant) -> None:
            v.write_one()
            v.time("after a write: leaderboard", "/v1/leaderboard")
            v.write_one()
            v.time("after a write: digest", "/v1/digest")

        interleave(variants, args.reads, steady)
        interleave(variants, args.reads, after_write)
        print(f"{'p50 (ms)':<30} {'without':>9} {'with':>9} {'ratio':>7}")
        for key in plain.samples:
            a = statistics.median(plain.samples[key])
            b = statistics.median(linked.samples[key])
            print(f"{key:<30} {a:9.2f} {b:9.2f} {b / a:7.2f}")
        for v in variants:
            v.close()


def _graph(v: Variant) -> lineage.Graph:
    return lineage.graph_of(v.hub)


if __name__ == "__main__":
    main()
