"""State Hub behind pgbouncer (transaction pooling) vs direct PostgreSQL.

Two throw-away databases; on each, three `agenthub statehub serve` processes: one set
reaches its database directly, the other through pgbouncer (with STATEHUB_LISTEN_URL
naming the direct connection for the feed wake). Rounds alternate between the sets.
Each round:

    send  8 writer threads per process (24 in all, one HTTP connection each) POST
          /messages/ for --seconds; requests/s, and failed requests
    wake  a reader parks on one process's feed (`wait=20`) and a message is sent to
          another process; time from the POST's start to the reader's page, --wakes
          times, each pair of processes in turn

The table shows, per set, the median over rounds of send requests/s, send p50/p99,
wake p50/p99 and the failures. pgbouncer comes from AGENTHUB_TEST_PGBOUNCER_URL or is
started on a free port (Debian's `pgbouncer` binary). Client, servers, pgbouncer and
PostgreSQL share the machine: compare the rows with each other.

    PYTHONPATH=src python3 bench/pgbouncer.py [--rounds 3] [--seconds 3] [--wakes 20]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.pgbouncer import pgbouncer_server_url, through

from bench._servers import PG_SERVER, percentile, pg_database, statehub_server

PROCESSES = 3
WRITERS = 8


@dataclass
class Round:
    sends_per_s: float
    send_p50_ms: float
    send_p99_ms: float
    failed: int
    wake_p50_ms: float
    wake_p99_ms: float


def _message(i: int) -> dict[str, str]:
    return {"from_agent": f"w{i}", "to_agent": "*", "subject": "bench", "body": "x"}


def send_load(bases: list[str], seconds: float) -> tuple[list[float], int]:
    """WRITERS threads per process send for `seconds`; latencies (s) and failures."""
    latencies: list[float] = []
    failed = 0
    lock = threading.Lock()
    ready = threading.Barrier(len(bases) * WRITERS + 1)
    stop = [0.0]

    def writer(base: str, i: int) -> None:
        nonlocal failed
        mine: list[float] = []
        errors = 0
        with httpx.Client(base_url=base, timeout=30) as http:
            http.get("/state/health")  # connected before the clock starts
            ready.wait()
            while time.monotonic() < stop[0]:
                started = time.perf_counter()
                try:
                    ok = http.post("/messages/", json=_message(i)).status_code == 201
                except httpx.HTTPError:
                    ok = False
                mine.append(time.perf_counter() - started)
                errors += not ok
        with lock:
            latencies.extend(mine)
            failed += errors

    threads = [
        threading.Thread(target=writer, args=(base, n)) for base in bases for n in range(WRITERS)
    ]
    for thread in threads:
        thread.start()
    stop[0] = time.monotonic() + 3600
    ready.wait()
    stop[0] = time.monotonic() + seconds
    for thread in threads:
        thread.join()
    return latencies, failed


def _park(reader: httpx.Client, head: str, page: dict[str, object]) -> None:
    page.update(reader.get("/messages/feed", params={"after": head, "wait": 20}).json())


def wakes(bases: list[str], count: int) -> list[float]:
    """Seconds from a POST's start on one process to a reader parked on another
    process getting the page with it."""
    results: list[float] = []
    with contextlib.ExitStack() as stack:
        clients = [stack.enter_context(httpx.Client(base_url=b, timeout=30)) for b in bases]
        for n in range(count):
            reader, writer = clients[n % len(clients)], clients[(n + 1) % len(clients)]
            head = reader.get("/messages/feed", params={"after": "v1:0"}).json()["high_water"]
            page: dict[str, object] = {}
            thread = threading.Thread(target=_park, args=(reader, head, page))
            thread.start()
            time.sleep(0.05)  # parked
            started = time.perf_counter()
            writer.post("/messages/", json=_message(n))
            thread.join(30)
            results.append(time.perf_counter() - started)
            assert page.get("changes"), page
    return results


@contextlib.contextmanager
def processes(database_url: str, listen_url: str | None) -> Iterator[list[str]]:
    env = {"STATEHUB_LISTEN_URL": listen_url} if listen_url else {}
    with contextlib.ExitStack() as stack:
        bases = []
        for _ in range(PROCESSES):
            base, _pid = stack.enter_context(statehub_server(database_url, access_log=False, **env))
            bases.append(base)
        yield bases


def measure(bases: list[str], seconds: float, wake_count: int) -> Round:
    latencies, failed = send_load(bases, seconds)
    ordered = sorted(latencies)
    woken = sorted(wakes(bases, wake_count))
    return Round(
        sends_per_s=len(latencies) / seconds,
        send_p50_ms=percentile(ordered, 50) * 1000,
        send_p99_ms=percentile(ordered, 99) * 1000,
        failed=failed,
        wake_p50_ms=percentile(woken, 50) * 1000,
        wake_p99_ms=percentile(woken, 99) * 1000,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds per set (median shown)")
    parser.add_argument("--seconds", type=float, default=3.0, help="send load per round")
    parser.add_argument("--wakes", type=int, default=20, help="wake probes per round")
    args = parser.parse_args()

    pooler = pgbouncer_server_url(PG_SERVER)
    if pooler is None:
        sys.exit(
            "needs AGENTHUB_TEST_PGBOUNCER_URL or the pgbouncer binary (apt install pgbouncer)"
        )
    results: dict[str, list[Round]] = {"direct": [], "pgbouncer": []}
    with (
        pg_database("agenthub_bench_direct") as direct_url,
        pg_database("agenthub_bench_pooled") as pooled_direct_url,
    ):
        pooled_url = through(pooler, pooled_direct_url)
        with (
            processes(direct_url, None) as direct,
            processes(pooled_url, pooled_direct_url) as pooled,
        ):
            sets = {"direct": direct, "pgbouncer": pooled}
            for bases in sets.values():  # warm up: every pool connection open
                send_load(bases, 1.0)
            for n in range(args.rounds):
                order = ["direct", "pgbouncer"] if n % 2 == 0 else ["pgbouncer", "direct"]
                for name in order:
                    results[name].append(measure(sets[name], args.seconds, args.wakes))
                    r = results[name][-1]
                    print(
                        f"  round {n + 1} {name:9} {r.sends_per_s:7.0f} sends/s "
                        f"failed {r.failed}  wake p50 {r.wake_p50_ms:.1f} ms "
                        f"p99 {r.wake_p99_ms:.1f} ms",
                        flush=True,
                    )

    print(
        f"\n{PROCESSES} State Hub processes x {WRITERS} writers, {args.rounds} interleaved"
        f" rounds of {args.seconds:g} s + {args.wakes} wakes (medians over rounds)"
    )
    header = f"{'':10} {'sends/s':>8} {'send p50':>9} {'send p99':>9} {'failed':>7}"
    print(f"{header} {'wake p50':>9} {'wake p99':>9}")
    for name, rounds in results.items():

        def med(field: str, rs: list[Round] = rounds) -> float:
            return float(statistics.median(getattr(r, field) for r in rs))

        print(
            f"{name:10} {med('sends_per_s'):8.0f} {med('send_p50_ms'):7.1f}ms"
            f" {med('send_p99_ms'):7.1f}ms {sum(r.failed for r in rounds):7d}"
            f" {med('wake_p50_ms'):7.1f}ms {med('wake_p99_ms'):7.1f}ms"
        )


if __name__ == "__main__":
    main()
