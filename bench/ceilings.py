"""Every row of the "close to the machine" table: ours beside its ceiling, as ratios.

One command, both databases. Each row runs its variants interleaved (ours,
ceiling, ours, ceiling, …) in one run, so noise on this shared machine hits
both alike; a ratio is taken per round and the median printed.
Throughput rows also print each server's CPU per request, and the send rows
"(CPU n%)": the minimal app's CPU per request over ours, the ratio a server
bound by its own CPU would reach; it moves much less with the machine's load
than the rates do.

  row                          ours                           ceiling
  send PostgreSQL, 8 clients   State Hub POST /messages/      minimal FastAPI app, one INSERT
  send SQLite, 1 client        State Hub POST /messages/      the same minimal app on SQLite WAL
  send PostgreSQL, 1 client    (for "SQLite no slower than PostgreSQL for one writer")
  send PostgreSQL, 8, xid      State Hub in `xid` revision mode (no commit serialization)
  unread read, 1 client        GET /messages/?unread_only     target ≥ 500 req/s, p50 ≤ 3 ms
  feed catch-up, limit 5000    GET /messages/feed pages       PostgreSQL COPY (row_to_json)
  writes, 8 writers            pgbench INSERT, lock and xid   the same INSERT with no trigger
  broadcast wake, 256 waiters  bucket-sync GET /v1/inbox      uvicorn + FastAPI parked on one event
                               (latency from the POST's send to each waiter's answer)

Every HTTP request goes through the lean client in `bench/_lean.py`. The hub-core
rows come from `bench/ceilings_hubcore.py` (`rows(args)`) when that file exists.

    PYTHONPATH=src python3 bench/ceilings.py [--rounds 3] [--seconds 3] [--changes 200000]
        [--waiters 256] [--only send,feed,writes,wake,hubcore]   (send includes the unread read) [--databases sqlite,postgresql]
        [--no-access-log]   (uvicorn's access log is a deployment setting: measure both)
        [--baseline REV]    (the wake row also for bucket-sync at git revision REV, interleaved)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import orjson
from pydantic import BaseModel
from sqlalchemy import text

from agenthub.db import make_engine
from bench._lean import LeanConnection, closed_loop
from bench._servers import free_port, percentile, pg_database, statehub_server

Row = dict[str, Any]
PLAIN_TABLE = """
CREATE TABLE plain_messages (
    id {uuid} PRIMARY KEY,
    from_agent VARCHAR(64) NOT NULL,
    to_agent VARCHAR(64) NOT NULL,
    subject TEXT NOT NULL,
    body TEXT NOT NULL,
    kind VARCHAR(32) NOT NULL,
    created_at TIMESTAMP NOT NULL
)"""
PLAIN_INDEX = "CREATE INDEX ix_plain_messages_to ON plain_messages (to_agent, created_at)"
JSON = {"Content-Type": "application/json"}


# -- the ceilings' servers (child processes of this script) ----------------------


class Body(BaseModel):
    """The minimal app's request body (module level: FastAPI resolves it by name)."""

    from_agent: str
    to_agent: str
    subject: str
    body: str


def minimal_app(database_url: str) -> Any:
    """FastAPI, a pydantic body, one INSERT in its own transaction on a kept connection."""
    from fastapi import FastAPI

    engine = make_engine(database_url, pool_pre_ping=False)
    insert = text(
        "INSERT INTO plain_messages (id, from_agent, to_agent, subject, body, kind, created_at)"
        " VALUES (:id, :from_agent, :to_agent, :subject, :body, 'message', :created_at)"
    )
    sqlite = engine.dialect.name == "sqlite"
    app = FastAPI()

    @app.post("/messages/", status_code=201)
    def send(data: Body) -> dict[str, Any]:
        message_id = uuid.uuid4()
        now = datetime.now(UTC)
        with engine.begin() as conn:
            conn.execute(
                insert,
                {
                    **data.model_dump(),
                    "id": message_id.hex if sqlite else message_id,
                    "created_at": now.replace(tzinfo=None),
                },
            )
        return {"id": str(message_id), **data.model_dump(), "created_at": now.isoformat()}

    return app


def trivial_wake_app() -> Any:
    """FastAPI answering every parked GET when one POST sets the shared event."""
    from fastapi import FastAPI

    app = FastAPI()
    state: dict[str, Any] = {"event": asyncio.Event(), "generation": 0, "parked": 0}

    @app.get("/wait")
    async def wait(after: int = 0) -> dict[str, Any]:
        if state["generation"] == after:
            event = state["event"]
            state["parked"] += 1
            try:
                await asyncio.wait_for(event.wait(), 55)
            except TimeoutError:
                pass
            finally:
                state["parked"] -= 1
        return {"items": ["all hands"], "cursor": state["generation"]}

    @app.get("/parked")
    async def parked() -> dict[str, int]:
        return {"parked": state["parked"], "generation": state["generation"]}

    @app.post("/fire")
    async def fire() -> dict[str, int]:
        state["generation"] += 1
        event, state["event"] = state["event"], asyncio.Event()
        event.set()
        return {"generation": state["generation"]}

    return app


def serve_child(kind: str, port: int, database_url: str | None, access_log: bool) -> None:
    import uvicorn

    app = minimal_app(database_url or "") if kind == "minimal" else trivial_wake_app()
    # The same setup as `agenthub statehub serve`.
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="info", access_log=access_log)


@contextmanager
def child_server(
    kind: str, database_url: str | None = None, *, access_log: bool = True
) -> Iterator[tuple[str, int]]:
    """A ceiling's server in a child process: (base URL, pid)."""
    port = free_port()
    argv = [sys.executable, __file__, "--serve", kind, "--port", str(port)]
    if database_url is not None:
        argv += ["--database-url", database_url]
    if not access_log:
        argv.append("--no-access-log")
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                asyncio.run(_get(base, "/openapi.json"))
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{kind} server did not start") from None
                time.sleep(0.1)
        yield base, proc.pid
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds a process has used (from /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _get(base: str, target: str) -> bytes:
    conn = await LeanConnection(base).open()
    try:
        _status, body = await conn.request("GET", target)
        return body
    finally:
        await conn.close()


# -- rows -----------------------------------------------------------------------


def _row(measure: str, ours: str, ceiling: str, ratio: str, target: str) -> Row:
    return {"measure": measure, "ours": ours, "ceiling": ceiling, "ratio": ratio, "target": target}


def _send_payload(i: int) -> bytes:
    return json.dumps(
        {"from_agent": f"writer-{i}", "to_agent": f"agent-{i}", "subject": "s", "body": "b" * 200}
    ).encode()


# A throughput sample: (requests/s, p50 ms, the server's CPU ms per request). On a
# loaded machine the rate follows the load; the server's CPU per request much less.
Sample = tuple[float, float, float]


def _sends(server: tuple[str, int], clients: int, seconds: float) -> Sample:
    async def send(conn: LeanConnection, i: int) -> int:
        status, _body = await conn.request("POST", "/messages/", _send_payload(i), JSON)
        return status

    return _sample(server, clients, seconds, send)


def _unread(server: tuple[str, int], seconds: float) -> Sample:
    target = "/messages/?to_agent=reader-0&unread_only=true&limit=20"

    async def read(conn: LeanConnection, _i: int) -> int:
        status, _body = await conn.request("GET", target)
        return status

    return _sample(server, 1, seconds, read)


def _sample(
    server: tuple[str, int],
    clients: int,
    seconds: float,
    request: Callable[[LeanConnection, int], Awaitable[int]],
) -> Sample:
    base, pid = server
    cpu = _cpu_s(pid)
    rate, latencies = asyncio.run(closed_loop(base, clients, seconds, request))
    cpu_ms = (_cpu_s(pid) - cpu) * 1000 / max(1, len(latencies))
    return rate, percentile(latencies, 50) * 1000, cpu_ms


def _broadcasts(base: str, count: int) -> None:
    async def run() -> None:
        conn = await LeanConnection(base).open()
        try:
            for n in range(count):
                body = json.dumps(
                    {"from_agent": "news", "to_agent": "*", "subject": f"b{n}", "body": "x"}
                ).encode()
                status, _ = await conn.request("POST", "/messages/", body, JSON)
                assert status == 201, status
        finally:
            await conn.close()

    asyncio.run(run())


@contextmanager
def _database(kind: str) -> Iterator[str]:
    if kind == "postgresql":
        with pg_database("agenthub_ceiling") as url:
            yield url
    else:
        with tempfile.TemporaryDirectory(prefix="ceilings-") as tmp:
            yield f"sqlite:///{tmp}/statehub.db"


def _add_plain_table(url: str) -> None:
    engine = make_engine(url)
    postgres = engine.dialect.name == "postgresql"
    with engine.begin() as conn:
        conn.execute(text(PLAIN_TABLE.format(uuid="UUID" if postgres else "CHAR(32)")))
        conn.execute(text(PLAIN_INDEX))
    engine.dispose()


def send_rows(args: argparse.Namespace) -> list[Row]:
    """POST /messages/ against the minimal app, and the unread read, per database."""
    out: list[Row] = []
    single: dict[str, list[float]] = {}
    for kind in args.databases:
        with (
            _database(kind) as url,
            statehub_server(url, access_log=args.access_log) as ours_server,
        ):
            base = ours_server[0]
            _add_plain_table(url)
            _broadcasts(base, 20)
            with (
                child_server("minimal", url, access_log=args.access_log) as minimal,
                contextlib.ExitStack() as stack,
            ):
                plans = [(ours_server, 1, "1 client")]
                if kind == "postgresql":
                    # `xid` mode too: how much of the 8-client gap is `lock` mode's
                    # serialized commits (the write rows measure the same at the SQL level).
                    xid_server = stack.enter_context(
                        statehub_server(
                            stack.enter_context(_database(kind)),
                            access_log=args.access_log,
                            STATEHUB_REVISION_MODE="xid",
                        )
                    )
                    plans += [(ours_server, 8, "8 clients"), (xid_server, 8, "8 clients, xid")]
                for server, clients, label in plans:
                    ratios: list[float] = []
                    cpu_ratios: list[float] = []
                    ours: list[Sample] = []
                    ceiling: list[Sample] = []
                    for _round in range(args.rounds):
                        ours.append(_sends(server, clients, args.seconds))
                        ceiling.append(_sends(minimal, clients, args.seconds))
                        ratios.append(ours[-1][0] / ceiling[-1][0])
                        cpu_ratios.append(ceiling[-1][2] / ours[-1][2])
                    if label == "1 client":
                        single[kind] = [sample[0] for sample in ours]
                    out.append(
                        _row(
                            f"POST /messages/ {kind}, {label}",
                            _rate(ours),
                            _rate(ceiling),
                            f"{statistics.median(ratios):.0%}"
                            f" (CPU {statistics.median(cpu_ratios):.0%})",
                            "≥ 80% of the minimal app",
                        )
                    )
            reads = [_unread(ours_server, args.seconds) for _ in range(args.rounds)]
            out.append(
                _row(
                    f"GET /messages/?unread_only=true {kind}, 1 client",
                    _rate(reads),
                    "-",
                    "-",
                    "≥ 500 req/s, p50 ≤ 3 ms",
                )
            )
    if "sqlite" in single and "postgresql" in single:
        ratio = statistics.median(single["sqlite"]) / statistics.median(single["postgresql"])
        out.append(
            _row(
                "POST /messages/ 1 client, SQLite vs PostgreSQL",
                f"{statistics.median(single['sqlite']):.0f} req/s",
                f"{statistics.median(single['postgresql']):.0f} req/s",
                f"{ratio:.0%}",
                "SQLite ≥ 100% of PostgreSQL",
            )
        )
    return out


def _rate(samples: list[Sample]) -> str:
    rate = statistics.median(s[0] for s in samples)
    p50 = statistics.median(s[1] for s in samples)
    cpu = statistics.median(s[2] for s in samples)
    return f"{rate:,.0f} req/s p50 {p50:.1f} ms, CPU {cpu:.2f} ms/req"


def _catch_up(base: str) -> tuple[float, int]:
    async def run() -> tuple[float, int]:
        conn = await LeanConnection(base).open()
        try:
            after, got = "v1:0", 0
            started = time.perf_counter()
            while True:
                status, body = await conn.request("GET", f"/messages/feed?after={after}&limit=5000")
                assert status == 200, (status, body[:200])
                page = orjson.loads(body)  # as hub-core's follower parses a page
                got += len(page["changes"])
                after = page["next_cursor"]
                if not page["has_more"]:
                    return got / (time.perf_counter() - started), got
        finally:
            await conn.close()

    return asyncio.run(run())


def _copy_rows_per_s(url: str) -> float:
    import psycopg

    dsn = url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(dsn) as conn, conn.cursor() as cur:
        started = time.perf_counter()
        rows = 0
        query = "COPY (SELECT row_to_json(m) FROM agent_messages m ORDER BY revision) TO STDOUT"
        with cur.copy(query) as copy:
            for _row_bytes in copy.rows():
                rows += 1
        return rows / (time.perf_counter() - started)


def feed_rows(args: argparse.Namespace) -> list[Row]:
    from bench.feed import load_changes

    out: list[Row] = []
    with contextlib.ExitStack() as stack:
        urls = {kind: stack.enter_context(_database(kind)) for kind in args.databases}
        pg_url = urls.get("postgresql")
        for url in urls.values():
            load_changes(url, args.changes)
        bases = {kind: stack.enter_context(statehub_server(url))[0] for kind, url in urls.items()}
        rates: dict[str, list[float]] = {kind: [] for kind in urls}
        copies: list[float] = []
        for _round in range(args.rounds):
            for kind, base in bases.items():
                rate, got = _catch_up(base)
                assert got == args.changes, (got, args.changes)
                rates[kind].append(rate)
            if pg_url is not None:
                copies.append(_copy_rows_per_s(pg_url))
        for kind, values in rates.items():
            ceiling = statistics.median(copies) if copies else float("nan")
            ratios = [r / c for r, c in zip(values, copies, strict=False)] or [float("nan")]
            out.append(
                _row(
                    f"feed catch-up {kind}, limit 5000, {args.changes:,} changes",
                    f"{statistics.median(values):,.0f} changes/s",
                    f"COPY row_to_json {ceiling:,.0f} rows/s",
                    f"{statistics.median(ratios):.0%}",
                    "≥ 100k changes/s (half the ceiling)",
                )
            )
    return out


FIRST_WRITE = "lock at first write"


def _lock_at_first_write(stack: contextlib.ExitStack[Any]) -> str:
    """A database with `lock` as migration 0002 left it: the advisory lock taken at
    the first write (what 0004 replaced), for a before/after in one run."""
    from agenthub.statehub import migrate, revisions

    url = stack.enter_context(pg_database())
    engine = make_engine(url)
    migrate.upgrade(engine)
    with engine.begin() as conn:
        for statement in revisions.PG_COMMIT_DROP:
            conn.execute(text(statement))
        conn.execute(text(revisions.PG_REVISION_FUNCTION_LOCK))
    engine.dispose()
    return url


def write_rows(args: argparse.Namespace) -> list[Row]:
    if "postgresql" not in args.databases:
        return []
    from bench.feed import PGBENCH_SCRIPT, WRITE_VARIANTS, pgbench_tps, write_variant_databases

    # The single INSERT is its own transaction (autocommit); State Hub's write
    # transactions take a round trip between their first write and COMMIT, which
    # the lock spanned until migration 0004.
    scripts = {
        "INSERT": PGBENCH_SCRIPT,
        "BEGIN; INSERT; COMMIT": f"BEGIN;{PGBENCH_SCRIPT}COMMIT;\n",
    }
    variants = (*WRITE_VARIANTS, FIRST_WRITE)
    with contextlib.ExitStack() as stack:
        urls = write_variant_databases(stack)
        urls[FIRST_WRITE] = _lock_at_first_write(stack)
        tps: dict[tuple[str, str], list[float]] = {}
        one_writer: list[float] = []
        seconds = max(1, round(args.seconds))
        for _round in range(args.rounds):
            for name, sql in scripts.items():
                for variant in variants:
                    sample = pgbench_tps(urls[variant], 8, seconds, sql)
                    tps.setdefault((name, variant), []).append(sample)
            one_writer.append(pgbench_tps(urls["plain"], 1, seconds))
    out = []
    targets = {
        "xid": "xid ≥ 90%",
        "lock": "as high as the guarantee allows",
        FIRST_WRITE: "before migration 0004",
    }
    for name in scripts:
        plain = tps[(name, "plain")]
        for variant in ("lock", FIRST_WRITE, "xid"):
            ratios = [x / p for x, p in zip(tps[(name, variant)], plain, strict=True)]
            out.append(
                _row(
                    f"writes, 8 writers, `{variant}`, {name} (pgbench)",
                    f"{statistics.median(tps[(name, variant)]):,.0f} tx/s",
                    f"plain {statistics.median(plain):,.0f} tx/s",
                    f"{statistics.median(ratios):.0%}",
                    targets[variant],
                )
            )
    # `lock` serializes commits, WAL flush included: one plain writer is its bound.
    plain = tps[("INSERT", "plain")]
    ratios = [x / p for x, p in zip(one_writer, plain, strict=True)]
    out.append(
        _row(
            "writes, 1 writer, plain, INSERT (pgbench)",
            f"{statistics.median(one_writer):,.0f} tx/s",
            f"plain {statistics.median(plain):,.0f} tx/s",
            f"{statistics.median(ratios):.0%}",
            "bound for serialized commits",
        )
    )
    return out


async def _trivial_wake(base: str, waiters: int, broadcasts: int) -> tuple[list[float], float]:
    conns = [await LeanConnection(base).open() for _ in range(waiters)]
    arrivals: list[float] = [0.0] * waiters
    wake_ms: list[float] = []
    post_ms: list[float] = []
    start = json.loads(await _get(base, "/parked"))["generation"]
    try:
        for generation in range(start, start + broadcasts):
            tasks = [
                asyncio.create_task(_park(conn, generation, arrivals, i))
                for i, conn in enumerate(conns)
            ]
            while json.loads(await _get(base, "/parked"))["parked"] < waiters:
                await asyncio.sleep(0.05)
            poster = await LeanConnection(base).open()
            sent = time.perf_counter()
            await poster.request("POST", "/fire")
            returned = time.perf_counter()
            await poster.close()
            await asyncio.gather(*tasks)
            post_ms.append((returned - sent) * 1000)
            wake_ms.extend((arrived - sent) * 1000 for arrived in arrivals)
    finally:
        for conn in conns:
            await conn.close()
    return wake_ms, statistics.median(post_ms)


async def _park(conn: LeanConnection, generation: int, arrivals: list[float], i: int) -> None:
    await conn.request("GET", f"/wait?after={generation}")
    arrivals[i] = time.perf_counter()


def wake_rows(args: argparse.Namespace) -> list[Row]:
    from bench.bucketsync_longpoll import broadcast_wake

    ours_p50: list[float] = []
    ours_p99: list[float] = []
    ours_post: list[float] = []
    base_p50: list[float] = []
    base_p99: list[float] = []
    base_post: list[float] = []
    earlier: dict[str, list[float]] = {"p50": [], "p99": [], "post": []}
    with child_server("trivial-wake") as (trivial, _pid), _checkout(args.baseline) as source:
        for _round in range(args.rounds):
            wake, post = asyncio.run(broadcast_wake(args.waiters, args.broadcasts))
            ours_p50.append(percentile(wake, 50))
            ours_p99.append(percentile(wake, 99))
            ours_post.append(statistics.median(post))
            if source is not None:
                env = {"PYTHONPATH": str(source / "src")}
                wake, post = asyncio.run(broadcast_wake(args.waiters, args.broadcasts, env))
                earlier["p50"].append(percentile(wake, 50))
                earlier["p99"].append(percentile(wake, 99))
                earlier["post"].append(statistics.median(post))
            wake, median_post = asyncio.run(_trivial_wake(trivial, args.waiters, args.broadcasts))
            base_p50.append(percentile(wake, 50))
            base_p99.append(percentile(wake, 99))
            base_post.append(median_post)
    ceiling = (
        f"p50 {statistics.median(base_p50):.0f} / p99 {statistics.median(base_p99):.0f} ms"
        f" (POST {statistics.median(base_post):.0f} ms)"
    )

    def row(label: str, p50: list[float], p99: list[float], post: list[float]) -> Row:
        p50_ratio = statistics.median(o / b for o, b in zip(p50, base_p50, strict=True))
        p99_ratio = statistics.median(o / b for o, b in zip(p99, base_p99, strict=True))
        return _row(
            f"broadcast wake, {args.waiters} parked waiters (bucket-sync{label})",
            f"p50 {statistics.median(p50):.0f} / p99 {statistics.median(p99):.0f} ms"
            f" (POST {statistics.median(post):.0f} ms)",
            ceiling,
            f"{p50_ratio:.2f}x / {p99_ratio:.2f}x",
            "≤ 2x the trivial app",
        )

    rows = [row("", ours_p50, ours_p99, ours_post)]
    if args.baseline is not None:
        rows.append(row(f" at {args.baseline}", earlier["p50"], earlier["p99"], earlier["post"]))
    return rows


@contextmanager
def _checkout(revision: str | None) -> Iterator[Path | None]:
    """A throwaway worktree of `revision` (its servers run its code), or None."""
    if revision is None:
        yield None
        return
    root = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory(prefix="ceilings-baseline-") as tmp:
        tree = Path(tmp) / "tree"
        subprocess.run(
            ["git", "-C", str(root), "worktree", "add", "--detach", "-q", str(tree), revision],
            check=True,
        )
        try:
            yield tree
        finally:
            subprocess.run(
                ["git", "-C", str(root), "worktree", "remove", "--force", str(tree)], check=False
            )


SECTIONS: dict[str, Callable[[argparse.Namespace], list[Row]]] = {
    "send": send_rows,
    "feed": feed_rows,
    "writes": write_rows,
    "wake": wake_rows,
}


def hubcore_rows(args: argparse.Namespace) -> list[Row]:
    """H17b's rows (snapshot import, capture/bundle import, replication lag, `?q=`)."""
    try:
        module = importlib.import_module("bench.ceilings_hubcore")
    except ModuleNotFoundError:
        print("(bench/ceilings_hubcore.py not present: hub-core rows skipped)", file=sys.stderr)
        return []
    databases = ["pg" if d == "postgresql" else d for d in args.databases]
    rows: list[Row] = module.rows(messages=args.changes, repeats=args.rounds, databases=databases)
    for row in rows:
        if "database" in row:
            row["measure"] = f"{row['measure']} ({row.pop('database')})"
    return rows


def print_table(rows: list[Row], file: TextIO = sys.stdout) -> None:
    columns = ("measure", "ours", "ceiling", "ratio", "target")
    widths = {c: max(len(c), *(len(str(r.get(c, ""))) for r in rows)) for c in columns}
    print(" | ".join(c.ljust(widths[c]) for c in columns), file=file)
    print("-+-".join("-" * widths[c] for c in columns), file=file)
    for row in rows:
        print(" | ".join(str(row.get(c, "")).ljust(widths[c]) for c in columns), file=file)
    file.flush()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds per row")
    parser.add_argument("--seconds", type=float, default=3.0, help="per throughput sample")
    parser.add_argument("--changes", type=int, default=200_000, help="feed catch-up size")
    parser.add_argument("--waiters", type=int, default=256)
    parser.add_argument("--broadcasts", type=int, default=3, help="broadcasts per wake round")
    parser.add_argument(
        "--baseline",
        metavar="REV",
        help="wake row: also run bucket-sync at git revision REV, interleaved in each round",
    )
    parser.add_argument("--only", default="send,feed,writes,wake,hubcore")
    parser.add_argument("--databases", default="sqlite,postgresql")
    parser.add_argument("--serve", choices=("minimal", "trivial-wake"), help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--database-url", help=argparse.SUPPRESS)
    parser.add_argument(
        "--no-access-log",
        dest="access_log",
        action="store_false",
        help="send rows: State Hub and the minimal app both without uvicorn's access log",
    )
    args = parser.parse_args()
    if args.serve is not None:
        serve_child(args.serve, args.port, args.database_url, args.access_log)
        return
    args.databases = [d for d in args.databases.split(",") if d]
    sections = {**SECTIONS, "hubcore": hubcore_rows}
    names = [name for name in args.only.split(",") if name]
    unknown = [name for name in names if name not in sections]
    if unknown:
        parser.error(f"--only: no section {unknown[0]!r}; choose from {', '.join(sections)}")
    rows: list[Row] = []
    for name in names:
        started = time.perf_counter()
        section = sections[name](args)
        rows.extend(section)
        # Each section's rows as soon as they are known (a long run keeps what it has).
        print(f"({name}: {time.perf_counter() - started:.0f} s)", file=sys.stderr)
        if section:
            print_table(section, file=sys.stderr)
    log = "on" if args.access_log else "off"
    print(
        f"\nceilings: median of {args.rounds} interleaved round(s), access log {log}"
        f" (cwd {os.getcwd()})\n"
    )
    print_table(rows)


if __name__ == "__main__":
    main()
