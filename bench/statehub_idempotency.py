"""`Idempotency-Key` overhead on State Hub `POST /messages/`: the same sends with and
without a key, interleaved round by round against one real server per database, so both
variants meet the same machine load. Prints per database the median over rounds of the
p50 latency and of requests/s for each variant, and their ratio (with / without).

    PYTHONPATH=src python3 bench/statehub_idempotency.py [--rounds 6] [--sends 200]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

# Run as a plain script (`python3 bench/x.py`): the repository root holds `bench`.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._servers import percentile, pg_database, statehub_server

BODY = {"from_agent": "bench", "to_agent": "reader", "subject": "s", "body": "x" * 200}


def burst(client: httpx.Client, sends: int, *, keyed: bool) -> tuple[float, float]:
    """`sends` sends on one connection: (p50 ms, requests/s)."""
    latencies: list[float] = []
    start = time.perf_counter()
    for _ in range(sends):
        headers = {"Idempotency-Key": str(uuid.uuid4())} if keyed else {}
        t0 = time.perf_counter()
        response = client.post("/messages/", json=BODY, headers=headers)
        latencies.append((time.perf_counter() - t0) * 1000)
        assert response.status_code == 201, response.text
    return percentile(latencies, 50), sends / (time.perf_counter() - start)


@contextmanager
def sqlite_database() -> Iterator[str]:
    with tempfile.TemporaryDirectory() as tmp:
        yield f"sqlite:///{Path(tmp) / 'bench.db'}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--sends", type=int, default=200)
    args = parser.parse_args()
    print(f"{'database':<10} {'variant':<8} {'p50 ms':>8} {'req/s':>8}")
    for name, database in (("sqlite", sqlite_database()), ("postgres", pg_database())):
        with database as url, statehub_server(url) as (base, _pid):
            results: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
            with httpx.Client(base_url=base, timeout=30) as client:
                burst(client, 20, keyed=True)  # warm up both paths
                burst(client, 20, keyed=False)
                for round_ in range(args.rounds):
                    # Alternate which variant goes first, so drift hits both alike.
                    for keyed in (round_ % 2 == 0, round_ % 2 == 1):
                        results[keyed].append(burst(client, args.sends, keyed=keyed))
            medians = {
                keyed: (
                    statistics.median(p for p, _ in samples),
                    statistics.median(r for _, r in samples),
                )
                for keyed, samples in results.items()
            }
            for keyed, (p50, rate) in medians.items():
                print(f"{name:<10} {'key' if keyed else 'no key':<8} {p50:>8.2f} {rate:>8.1f}")
            ratio = medians[True][0] / medians[False][0]
            print(f"{name:<10} ratio p50 with/without key: {ratio:.2f}")


if __name__ == "__main__":
    main()
