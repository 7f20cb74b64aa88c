"""Reveal of a private split: the time from the reveal moment to the final leaderboard, on
the local store over real HTTP against an `agenthub bucketsync serve` subprocess.

10,000 results by 200 agents, each with its private-split score in the audit bucket
(`private_split/{filename}.json`, as the verifier or the evaluator writes it), half the
agents with two marked final entries. Each round starts a fresh server whose `final`
phase (`split: private`) begins a few seconds later, waits for that moment, and times the
first `GET /v1/leaderboard/final` after it (which also writes the phase:changed event:
the first request after a change announces it), then a warm one. Two variants,
interleaved: `warm` has read the public leaderboard before the reveal (a server that was
serving), `cold` has not (a server just restarted at the reveal).

    PYTHONPATH=src python3 bench/lifecycle_reveal.py [--results 10000] [--agents 200] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(1, str(Path(__file__).resolve().parent.parent))

from agenthub.bucketsync.core import frontmatter, naming
from agenthub.bucketsync.phases import announce, finals, private
from agenthub.bucketsync.storage.base import Batch
from agenthub.bucketsync.storage.local import LocalBucketStore
from bench.bucketsync_pinning import AUDIT, CENTRAL, serve
from bench.bucketsync_pinning import build as registered


def build(data_dir: Path, results: int, agents: int, rng: random.Random) -> None:
    ids = registered(data_dir, agents, 0)  # registered agents with scratch buckets
    store = LocalBucketStore(data_dir, durable=False)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    adds: list[tuple[str, bytes]] = []
    secret: list[tuple[str, bytes]] = []
    mine: dict[str, list[str]] = {}
    for n in range(results):
        agent = rng.choice(ids)
        stamp = naming.stamp(start + timedelta(seconds=n * 3, milliseconds=rng.randrange(1000)))
        filename = naming.message_filename(stamp, agent)
        fm = {"agent": agent, "timestamp": naming.stamp_to_iso(stamp), "via": "bucket",
              "score": round(rng.uniform(0.1, 0.99), 5), "method": "m", "status": "agent-run",
              "description": f"run {n}"}  # fmt: skip
        adds.append((naming.result_path(filename), frontmatter.render(fm, "notes\n")))
        score = round(rng.uniform(0.1, 0.99), 6)
        body = {"result": filename, "score": score, "recorded_at": "x", "mode": "eval-space"}
        secret.append((private.path_of(filename), json.dumps(body).encode()))
        mine.setdefault(agent, []).append(filename)
    index = {name: "valid" for name, _ in ((p.rsplit("/", 1)[-1], d) for p, d in adds)}
    adds.append(("results/verification_status.json", json.dumps(index).encode()))
    for at in range(0, len(adds), 5000):
        store.write_batch(CENTRAL, Batch(adds=adds[at : at + 5000]))
    for at in range(0, len(secret), 5000):
        store.write_batch(AUDIT, Batch(adds=secret[at : at + 5000]))
    marks = [
        (finals.path_of(agent), json.dumps({"agent": agent, "marked": names[:2]}).encode())
        for agent, names in sorted(mine.items())[::2]
    ]
    store.write_batch(AUDIT, Batch(adds=marks))
    print(f"built: {results} results, {agents} agents, {results} private scores, "
          f"{len(marks)} agents with marked entries")  # fmt: skip


def iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def one_round(data_dir: Path, variant: str, lead_s: float) -> tuple[float, float]:
    """(first final-leaderboard read after the reveal, a warm one), in seconds."""
    store = LocalBucketStore(data_dir, durable=False)
    markers = [e.path for e in store.list(AUDIT, announce.MARKERS)]
    if markers:
        store.write_batch(AUDIT, Batch(deletes=markers))  # each round reveals anew
    # The reveal comes `lead_s` after the server starts: time to start and warm up first.
    reveal = datetime.now(UTC) + timedelta(seconds=lead_s)
    phases = [
        {"name": "dev", "start": iso(reveal - timedelta(days=30)), "end": iso(reveal)},
        {"name": "final", "start": iso(reveal), "end": iso(reveal + timedelta(days=7)),
         "results": False, "split": "private"},
    ]  # fmt: skip
    with serve(data_dir, LISTING_TTL_S="600", CHALLENGE_PHASES=json.dumps(phases)) as client:
        sealed = client.get("/v1/leaderboard/final").json()
        assert sealed["status"] == "sealed", "the reveal came before the server was up"
        if variant == "warm":
            client.get("/v1/leaderboard").raise_for_status()
        left = (reveal - datetime.now(UTC)).total_seconds()
        assert left > 0, f"raise --lead-s: warming ended {-left:.1f} s after the reveal"
        time.sleep(left + 0.01)
        t0 = time.perf_counter()
        final = client.get("/v1/leaderboard/final")
        first = time.perf_counter() - t0
        final.raise_for_status()
        assert final.json()["status"] == "revealed" and final.json()["count"] > 0
        t0 = time.perf_counter()
        client.get("/v1/leaderboard/final").raise_for_status()
        warm = time.perf_counter() - t0
        return first, warm


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--results", type=int, default=10_000)
    parser.add_argument("--agents", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--lead-s", type=float, default=25.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lifecycle-reveal-bench-") as tmp:
        data_dir = Path(tmp)
        build(data_dir, args.results, args.agents, random.Random(7))
        times: dict[str, list[tuple[float, float]]] = {"warm": [], "cold": []}
        for _ in range(args.rounds):
            for variant in ("warm", "cold"):  # interleaved
                times[variant].append(one_round(data_dir, variant, args.lead_s))
        for variant, rounds in times.items():
            first = statistics.median(r[0] for r in rounds)
            again = statistics.median(r[1] for r in rounds)
            print(f"{variant:<5} server: reveal -> final leaderboard p50 {1000 * first:7.1f} ms"
                  f"   (then warm p50 {1000 * again:6.1f} ms)   n={len(rounds)}")  # fmt: skip


if __name__ == "__main__":
    main()
