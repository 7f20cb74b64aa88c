"""hub-core's rows of issue 17's table, ours beside the ceiling, from one interleaved run.

    snapshot  `agenthub hubcore follow --once` into an empty hub-core, State Hub serving
              the paged snapshot over HTTP: seconds, peak RSS of the follower and of State
              Hub. Ceiling: a plain bulk load of the same rows (read from State Hub's
              database, loaded into hub-core's tables with `COPY FROM STDIN` on PostgreSQL,
              one `executemany` transaction on SQLite).

    bundle    `agenthub hubcore capture --source-db` then `agenthub hubcore import --apply`
              of the same rows: seconds and peak RSS of each, beside the snapshot path.
              The bundle is v1, the seed's one JSON object (capture's default);
              `--bundle-format jsonl` measures v2 (JSON Lines) instead.

    lag       State Hub POST -> readable through hub-core at 50 writes/s
              (`bench/replication_lag.py`), p50/p99, with the load average.

    search    bucket-sync `GET /v1/messages?q=<three new words>&limit=50` on a 20,000-message
              board (a new query each request), req/s. Beside it: the same board listed
              without `q=` (`GET /v1/messages?limit=50`), what a search could at best cost.

Each repeat runs ours then the ceiling back to back, so machine noise hits both alike;
medians are printed, and the ratio is ours / ceiling.

    PYTHONPATH=src python bench/ceilings_hubcore.py [--messages 200000] [--repeats 3]
        [--db sqlite --db pg] [--no-bundle] [--bundle-format json|jsonl] [--lag-writes 1000]
        [--board 20000] [--workdir /dev/shm]

`agenthub` is imported from PYTHONPATH (so the same script can measure another checkout:
`PYTHONPATH=/path/to/other/src python bench/ceilings_hubcore.py`). `rows(...)` returns the
rows for `bench/ceilings.py`.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(1, str(Path(__file__).resolve().parent.parent))

from agenthub.db import make_engine
from agenthub.hubcore import migrate as hubcore_migrate
from agenthub.statehub import migrate as statehub_migrate
from bench._servers import free_port, peak_rss_mb, pg_database, statehub_server, wait_until_up

SENDERS = ("alice", "bob", "carol", "dave", "ops")
READER = "state-hub"
MESSAGE_COLUMNS = (
    "id", "from_agent", "to_agent", "subject", "body", "thread_id", "read_at", "archived_at",
    "kind", "expires_at", "supersedes_id", "created_at",
)  # fmt: skip
RECEIPT_COLUMNS = ("message_id", "agent", "delivered_at", "read_at", "acknowledged_at")
SNAPSHOT_PAGE = 5000
BUNDLE_SCHEMAS = {"json": "v1 JSON object", "jsonl": "v2 JSON Lines"}


def _generate(n: int) -> Iterator[tuple[str, tuple[Any, ...]]]:
    """N messages (direct, broadcast with three receipts, replies, archived) as raw tuples."""
    rng = random.Random(7)
    start = datetime(2026, 6, 1, tzinfo=UTC)
    roots: list[uuid.UUID] = []
    for i in range(n):
        mid = uuid.UUID(int=rng.getrandbits(128), version=4)
        roll = rng.random()
        to_agent = "*" if roll < 0.1 else (READER if roll < 0.7 else rng.choice(SENDERS))
        thread = rng.choice(roots) if roots and rng.random() < 0.2 else None
        created = start + timedelta(seconds=i)
        yield "messages", (
            mid, rng.choice(SENDERS), to_agent, f"subject {i}", "x" * rng.randint(40, 400),
            thread, created + timedelta(minutes=5) if rng.random() < 0.4 else None,
            created + timedelta(hours=1) if rng.random() < 0.1 else None,
            "news" if rng.random() < 0.05 else "message", None, None, created,
        )  # fmt: skip
        if thread is None and len(roots) < 5000:
            roots.append(mid)
        if to_agent == "*":
            for agent in rng.sample([*SENDERS, READER], 3):
                read = created if rng.random() < 0.5 else None
                yield "receipts", (mid, agent, created, read, None)


def _sqlite_value(value: Any) -> Any:
    """What SQLAlchemy stores on SQLite: 32 hex digits, naive UTC text."""
    if isinstance(value, uuid.UUID):
        return value.hex
    if isinstance(value, datetime):
        return (
            value.astimezone(UTC).replace(tzinfo=None).isoformat(sep=" ", timespec="microseconds")
        )
    return value


def seed_statehub(url: str, n: int) -> None:
    """N messages into State Hub's tables in bulk (its triggers still assign revisions)."""
    engine = make_engine(url)
    statehub_migrate.upgrade(engine)
    raw = engine.raw_connection()
    try:
        driver: Any = raw.driver_connection
        tables = {"messages": "agent_messages", "receipts": "message_receipts"}
        columns = {"messages": MESSAGE_COLUMNS, "receipts": RECEIPT_COLUMNS}
        if url.startswith("sqlite"):
            batches: dict[str, list[tuple[Any, ...]]] = {"messages": [], "receipts": []}
            for part, values in _generate(n):
                batches[part].append(tuple(_sqlite_value(v) for v in values))
            for part, rows in batches.items():
                marks = ", ".join("?" * len(columns[part]))
                driver.executemany(
                    f"INSERT INTO {tables[part]} ({', '.join(columns[part])}) VALUES ({marks})",
                    rows,
                )
        else:
            receipts: list[tuple[Any, ...]] = []
            with driver.cursor() as cur:
                sql = f"COPY agent_messages ({', '.join(MESSAGE_COLUMNS)}) FROM STDIN"
                with cur.copy(sql) as copy:
                    for part, values in _generate(n):
                        if part == "messages":
                            copy.write_row(values)
                        else:
                            receipts.append(values)
                with cur.copy(f"COPY message_receipts ({', '.join(RECEIPT_COLUMNS)}) FROM STDIN") as copy:  # fmt: skip
                    for values in receipts:
                        copy.write_row(values)
        driver.execute(
            "INSERT INTO statehub_meta (key, value) VALUES ('instance_label', 'bench-hub')"
        )
        driver.commit()
    finally:
        raw.close()
        engine.dispose()


def _run_child(args: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """Run `python -m <module> …` (or this file's phase) in a child; its wall seconds, its
    own peak RSS (MB, VmHWM read by the child at exit: `ru_maxrss` of a child inherits
    the forking parent's size) and its output."""
    with tempfile.TemporaryFile() as out, tempfile.NamedTemporaryFile("r") as rss_file:
        wrapped = [sys.executable, __file__, "--phase", "measured", rss_file.name, *args[1:]]
        t0 = time.perf_counter()
        proc = subprocess.run(wrapped, env={**os.environ, **env}, stdout=out, stderr=out)
        seconds = time.perf_counter() - t0
        out.seek(0)
        text = out.read().decode(errors="replace")
        rss = float(rss_file.read() or "nan")
    if proc.returncode != 0:
        raise RuntimeError(f"{args[1:5]} failed ({proc.returncode}):\n{text[-3000:]}")
    return seconds, rss, text


def _phase_measured(rss_path: str, *argv: str) -> None:
    """Run `-m module args…` or `this-file args…` in this process; write its VmHWM."""
    import runpy

    try:
        if argv[0] == "-m":
            sys.argv = [argv[1], *argv[2:]]
            runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        else:
            sys.argv = list(argv)
            main()
    finally:
        Path(rss_path).write_text(str(peak_rss_mb(os.getpid())))


@contextmanager
def _database(kind: str, workdir: Path, name: str) -> Iterator[str]:
    if kind == "sqlite":
        path = workdir / f"{name}-{uuid.uuid4().hex[:6]}.db"
        try:
            yield f"sqlite:///{path}"
        finally:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
    else:
        with pg_database(f"bench_hc_{name}") as url:
            yield url


def follow_once(source: str, target: str) -> dict[str, float]:
    """Ours: `agenthub hubcore follow --once` against `statehub serve`."""
    with statehub_server(source) as (base, pid):
        seconds, rss, _ = _run_child(
            [sys.executable, "-m", "agenthub.cli", "hubcore", "follow", "--once"],
            {
                "HUBCORE_DATABASE_URL": target,
                "HUBCORE_STATEHUB_URL": base,
                "HUBCORE_SNAPSHOT_PAGE_SIZE": str(SNAPSHOT_PAGE),
            },
        )
        statehub_rss = peak_rss_mb(pid)
    return {"seconds": seconds, "rss_mb": rss, "statehub_rss_mb": statehub_rss}


def bulk_load(source: str, target: str) -> dict[str, float]:
    """The ceiling: the same rows read from State Hub and bulk-loaded into hub-core."""
    seconds, rss, _ = _run_child([sys.executable, __file__, "--phase", "bulk", source, target], {})
    return {"seconds": seconds, "rss_mb": rss}


def _phase_bulk(source: str, target: str) -> None:
    src_engine, dst_engine = make_engine(source), make_engine(target)
    hubcore_migrate.upgrade(dst_engine)
    src, dst = src_engine.raw_connection(), dst_engine.raw_connection()
    read: Any = src.driver_connection
    write: Any = dst.driver_connection
    plan = (
        ("agent_messages", "projected_messages", (*MESSAGE_COLUMNS, "revision"),
         (*MESSAGE_COLUMNS, "source_revision")),
        ("message_receipts", "projected_receipts", (*RECEIPT_COLUMNS, "revision"),
         (*RECEIPT_COLUMNS, "source_revision")),
    )  # fmt: skip
    for table, into, cols, into_cols in plan:
        select_sql = f"SELECT {', '.join(cols)} FROM {table}"
        if source.startswith("sqlite"):
            cur = read.execute(select_sql)
            marks = ", ".join("?" * len(cols))
            insert_sql = f"INSERT INTO {into} ({', '.join(into_cols)}) VALUES ({marks})"
            while batch := cur.fetchmany(20_000):
                write.executemany(insert_sql, batch)
        else:
            with (
                read.cursor(name=f"bulk_{into}") as cur,
                write.cursor() as out,
                out.copy(f"COPY {into} ({', '.join(into_cols)}) FROM STDIN") as copy,
            ):
                cur.itersize = 20_000
                cur.execute(select_sql)
                for values in cur:
                    copy.write_row(values)
    write.commit()
    read.rollback()
    src.close()
    dst.close()
    src_engine.dispose()
    dst_engine.dispose()


def capture_and_import(
    source: str, target: str, workdir: Path, bundle_format: str = "json"
) -> dict[str, float]:
    """Ours: `agenthub hubcore capture --source-db --format <bundle_format>` into a bundle
    file, then `agenthub hubcore import --apply` of it into an empty hub-core, each in its
    own child."""
    bundle = workdir / f"bundle-{uuid.uuid4().hex[:6]}.{bundle_format}"
    try:
        capture_s, capture_rss, text = _run_child(
            [sys.executable, "-m", "agenthub.cli", "hubcore", "capture", "--source-db", source,
             "--out", str(bundle), "--captured-by", "bench", "--format", bundle_format],
            {},
        )  # fmt: skip
        digest = text.split("content_hash", 1)[1].split()[0]
        import_s, import_rss, _ = _run_child(
            [sys.executable, "-m", "agenthub.cli", "hubcore", "import", str(bundle),
             "--expected-hash", digest, "--apply"],
            {"HUBCORE_DATABASE_URL": target},
        )  # fmt: skip
        size_mb = bundle.stat().st_size / 1e6
    finally:
        bundle.unlink(missing_ok=True)
        Path(f"{bundle}.evidence.json").unlink(missing_ok=True)
    return {
        "capture_s": capture_s, "capture_rss_mb": capture_rss,
        "import_s": import_s, "import_rss_mb": import_rss, "bundle_mb": size_mb,
    }  # fmt: skip


def _median(values: Sequence[float]) -> float:
    return statistics.median(values)


def snapshot_rows(
    kind: str,
    messages: int,
    repeats: int,
    workdir: Path,
    *,
    bundle: bool = True,
    bundle_format: str = "json",
) -> list[dict[str, Any]]:
    ours: list[dict[str, float]] = []
    ceiling: list[dict[str, float]] = []
    bundles: list[dict[str, float]] = []
    with _database(kind, workdir, "src") as source:
        seed_statehub(source, messages)
        for _ in range(repeats):
            with _database(kind, workdir, "dst") as target:
                ours.append(follow_once(source, target))
            with _database(kind, workdir, "bulk") as target:
                ceiling.append(bulk_load(source, target))
            if bundle:
                with _database(kind, workdir, "imp") as target:
                    bundles.append(capture_and_import(source, target, workdir, bundle_format))
    ours_s = _median([r["seconds"] for r in ours])
    ceiling_s = _median([r["seconds"] for r in ceiling])
    ratios = [o["seconds"] / c["seconds"] for o, c in zip(ours, ceiling, strict=True)]
    out = [
        {
            "measure": f"hub-core snapshot (follow --once), {messages} messages",
            "database": kind,
            "ours": f"{ours_s:.1f} s, follower {max(r['rss_mb'] for r in ours):.0f} MB, "
            f"State Hub {max(r['statehub_rss_mb'] for r in ours):.0f} MB",
            "ceiling": f"bulk load {ceiling_s:.1f} s ({max(r['rss_mb'] for r in ceiling):.0f} MB)",
            "ratio": f"{_median(ratios):.1f}x",
            "target": "1M in <= 60 s, peak RSS <= 200 MB each side",
        }
    ]
    if bundles:
        total = [b["capture_s"] + b["import_s"] for b in bundles]
        out.append(
            {
                "measure": f"hub-core capture + bundle import ({BUNDLE_SCHEMAS[bundle_format]}), "
                f"{messages} messages",
                "database": kind,
                "ours": f"capture {_median([b['capture_s'] for b in bundles]):.1f} s "
                f"({max(b['capture_rss_mb'] for b in bundles):.0f} MB), import "
                f"{_median([b['import_s'] for b in bundles]):.1f} s "
                f"({max(b['import_rss_mb'] for b in bundles):.0f} MB), bundle "
                f"{bundles[0]['bundle_mb']:.0f} MB",
                "ceiling": f"the snapshot path (follow --once) {ours_s:.1f} s",
                "ratio": f"{_median([t / o['seconds'] for t, o in zip(total, ours, strict=True)]):.1f}x",
                "target": "<= 2x the snapshot path, <= 150 MB at 1M",
            }
        )
    return out


def lag_rows(kind: str, writes: int, repeats: int, workdir: Path) -> list[dict[str, Any]]:
    """State Hub POST -> readable through hub-core at 50 writes/s (`bench/replication_lag.py`),
    with the load average it ran under (the target differs for a loaded machine)."""
    from bench.replication_lag import bench_lag

    runs = []
    for _ in range(repeats):
        load = os.getloadavg()[0]
        runs.append({**bench_lag(kind, writes, 50.0, workdir), "load": load})
    p50, p99 = _median([r["p50"] for r in runs]), _median([r["p99"] for r in runs])
    return [
        {
            "measure": f"replication lag, State Hub POST -> hub-core read, {writes} writes at 50/s",
            "database": kind,
            "ours": f"p50 {p50:.0f} ms, p99 {p99:.0f} ms (load "
            f"{_median([r['load'] for r in runs]):.1f}, missing "
            f"{sum(r['missing'] for r in runs):.0f})",
            "ceiling": "Electric ~6 ms write-to-client (published, not measured here)",
            "ratio": "",
            "target": "p50 <= 15 / p99 <= 60 ms quiet; p99 <= 250 ms at load >= 4",
        }
    ]


def _req_per_s(client: Any, urls: Sequence[str]) -> float:
    started = time.perf_counter()
    for url in urls:
        client.get(url).raise_for_status()
    return len(urls) / (time.perf_counter() - started)


def search_rows(board: int, repeats: int, requests: int = 150) -> list[dict[str, Any]]:
    import httpx

    from bench.bucketsync_reads import CENTRAL, ORG, SLUG, WORDS, build_board

    rng = random.Random(11)
    with tempfile.TemporaryDirectory(prefix="ceilings-search-") as tmp:
        build_board(Path(tmp), board, 300, rng)
        port = free_port()
        env = {
            **os.environ,
            "ORG": ORG,
            "COLLAB_SLUG": SLUG,
            "AUDIT_BUCKET": f"{ORG}-admin/{SLUG}-audit",
            "BUCKETSYNC_DATA_DIR": tmp,
            "LISTING_TTL_S": "600",
        }
        assert CENTRAL
        server = subprocess.Popen(
            [sys.executable, "-m", "agenthub.cli", "bucketsync", "serve", "--port", str(port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        ours: list[float] = []
        plain: list[float] = []
        try:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as client:
                wait_until_up(client, tries=300)
                client.get("/v1/messages?q=warm&limit=50").raise_for_status()  # parse the board
                for _ in range(repeats):
                    queries = [
                        "/v1/messages?q=" + "%20".join(rng.choice(WORDS) for _ in range(3))
                        + "&limit=50"
                        for _ in range(requests)
                    ]  # fmt: skip
                    ours.append(_req_per_s(client, queries))
                    plain.append(_req_per_s(client, ["/v1/messages?limit=50"] * requests))
        finally:
            server.terminate()
            server.wait(30)
    ratio = _median([o / p for o, p in zip(ours, plain, strict=True)])
    return [
        {
            "measure": f"bucket-sync ?q= (a new query each request), {board}-message board",
            "ours": f"{_median(ours):.0f} req/s",
            "ceiling": f"the same listing without q=: {_median(plain):.0f} req/s",
            "ratio": f"{100 * ratio:.0f}%",
            "target": ">= 200 req/s",
        }
    ]


def rows(
    *,
    messages: int = 200_000,
    repeats: int = 3,
    databases: Sequence[str] = ("sqlite", "pg"),
    board: int = 20_000,
    bundle: bool = True,
    bundle_format: str = "json",
    lag_writes: int = 1000,
    workdir: str | None = None,
) -> list[dict[str, Any]]:
    """Every hub-core row of the table: dicts with measure, database, ours, ceiling, ratio,
    target (all text); `board=0` leaves out the bucket-sync search row, `bundle=False`
    the capture/import row (`bundle_format`: "json" v1, "jsonl" v2), `lag_writes=0` the
    replication lag row; SQLite files and
    bundles go under `workdir` (default: the system's temporary directory)."""
    out: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="ceilings-hubcore-", dir=workdir) as tmp:
        for kind in databases:
            if kind == "none":
                continue
            if messages:
                out.extend(
                    snapshot_rows(
                        kind,
                        messages,
                        repeats,
                        Path(tmp),
                        bundle=bundle,
                        bundle_format=bundle_format,
                    )
                )
            if lag_writes:
                out.extend(lag_rows(kind, lag_writes, repeats, Path(tmp)))
    if board:
        out.extend(search_rows(board, repeats))
    return out


def print_rows(table: Sequence[dict[str, Any]]) -> None:
    fields = ("measure", "database", "ours", "ceiling", "ratio", "target")
    table = [{"database": "", **row} for row in table]
    print("| " + " | ".join(fields) + " |")
    print("|" + "---|" * len(fields))
    for row in table:
        print("| " + " | ".join(str(row[f]) for f in fields) + " |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--db", action="append", choices=("sqlite", "pg", "none"))
    parser.add_argument("--board", type=int, default=20_000, help="0: no search row")
    parser.add_argument("--no-bundle", action="store_true", help="no capture/import row")
    parser.add_argument(
        "--bundle-format",
        choices=tuple(BUNDLE_SCHEMAS),
        default="json",
        help="the capture/import row's bundle: json (v1, capture's default) or jsonl (v2)",
    )
    parser.add_argument("--lag-writes", type=int, default=1000, help="0: no lag row")
    parser.add_argument(
        "--workdir", help="where SQLite files and bundles go (e.g. /dev/shm: no disk in the figure)"
    )
    parser.add_argument("--phase", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        name, *rest = args.phase
        if name == "measured":
            _phase_measured(*rest)
        else:
            assert name == "bulk"
            _phase_bulk(*rest)
        return
    print_rows(
        rows(
            messages=args.messages,
            repeats=args.repeats,
            databases=args.db if args.db is not None else ("sqlite", "pg"),
            board=args.board,
            bundle=not args.no_bundle,
            bundle_format=args.bundle_format,
            lag_writes=args.lag_writes,
            workdir=args.workdir,
        )
    )


if __name__ == "__main__":
    main()
