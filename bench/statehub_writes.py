"""State Hub write benchmark: sends, unread reads (which stamp delivery) and acks over HTTP.

For each database (a temp SQLite file, a throw-away PostgreSQL database) and each run,
a real uvicorn server is started in a subprocess on a socket bound to a free loopback
port, on a fresh database. Then, for each N, N client threads (one HTTP connection
each) hammer one operation for a fixed time:

    send  POST /messages/                        a broadcast from client i
    read  GET  /messages/?to_agent=reader-i&unread_only=true&limit=20
                                                 a write: stamps delivered_at receipts
    ack   POST /messages/{id}/ack?agent=reader-i over the broadcasts sent so far

The table shows, per database, operation and N, the median over runs of requests/s
and of the p50/p99 latency. Client and server share the machine, so the figures are
for comparing databases, operations and N with each other, not absolute capacity.

    PYTHONPATH=src python3 bench/statehub_writes.py [--runs 3] [--seconds 2] [--clients 1,8,32]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from agenthub.db import normalize_url

OPERATIONS = ("send", "read", "ack")
DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/postgres"


@dataclass(frozen=True)
class Sample:
    requests_per_s: float
    p50_ms: float
    p99_ms: float
    errors: int


# -- the server -----------------------------------------------------------------


def serve(fd: int, database_url: str) -> None:
    """Child mode: run State Hub on an already-bound listening socket."""
    import uvicorn

    from agenthub.statehub.app import create_app
    from agenthub.statehub.settings import StateHubSettings

    settings = StateHubSettings(database_url=database_url, instance_label="bench")
    sock = socket.socket(fileno=fd)
    server = uvicorn.Server(
        uvicorn.Config(create_app(settings), log_level="warning", access_log=False)
    )
    server.run(sockets=[sock])


@contextmanager
def running_server(database_url: str) -> Iterator[str]:
    # The parent binds port 0 and hands the socket down, so no other process can
    # take the port between choosing it and listening on it.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    port = sock.getsockname()[1]
    child = subprocess.Popen(
        [
            sys.executable,
            __file__,
            "--serve-fd",
            str(sock.fileno()),
            "--database-url",
            database_url,
        ],
        pass_fds=[sock.fileno()],
    )
    sock.close()
    base_url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if child.poll() is not None:
                raise SystemExit(f"State Hub server exited with {child.returncode}")
            try:
                if httpx.get(f"{base_url}/state/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit("State Hub server did not become healthy within 60 s")
            time.sleep(0.1)
        yield base_url
    finally:
        child.terminate()
        try:
            child.wait(timeout=20)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


@contextmanager
def sqlite_database() -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="statehub-bench-") as tmp:
        yield f"sqlite:///{Path(tmp) / 'statehub.db'}"


@contextmanager
def pg_database(server_url: str) -> Iterator[str]:
    name = f"agenthub_bench_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    admin = create_engine(normalize_url(server_url), isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        yield make_url(server_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


# -- the clients ----------------------------------------------------------------


class Workload:
    """The requests of one operation; client `i` acts as `reader-i`."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self._lock = threading.Lock()
        self._ack_cursor = 0

    def request(self, operation: str, http: httpx.Client, i: int) -> httpx.Response:
        if operation == "send":
            response = http.post(
                "/messages/",
                json={
                    "from_agent": f"writer-{i}",
                    "to_agent": "*",
                    "subject": "s",
                    "body": "b" * 200,
                },
            )
            if response.status_code == 201:
                with self._lock:
                    self.sent.append(response.json()["id"])
            return response
        if operation == "read":
            return http.get(
                "/messages/", params={"to_agent": f"reader-{i}", "unread_only": "true", "limit": 20}
            )
        with self._lock:
            message_id = self.sent[self._ack_cursor % len(self.sent)]
            self._ack_cursor += 1
        return http.post(f"/messages/{message_id}/ack", params={"agent": f"reader-{i}"})


def measure(
    base_url: str, operation: str, clients: int, seconds: float, workload: Workload
) -> Sample:
    latencies: list[list[float]] = [[] for _ in range(clients)]
    errors = [0] * clients
    start = threading.Barrier(clients + 1)
    stop_at: list[float] = []

    def client(i: int) -> None:
        with httpx.Client(base_url=base_url, timeout=60) as http:
            http.get("/state/health")
            start.wait()
            while time.perf_counter() < stop_at[0]:
                t0 = time.perf_counter()
                response = workload.request(operation, http, i)
                latencies[i].append(time.perf_counter() - t0)
                if response.status_code >= 400:
                    errors[i] += 1

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    began = time.perf_counter()
    stop_at.append(began + seconds)
    start.wait()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - began
    flat = sorted(x for per_client in latencies for x in per_client)
    return Sample(
        requests_per_s=len(flat) / elapsed,
        p50_ms=percentile(flat, 50) * 1000,
        p99_ms=percentile(flat, 99) * 1000,
        errors=sum(errors),
    )


def percentile(sorted_values: list[float], pct: float) -> float:
    if not sorted_values:
        return float("nan")
    index = min(len(sorted_values) - 1, round(pct / 100 * (len(sorted_values) - 1)))
    return sorted_values[index]


# -- the table ------------------------------------------------------------------


def run_database(
    label: str,
    database: Callable[[], AbstractContextManager[str]],
    clients: list[int],
    seconds: float,
    runs: int,
) -> dict[tuple[str, int], list[Sample]]:
    samples: dict[tuple[str, int], list[Sample]] = {}
    for run in range(runs):
        with database() as url, running_server(url) as base_url:
            workload = Workload()
            for operation in OPERATIONS:
                for n in clients:
                    sample = measure(base_url, operation, n, seconds, workload)
                    samples.setdefault((operation, n), []).append(sample)
                    print(
                        f"  {label} run {run + 1}/{runs} {operation:<4} N={n:<3}"
                        f" {sample.requests_per_s:8.0f} req/s  p50 {sample.p50_ms:6.1f} ms"
                        f"  p99 {sample.p99_ms:6.1f} ms  errors {sample.errors}",
                        file=sys.stderr,
                    )
    return samples


def print_table(results: dict[str, dict[tuple[str, int], list[Sample]]], runs: int) -> None:
    print(f"\nState Hub writes over HTTP: median of {runs} run(s)\n")
    header = (
        f"{'database':<10} {'op':<5} {'N':>3} {'req/s':>9}"
        f" {'p50 ms':>8} {'p99 ms':>8} {'errors':>7}"
    )
    print(header)
    print("-" * len(header))
    for label, samples in results.items():
        for (operation, n), values in samples.items():
            print(
                f"{label:<10} {operation:<5} {n:>3}"
                f" {statistics.median(s.requests_per_s for s in values):>9.0f}"
                f" {statistics.median(s.p50_ms for s in values):>8.1f}"
                f" {statistics.median(s.p99_ms for s in values):>8.1f}"
                f" {sum(s.errors for s in values):>7}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="runs per database (median shown)")
    parser.add_argument("--seconds", type=float, default=2.0, help="duration of each measurement")
    parser.add_argument("--clients", default="1,8,32", help="comma-separated concurrency levels")
    parser.add_argument(
        "--databases", default="sqlite,postgresql", help="comma-separated: sqlite, postgresql"
    )
    parser.add_argument(
        "--pg-url",
        default=os.environ.get("AGENTHUB_TEST_PG_URL", DEFAULT_PG_URL),
        help="PostgreSQL server to create the throw-away database on",
    )
    parser.add_argument("--serve-fd", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--database-url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_fd is not None:
        serve(args.serve_fd, args.database_url)
        return
    clients = [int(n) for n in args.clients.split(",")]
    factories = {"sqlite": sqlite_database, "postgresql": lambda: pg_database(args.pg_url)}
    results = {}
    for label in args.databases.split(","):
        if label not in factories:
            parser.error(f"unknown database {label!r}: use sqlite and/or postgresql")
        results[label] = run_database(label, factories[label], clients, args.seconds, args.runs)
    print_table(results, args.runs)


if __name__ == "__main__":
    main()
