"""hub-core pilot benchmark: capture and import of N messages, and read latency.

For SQLite and PostgreSQL: seeds a State Hub database with N messages (a mix of
direct, broadcast, replies, archived, with broadcast receipts), then measures,
each phase in its own process so peak RSS is that phase's alone:

  capture   `capture --source-db` into a bundle file (seconds, peak RSS); the bundle is v1,
            the seed's one JSON object, unless `--format jsonl` asks for v2 (JSON Lines)
  feed cap  `capture --from-statehub --page-size 5000` against `statehub serve` (seconds, peak RSS
            of the capturing process; its content hash must equal the above)
  import    `import --apply` into an empty hub-core (seconds, peak RSS)
  reads     GET /ports/projections/statehub-inbox against `hubcore serve`
            (p50/p99 over the pilot's cases at N rows)

Usage: python bench/hubcore_import.py [--messages 100000] [--pg postgresql://…] [--reads 400]
       [--format json|jsonl]
Without --pg, PostgreSQL is taken from AGENTHUB_TEST_PG_URL when set.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import create_engine, insert, text
from sqlalchemy.engine import make_url

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from agenthub.clock import SystemClock  # noqa: E402
from agenthub.db import make_engine, normalize_url  # noqa: E402
from agenthub.hubcore import migrate  # noqa: E402
from agenthub.hubcore.bundle_import import import_file  # noqa: E402
from agenthub.hubcore.bundlefile import LAYOUTS, Layout  # noqa: E402
from agenthub.hubcore.capture import capture_database_to_file  # noqa: E402
from agenthub.hubcore.capture_feed import capture_statehub_to_file  # noqa: E402
from agenthub.hubcore.store import Database  # noqa: E402
from agenthub.statehub import migrate as statehub_migrate  # noqa: E402
from agenthub.statehub.models import AgentMessage, MessageReceipt  # noqa: E402

READER = "state-hub"
TOKEN = "bench-token"
SENDERS = ["alice", "bob", "carol", "dave", "ops"]
FEED_PAGE = 5000


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def seed_statehub(url: str, n: int) -> None:
    """N messages straight into State Hub's tables (its triggers still assign revisions)."""
    engine = make_engine(url)
    statehub_migrate.upgrade(engine)
    rng = random.Random(7)
    start = datetime(2026, 6, 1, tzinfo=UTC)
    roots: list[uuid.UUID] = []
    messages: list[dict[str, Any]] = []
    receipts: list[dict[str, Any]] = []
    for i in range(n):
        mid = uuid.uuid4()
        roll = rng.random()
        to_agent = "*" if roll < 0.1 else (READER if roll < 0.7 else rng.choice(SENDERS))
        thread = rng.choice(roots) if roots and rng.random() < 0.2 else None
        created = start + timedelta(seconds=i)
        messages.append(
            {
                "id": mid,
                "from_agent": rng.choice(SENDERS),
                "to_agent": to_agent,
                "subject": f"subject {i}",
                "body": "x" * rng.randint(40, 400),
                "thread_id": thread,
                "read_at": created + timedelta(minutes=5) if rng.random() < 0.4 else None,
                "archived_at": created + timedelta(hours=1) if rng.random() < 0.1 else None,
                "kind": "news" if rng.random() < 0.05 else "message",
                "expires_at": None,
                "supersedes_id": None,
                "created_at": created,
            }
        )
        if thread is None and len(roots) < 5000:
            roots.append(mid)
        if to_agent == "*":
            for agent in rng.sample([*SENDERS, READER], 3):
                receipts.append(
                    {
                        "message_id": mid,
                        "agent": agent,
                        "delivered_at": created,
                        "read_at": created if rng.random() < 0.5 else None,
                        "acknowledged_at": None,
                    }
                )
    with engine.begin() as conn:
        for i in range(0, len(messages), 5000):
            conn.execute(insert(AgentMessage), messages[i : i + 5000])
        for i in range(0, len(receipts), 5000):
            conn.execute(insert(MessageReceipt), receipts[i : i + 5000])
        conn.execute(
            text("INSERT INTO statehub_meta (key, value) VALUES ('instance_label', 'bench-hub')")
        )
    engine.dispose()


def phase_capture(source: str, out: str, layout: str) -> dict[str, Any]:
    t0 = time.perf_counter()
    bundle, _ = capture_database_to_file(
        source, Path(out), clock=SystemClock(), captured_by="bench", layout=_layout(layout)
    )
    return {
        "seconds": time.perf_counter() - t0,
        "rss_mb": peak_rss_mb(),
        "hash": bundle["content_hash"],
    }


def phase_capture_feed(base_url: str, out: str, layout: str) -> dict[str, Any]:
    t0 = time.perf_counter()
    bundle, _ = capture_statehub_to_file(
        base_url,
        Path(out),
        clock=SystemClock(),
        captured_by="bench",
        page_size=FEED_PAGE,
        layout=_layout(layout),
    )
    return {
        "seconds": time.perf_counter() - t0,
        "rss_mb": peak_rss_mb(),
        "hash": bundle["content_hash"],
    }


def _layout(name: str) -> Layout:
    if name not in LAYOUTS:
        raise SystemExit(f"--format must be one of {', '.join(LAYOUTS)}")
    return "json" if name == "json" else "jsonl"


def start_server(args: list[str], env: dict[str, str], probe: str) -> subprocess.Popen[bytes]:
    """Run an `agenthub` server in its own process and wait until `probe` answers."""
    server = subprocess.Popen(
        [sys.executable, "-m", "agenthub.cli", *args],
        env={**os.environ, "PYTHONPATH": str(ROOT / "src"), **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            httpx.get(probe, timeout=2)
            return server
        except httpx.TransportError:
            time.sleep(0.1)
    server.terminate()
    raise RuntimeError(f"server {args} did not come up")


def capture_via_feed(source: str, out: str, layout: str) -> dict[str, Any]:
    port = free_port()
    server = start_server(
        ["statehub", "serve", "--port", str(port)],
        {"STATEHUB_DATABASE_URL": source},
        f"http://127.0.0.1:{port}/state/health",
    )
    try:
        return run_phase("capture-feed", f"http://127.0.0.1:{port}", out, layout)
    finally:
        server.terminate()
        server.wait(timeout=30)


def phase_import(target: str, bundle_file: str, expected: str) -> dict[str, Any]:
    engine = make_engine(target)
    migrate.upgrade(engine)
    t0 = time.perf_counter()
    result = import_file(Database(engine), Path(bundle_file), expected_hash=expected, apply=True)
    seconds = time.perf_counter() - t0
    engine.dispose()
    return {"seconds": seconds, "rss_mb": peak_rss_mb(), "outcome": result.outcome}


def run_phase(*args: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--phase", *args], check=True, capture_output=True, text=True
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def measure_reads(target: str, count: int) -> dict[str, float]:
    port = free_port()
    env = {
        "HUBCORE_DATABASE_URL": target,
        "HUB_CORE_STATEHUB_INBOX_READS": "1",
        "HUB_CORE_OPERATOR_TOKEN": TOKEN,
        "HUB_CORE_STATEHUB_INBOX_AGENT": READER,
    }
    server = start_server(
        ["hubcore", "serve", "--port", str(port)], env, f"http://127.0.0.1:{port}/docs"
    )
    cases: list[dict[str, Any]] = [
        {},
        {"unread_only": "true"},
        {"from_agent": "alice"},
        {"from_agent": "ops", "unread_only": "true"},
        {"limit": 1},
        {"limit": 1000},
    ]
    latencies: list[float] = []
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            headers = {"Authorization": f"Bearer {TOKEN}"}
            for i in range(30):  # warm-up: first queries pay for plan and pool setup
                client.get(
                    "/ports/projections/statehub-inbox",
                    params={"to_agent": READER, **cases[i % len(cases)]},
                    headers=headers,
                )
            for i in range(count):
                params = {"to_agent": READER, **cases[i % len(cases)]}
                t0 = time.perf_counter()
                response = client.get(
                    "/ports/projections/statehub-inbox", params=params, headers=headers
                )
                latencies.append((time.perf_counter() - t0) * 1000)
                assert response.status_code == 200, response.text
    finally:
        server.terminate()
        server.wait(timeout=30)
    quantiles = statistics.quantiles(latencies, n=100)
    return {"p50_ms": quantiles[49], "p99_ms": quantiles[98]}


def temporary_pg(server_url: str, name: str) -> str:
    admin = create_engine(normalize_url(server_url), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return make_url(server_url).set(database=name).render_as_string(hide_password=False)


def drop_pg(server_url: str, url: str) -> None:
    admin = create_engine(normalize_url(server_url), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{make_url(url).database}" WITH (FORCE)'))
    admin.dispose()


def bench(
    kind: str, n: int, reads: int, pg: str | None, workdir: Path, layout: str
) -> dict[str, Any]:
    if kind == "sqlite":
        source, target = (
            f"sqlite:///{workdir / 'statehub.db'}",
            f"sqlite:///{workdir / 'hubcore.db'}",
        )
    else:
        assert pg is not None
        tag = f"{os.getpid()}_{uuid.uuid4().hex[:6]}"
        source = temporary_pg(pg, f"bench_hc_src_{tag}")
        target = temporary_pg(pg, f"bench_hc_dst_{tag}")
    try:
        t0 = time.perf_counter()
        seed_statehub(source, n)
        seeded = time.perf_counter() - t0
        bundle_file = str(workdir / f"{kind}-bundle.{layout}")
        captured = run_phase("capture", source, bundle_file, layout)
        via_feed = capture_via_feed(source, str(workdir / f"{kind}-feed-bundle.{layout}"), layout)
        assert via_feed["hash"] == captured["hash"], "feed and database captures disagree"
        imported = run_phase("import", target, bundle_file, captured["hash"])
        latency = measure_reads(target, reads)
        size_mb = Path(bundle_file).stat().st_size / 1e6
    finally:
        if kind == "pg":
            assert pg is not None
            drop_pg(pg, source)
            drop_pg(pg, target)
    return {
        "kind": kind,
        "seed_s": seeded,
        "capture": captured,
        "feed": via_feed,
        "import": imported,
        "bundle_mb": size_mb,
        **latency,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--reads", type=int, default=400)
    parser.add_argument("--pg", default=os.environ.get("AGENTHUB_TEST_PG_URL"))
    parser.add_argument(
        "--format", choices=LAYOUTS, default="json", help="bundle layout: json (v1) or jsonl (v2)"
    )
    parser.add_argument("--phase", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        name, *rest = args.phase
        phases = {
            "capture": phase_capture,
            "capture-feed": phase_capture_feed,
            "import": phase_import,
        }
        result = phases[name](*rest)
        print(json.dumps(result))
        return
    kinds = ["sqlite"] + (["pg"] if args.pg else [])
    print(
        f"hub-core pilot benchmark: {args.messages} messages, {args.reads} reads per database, "
        f"{args.format} bundles"
    )
    print(
        f"{'db':7} {'capture s':>9} {'cap RSS MB':>10} {'feed cap s':>10} {'feed RSS MB':>11} "
        f"{'import s':>9} {'imp RSS MB':>10} {'bundle MB':>9} {'read p50 ms':>11} "
        f"{'read p99 ms':>11}"
    )
    with tempfile.TemporaryDirectory(prefix="hubcore-bench-") as tmp:
        for kind in kinds:
            r = bench(kind, args.messages, args.reads, args.pg, Path(tmp), args.format)
            print(
                f"{kind:7} {r['capture']['seconds']:9.2f} {r['capture']['rss_mb']:10.0f} "
                f"{r['feed']['seconds']:10.2f} {r['feed']['rss_mb']:11.0f} "
                f"{r['import']['seconds']:9.2f} {r['import']['rss_mb']:10.0f} "
                f"{r['bundle_mb']:9.1f} {r['p50_ms']:11.2f} {r['p99_ms']:11.2f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
