"""The token-budgeted digest against the plain one, on a 20,000-message board.

Builds the board of `bucketsync_reads.py` (300 agents, inbox copies backfilled), serves it
with `agenthub bucketsync serve` in a subprocess, then asks for `GET /v1/digest?as=<h>`
and `GET /v1/digest?as=<h>&budget_tokens=4000` alternately (the order flips every round, so
neither variant always runs on the warmer cache), after one warm-up request per handle and
variant, and prints each one's p50/p99 latency and
body size, and the ratio of the medians.

    PYTHONPATH=src python3 bench/coordination_digest.py [--messages 20000] [--rounds 300]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(1, str(Path(__file__).resolve().parent.parent))

from bench._servers import percentile
from bench.bucketsync_pinning import serve
from bench.bucketsync_reads import build_board


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--agents", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--budget", type=int, default=4000)
    args = parser.parse_args()
    rng = random.Random(11)
    with tempfile.TemporaryDirectory(prefix="coordination-digest-") as tmp:
        data_dir = Path(tmp)
        ids = build_board(data_dir, args.messages, args.agents, rng)
        with serve(data_dir) as client:
            variants: dict[str, Callable[[str], dict[str, str]]] = {
                "plain": lambda h: {"as": h},
                "budgeted": lambda h: {"as": h, "budget_tokens": str(args.budget)},
            }
            # Warm the listings and every handle's records: the steady state, where the
            # read model holds what both variants read (the budgeted one reads more of
            # a handle's mail, up to what fits).
            for handle in ids:
                for make in variants.values():
                    client.get("/v1/digest", params=make(handle)).raise_for_status()
            took: dict[str, list[float]] = {name: [] for name in variants}
            sizes: dict[str, list[int]] = {name: [] for name in variants}
            for round_ in range(args.rounds):
                handle = rng.choice(ids)
                names = list(variants) if round_ % 2 == 0 else list(variants)[::-1]
                for name in names:
                    t0 = time.perf_counter()
                    answer = client.get("/v1/digest", params=variants[name](handle))
                    took[name].append(1000 * (time.perf_counter() - t0))
                    answer.raise_for_status()
                    sizes[name].append(len(answer.content))
            assert max(sizes["budgeted"]) <= 4 * args.budget, "a digest over its budget"
            for name in variants:
                print(
                    f"GET /v1/digest {name:<9} p50 {statistics.median(took[name]):7.2f} ms"
                    f"   p99 {percentile(took[name], 99):7.2f} ms"
                    f"   body median {statistics.median(sizes[name]):8.0f} B"
                    f" (max {max(sizes[name])} B)"
                )
            ratio = statistics.median(took["budgeted"]) / statistics.median(took["plain"])
            print(
                f"budgeted/plain p50 ratio {ratio:.2f} "
                f"({args.messages} messages, {args.rounds} interleaved rounds, "
                f"budget_tokens={args.budget})"
            )


if __name__ == "__main__":
    main()
