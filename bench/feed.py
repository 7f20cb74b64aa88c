"""Change-feed benchmarks (issue: State Hub feed). Prints three tables.

1. Write throughput (pgbench, SQL level) at 1 and 8 clients: a plain table
   with no revision trigger vs `lock` vs `xid`.
2. Feed catch-up over HTTP: changes/s following 200k changes at limit 5000,
   on SQLite and PostgreSQL.
3. Snapshot of 200k messages: wall time and the server's peak RSS.

    python bench/feed.py [--changes 200000] [--seconds 10] [--runs 3]
"""

from __future__ import annotations

import argparse
import contextlib
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import insert, text

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agenthub.db import make_engine
from agenthub.statehub import migrate, revisions, source
from agenthub.statehub.models import AgentMessage
from agenthub.statehub.store import Database
from bench._servers import peak_rss_mb, pg_database, statehub_server

PGBENCH_SCRIPT = """
INSERT INTO agent_messages (id, from_agent, to_agent, subject, body, kind, created_at)
VALUES (gen_random_uuid(), 'bench', 'inbox', 'subject', 'body of a benchmark message',
        'message', now());
"""
ROWS_PER_TRANSACTION = 100


def pgbench_tps(url: str, clients: int, seconds: int, sql: str = PGBENCH_SCRIPT) -> float:
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as script:
        script.write(sql)
    out = subprocess.run(
        ["pgbench", "-n", "-c", str(clients), "-j", str(clients), "-T", str(seconds),
         "-f", script.name, url],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    match = re.search(r"tps = ([0-9.]+)", out)
    assert match, out
    return float(match.group(1))


WRITE_VARIANTS = ("plain", "lock", "xid")


def write_variant_databases(stack: contextlib.ExitStack[Any]) -> dict[str, str]:
    """A throw-away database per write variant: `plain` (the revision triggers
    dropped), `lock` and `xid`; closed with `stack`."""
    urls = {v: stack.enter_context(pg_database()) for v in WRITE_VARIANTS}
    for variant, url in urls.items():
        engine = make_engine(url)
        migrate.upgrade(engine)
        if variant == "plain":
            with engine.begin() as conn:
                for statement in revisions.PG_DROP[:4]:  # the triggers only
                    conn.execute(text(statement))
        else:
            source.prepare(Database(engine), variant)  # type: ignore[arg-type]
        engine.dispose()
    return urls


def write_throughput(seconds: int, runs: int) -> None:
    """Each round measures every variant back to back (interleaved), so machine noise
    hits all three alike; the ratio is taken per round and the median reported."""
    print(
        f"\n## Write throughput (pgbench, {seconds}s per run, median of {runs} interleaved rounds)"
    )
    variants = WRITE_VARIANTS
    with contextlib.ExitStack() as stack:
        urls = write_variant_databases(stack)
        tps: dict[tuple[str, int], list[float]] = {}
        for _round in range(runs):
            for clients in (1, 8):
                for variant in variants:
                    tps.setdefault((variant, clients), []).append(
                        pgbench_tps(urls[variant], clients, seconds)
                    )
    print(
        f"{'variant':<10}{'1 writer tx/s':>16}{'8 writers tx/s':>16}{'8w vs plain (median of ratios)':>32}"
    )
    for variant in variants:
        ratios = [x / p for x, p in zip(tps[(variant, 8)], tps[("plain", 8)], strict=True)]
        print(
            f"{variant:<10}{statistics.median(tps[(variant, 1)]):>16,.0f}"
            f"{statistics.median(tps[(variant, 8)]):>16,.0f}{statistics.median(ratios):>31.0%}"
        )


def load_changes(url: str, changes: int) -> None:
    """`changes` messages in transactions of 100 rows: one revision each."""
    engine = make_engine(url)
    migrate.upgrade(engine)
    db = Database(engine)
    now = datetime.now(UTC)
    body = "x" * 200
    for start in range(0, changes, ROWS_PER_TRANSACTION):
        rows = [
            {"id": uuid.uuid4(), "from_agent": f"agent-{i % 50}", "to_agent": f"agent-{i % 37}",
             "subject": f"message {i}", "body": body, "kind": "message", "created_at": now}
            for i in range(start, min(changes, start + ROWS_PER_TRANSACTION))
        ]  # fmt: skip
        with db.write() as session:
            session.execute(insert(AgentMessage), rows)
    engine.dispose()


def catch_up_and_snapshot(changes: int, runs: int) -> None:
    print(f"\n## Feed catch-up and snapshot over HTTP ({changes:,} messages, median of {runs})")
    print(
        f"{'database':<12}{'catch-up changes/s':>20}{'pages':>8}{'snapshot s':>12}{'server peak RSS MB':>20}"
    )
    with tempfile.TemporaryDirectory() as tmp, pg_database() as pg_url:
        for name, url in (("sqlite", f"sqlite:///{tmp}/feed.db"), ("postgresql", pg_url)):
            load_changes(url, changes)
            rates: list[float] = []
            pages = 0
            with statehub_server(url) as (base, _pid), httpx.Client(timeout=120) as client:
                for _ in range(runs):
                    cursor, got, pages = "v1:0", 0, 0
                    started = time.perf_counter()
                    while True:
                        page = client.get(
                            f"{base}/messages/feed", params={"after": cursor, "limit": 5000}
                        ).json()
                        got += len(page["changes"])
                        pages += 1
                        cursor = page["next_cursor"]
                        if not page["has_more"]:
                            break
                    rates.append(got / (time.perf_counter() - started))
                    assert got == changes, (got, changes)
            snapshot_times: list[float] = []
            peaks: list[float] = []
            for _ in range(runs):
                with statehub_server(url) as (base, pid), httpx.Client(timeout=300) as client:
                    started = time.perf_counter()
                    body = client.get(f"{base}/messages/feed/snapshot").json()
                    snapshot_times.append(time.perf_counter() - started)
                    peaks.append(peak_rss_mb(pid))
                    assert body["count"] == changes
            print(
                f"{name:<12}{statistics.median(rates):>20,.0f}{pages:>8}"
                f"{statistics.median(snapshot_times):>12.2f}{statistics.median(peaks):>20.0f}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--changes", type=int, default=200_000)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--skip-writes", action="store_true")
    args = parser.parse_args()
    if not args.skip_writes:
        write_throughput(args.seconds, args.runs)
    catch_up_and_snapshot(args.changes, args.runs)


if __name__ == "__main__":
    main()
