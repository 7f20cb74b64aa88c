"""Replication benchmark: State Hub -> hub-core following its change feed.

For SQLite and PostgreSQL (both services on the same kind of database):

  lag       `statehub serve` and `hubcore serve` (following, HUBCORE_STATEHUB_URL) as
            separate processes; W writes to State Hub at R writes/s; for each, the
            time from the POST returning to the message being readable through
            hub-core's authenticated endpoint (a reader polls it back to back).
            p50 / p99 / max. Target p99 < 250 ms.
  snapshot  N messages seeded into State Hub, then `agenthub hubcore follow --once`
            into an empty hub-core: paged snapshot staged and swapped in. Seconds,
            and peak RSS of the State Hub server and of the follower. Target < 300 MB each.
  apply     the page applier alone: C changes in pages of 1000 (revisions of 50 rows),
            fetched first, then applied. Changes/s. Target >= 10,000.

Usage: python bench/replication_lag.py [--writes 1000] [--rate 50] [--messages 1000000]
       [--changes 50000] [--pg postgresql://…] [--only lag snapshot apply]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import insert

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from agenthub.clock import SystemClock  # noqa: E402
from agenthub.db import make_engine  # noqa: E402
from agenthub.hubcore import migrate  # noqa: E402
from agenthub.hubcore.apply import PageApplier  # noqa: E402
from agenthub.hubcore.feed_snapshot import SnapshotImporter  # noqa: E402
from agenthub.hubcore.feedclient import InProcessFeedSource  # noqa: E402
from agenthub.hubcore.store import Database  # noqa: E402
from agenthub.statehub import migrate as statehub_migrate  # noqa: E402
from agenthub.statehub import source as statehub_source  # noqa: E402
from agenthub.statehub.feed import FeedService  # noqa: E402
from agenthub.statehub.models import AgentMessage  # noqa: E402
from agenthub.statehub.snapshot import PagedSnapshots  # noqa: E402
from agenthub.statehub.store import Database as StateHubDatabase  # noqa: E402
from bench._servers import (  # noqa: E402
    free_port,
    peak_rss_mb,
    percentile,
    pg_database,
    statehub_server,
)
from bench.hubcore_import import seed_statehub  # noqa: E402

TOKEN = "bench-token"
READER = "operator"
PATH = "/ports/projections/statehub-inbox"
# The reader's pause between reads: the resolution of the lag figure, and what keeps
# the reader from starving hub-core's own follower of CPU on a small machine.
POLL_S = 0.005


@contextmanager
def databases(kind: str, tmp: Path) -> Iterator[tuple[str, str]]:
    if kind == "sqlite":
        tag = uuid.uuid4().hex[:6]
        yield f"sqlite:///{tmp / f'statehub-{tag}.db'}", f"sqlite:///{tmp / f'hubcore-{tag}.db'}"
        return
    with pg_database("agenthub_bench_sh") as source, pg_database("agenthub_bench_hc") as target:
        yield source, target


@contextmanager
def hubcore_server(database_url: str, statehub_url: str) -> Iterator[tuple[str, int]]:
    port = free_port()
    env = {
        **os.environ,
        "HUBCORE_DATABASE_URL": database_url,
        "HUBCORE_STATEHUB_URL": statehub_url,
        "HUB_CORE_STATEHUB_INBOX_READS": "1",
        "HUB_CORE_OPERATOR_TOKEN": TOKEN,
        "HUB_CORE_STATEHUB_INBOX_AGENT": READER,
        "PYTHONPATH": str(ROOT / "src"),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "agenthub.cli", "hubcore", "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                health = httpx.get(f"{base}/healthz", timeout=1).json()
                if health.get("cursor"):
                    break
            except (httpx.HTTPError, ValueError):
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("hub-core did not start following")
            time.sleep(0.1)
        yield base, proc.pid
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def bench_lag(kind: str, writes: int, rate: float, tmp: Path) -> dict[str, float]:
    with (
        databases(kind, tmp) as (source_url, target_url),
        statehub_server(source_url, PYTHONPATH=str(ROOT / "src")) as (statehub, _),
        hubcore_server(target_url, statehub) as (hubcore, _),
    ):
        written: dict[str, float] = {}
        seen: dict[str, float] = {}
        done = threading.Event()

        def reader() -> None:
            with httpx.Client(base_url=hubcore, headers={"Authorization": f"Bearer {TOKEN}"}) as c:
                while not done.is_set() or len(seen) < len(written):
                    response = c.get(PATH, params={"to_agent": READER, "limit": 20})
                    now = time.perf_counter()
                    for message in response.json():
                        seen.setdefault(message["id"], now)
                    time.sleep(POLL_S)
                    if done.is_set() and time.perf_counter() - last_write[0] > 10:
                        return

        last_write = [time.perf_counter()]
        thread = threading.Thread(target=reader, daemon=True)
        thread.start()
        interval = 1.0 / rate
        with httpx.Client(base_url=statehub) as client:
            start = time.perf_counter()
            for i in range(writes):
                target = start + i * interval
                pause = target - time.perf_counter()
                if pause > 0:
                    time.sleep(pause)
                body = {"from_agent": "bench", "to_agent": READER, "subject": f"w{i}", "body": "x"}
                response = client.post("/messages/", json=body)
                now = time.perf_counter()
                written[response.json()["id"]] = now
                last_write[0] = now
        done.set()
        thread.join(timeout=60)
    lags = [(seen[i] - t) * 1000 for i, t in written.items() if i in seen]
    return {
        "p50": percentile(lags, 50),
        "p99": percentile(lags, 99),
        "max": max(lags) if lags else float("nan"),
        "missing": float(len(written) - len(lags)),
    }


def bench_snapshot(kind: str, messages: int, tmp: Path) -> dict[str, float]:
    with databases(kind, tmp) as (source_url, target_url):
        t0 = time.perf_counter()
        seed_statehub(source_url, messages)
        seeded = time.perf_counter() - t0
        with statehub_server(source_url, PYTHONPATH=str(ROOT / "src")) as (statehub, pid):
            env = {**os.environ, "HUBCORE_DATABASE_URL": target_url,
                   "PYTHONPATH": str(ROOT / "src")}  # fmt: skip
            t0 = time.perf_counter()
            follower = subprocess.Popen(
                [sys.executable, "-m", "agenthub.cli", "hubcore", "follow", "--once",
                 "--statehub-url", statehub],
                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            # VmHWM of the running process: getrusage's maxrss would also count the
            # parent's pages a child holds between fork and exec (the seeded rows here).
            follower_rss = 0.0
            while follower.poll() is None:
                with suppress(FileNotFoundError, ProcessLookupError):
                    follower_rss = max(follower_rss, peak_rss_mb(follower.pid))
                time.sleep(0.2)
            if follower.returncode != 0:
                raise RuntimeError(f"hubcore follow --once exited {follower.returncode}")
            seconds = time.perf_counter() - t0
            statehub_rss = peak_rss_mb(pid)
    return {"seed_s": seeded, "seconds": seconds, "statehub_rss": statehub_rss,
            "follower_rss": follower_rss}  # fmt: skip


def bench_apply(kind: str, changes: int, tmp: Path) -> dict[str, float]:
    with databases(kind, tmp) as (source_url, target_url):
        source_engine, target_engine = make_engine(source_url), make_engine(target_url)
        statehub_migrate.upgrade(source_engine)
        migrate.upgrade(target_engine)
        sh, hc, clock = StateHubDatabase(source_engine), Database(target_engine), SystemClock()
        statehub_source.prepare(sh, "lock")
        feed = FeedService(sh, clock, "bench-apply")
        paged = PagedSnapshots(feed)
        asyncio.run(SnapshotImporter(hc, clock).run(InProcessFeedSource(feed, paged)))
        start = datetime(2026, 6, 1, tzinfo=UTC)
        for base in range(0, changes, 50):  # one State Hub transaction = one revision
            rows = [
                {"id": uuid.uuid4(), "from_agent": "bench", "to_agent": READER,
                 "subject": f"s{i}", "body": "x" * 200, "thread_id": None, "read_at": None,
                 "archived_at": None, "kind": "message", "expires_at": None,
                 "supersedes_id": None, "created_at": start + timedelta(seconds=i)}
                for i in range(base, min(base + 50, changes))
            ]  # fmt: skip
            with sh.write() as session:
                session.execute(insert(AgentMessage), rows)
        pages: list[tuple[dict[str, Any], str]] = []
        after = "v1:0"
        while True:
            page = feed.page(after, 1000)
            if not page["changes"]:
                break
            pages.append((page, after))
            after = page["next_cursor"]
        applier = PageApplier(hc, clock)
        t0 = time.perf_counter()
        applied = sum(applier.apply(page, after=asked).changes for page, asked in pages)
        seconds = time.perf_counter() - t0
        paged.close_all()
        source_engine.dispose()
        target_engine.dispose()
    return {"changes": applied, "seconds": seconds, "rate": applied / seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--changes", type=int, default=50_000)
    parser.add_argument("--pg", default=os.environ.get("AGENTHUB_TEST_PG_URL"))
    parser.add_argument("--kinds", nargs="+", default=None, help="sqlite and/or pg")
    parser.add_argument("--only", nargs="+", default=["lag", "snapshot", "apply"])
    args = parser.parse_args()
    if args.pg:
        os.environ["AGENTHUB_BENCH_PG_URL"] = args.pg
    kinds = args.kinds or (["sqlite"] + (["pg"] if args.pg else []))
    with tempfile.TemporaryDirectory(prefix="replication-bench-") as tmp:
        for kind in kinds:
            if "lag" in args.only:
                r = bench_lag(kind, args.writes, args.rate, Path(tmp))
                print(f"{kind:6} lag       {args.writes} writes at {args.rate:.0f}/s: "
                      f"p50 {r['p50']:.1f} ms  p99 {r['p99']:.1f} ms  max {r['max']:.1f} ms  "
                      f"missing {r['missing']:.0f}", flush=True)  # fmt: skip
            if "apply" in args.only:
                r = bench_apply(kind, args.changes, Path(tmp))
                print(f"{kind:6} apply     {r['changes']:.0f} changes in {r['seconds']:.2f} s: "
                      f"{r['rate']:.0f} changes/s", flush=True)  # fmt: skip
            if "snapshot" in args.only:
                r = bench_snapshot(kind, args.messages, Path(tmp))
                print(f"{kind:6} snapshot  {args.messages} messages: seed {r['seed_s']:.1f} s, "
                      f"follow --once {r['seconds']:.1f} s, peak RSS State Hub "
                      f"{r['statehub_rss']:.0f} MB, follower {r['follower_rss']:.0f} MB",
                      flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
