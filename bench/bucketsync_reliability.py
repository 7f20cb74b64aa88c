"""bucket-sync reliability figures (issue 16), every variant interleaved in ONE run:

1. a 10^7-leaf YAML alias post: the old parse (safe_load, then the JSON conversion that
   expands every alias) against today's `frontmatter.parse_strict`;
2. audit append p50 at month sizes 10 / 10,000 / 100,000 rows: today's in-place append
   against the old rewrite of the month file (fsync on, the local store);
3. `Idempotency-Key` overhead on `POST /v1/messages` (in-process ASGI, local store):
   median latency with and without a key, alternating request by request.

    PYTHONPATH=src python3 bench/bucketsync_reliability.py [--levels 7] [--posts 300]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import yaml
from fastapi.testclient import TestClient

sys.path.insert(1, str(Path(__file__).resolve().parent.parent))

from agenthub.bucketsync.app import create_app
from agenthub.bucketsync.core import frontmatter
from agenthub.bucketsync.core.audit import AuditLog
from agenthub.bucketsync.errors import InvalidFrontmatter
from agenthub.bucketsync.identity.local import LocalIdentity
from agenthub.bucketsync.settings import load_settings
from agenthub.bucketsync.storage.base import Batch
from agenthub.bucketsync.storage.local import LocalBucketStore
from agenthub.clock import FrozenClock
from bench._servers import register_agent

AUDIT = "bench-admin/chal-audit"


def alias_bomb(levels: int) -> str:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for level in range(1, levels):
        lines.append(f"a{level}: &a{level} [{', '.join([f'*a{level - 1}'] * 10)}]")
    return "\n".join(lines) + "\n"


def bomb_figures(levels: int) -> None:
    header = alias_bomb(levels)
    document = f"---\n{header}---\nboom\n".encode()
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    started = time.perf_counter()
    frontmatter._jsonable(yaml.load(header, Loader=loader))  # what parse_strict used to do
    before = time.perf_counter() - started
    after = []
    for _ in range(50):
        started = time.perf_counter()
        with contextlib.suppress(InvalidFrontmatter):
            frontmatter.parse_strict(document)
        after.append(time.perf_counter() - started)
    print(f"alias bomb ({len(document)} bytes, 10^{levels} leaves)")
    print(f"  before (safe_load + JSON expansion): {before:.2f} s")
    print(f"  after  (parse_strict, median of 50): {statistics.median(after) * 1e3:.3f} ms")
    print(f"  ratio: {before / statistics.median(after):,.0f}x")


def audit_figures(root: Path) -> None:
    clock = FrozenClock(datetime(2026, 3, 1, tzinfo=UTC))
    line = (
        b'{"ts":"2026-03-01T00:00:00Z","agent_id":"agent-1","route":"/v1/messages","via":"raw",'
        b'"source":null,"target_path":"message_board/20260301-000000-000_agent-1.md",'
        b'"bytes":420,"status_code":201,"mentions_delivered":["agent-2"],"broadcast":false}\n'
    )
    print("audit append p50 (local store, fsync on)")
    for rows in (10, 10_000, 100_000):
        store = LocalBucketStore(root / f"audit-{rows}", clock=clock)
        store.create(AUDIT, creator="bucket-sync", private=True)
        audit = AuditLog(store, AUDIT, clock, two_org=False)
        path = audit.path_for_now()
        store.append(AUDIT, path, line * rows)
        month = line * rows
        new: list[float] = []
        old: list[float] = []
        rounds = 20 if rows < 100_000 else 6
        for _ in range(rounds):
            for _ in range(5):
                started = time.perf_counter()
                audit.record(
                    agent_id="agent-1",
                    route="/v1/messages",
                    via="raw",
                    source=None,
                    target_path="message_board/x.md",
                    size=420,
                    status_code=201,
                )
                new.append(time.perf_counter() - started)
            # The old append: the month (cached in memory) plus the line, rewritten whole.
            started = time.perf_counter()
            month += line
            store.write_batch(AUDIT, Batch(adds=[("audit/old.jsonl", month)]))
            old.append(time.perf_counter() - started)
        print(
            f"  {rows:>7,} rows: in place {statistics.median(new) * 1e3:7.3f} ms   "
            f"rewrite {statistics.median(old) * 1e3:8.3f} ms   "
            f"({statistics.median(old) / statistics.median(new):,.0f}x)"
        )


def idempotency_figures(root: Path, posts: int) -> None:
    data = root / "idem"
    settings = load_settings(
        ORG="bench",
        COLLAB_SLUG="chal",
        AUDIT_BUCKET=AUDIT,
        BUCKETSYNC_DATA_DIR=str(data),
        BUCKETSYNC_STORAGE="local",
    )
    identity = LocalIdentity(data / "users.json", org="bench")
    app = create_app(settings, identity=identity)
    agents = [f"agent-{i}" for i in range(posts // 4 + 1)]
    with TestClient(app) as client:
        for agent in agents:
            register_agent(client, identity, agent, org="bench", slug="chal")
        with_key: list[float] = []
        without: list[float] = []
        for index in range(posts):
            agent = agents[index // 4]
            headers = {"Idempotency-Key": f"k-{index}"} if index % 2 else {}
            started = time.perf_counter()
            answer = client.post(
                "/v1/messages", json={"agent_id": agent, "body": f"post {index}"}, headers=headers
            )
            (with_key if index % 2 else without).append(time.perf_counter() - started)
            assert answer.status_code == 201, answer.text
    a, b = statistics.median(with_key), statistics.median(without)
    print(f"POST /v1/messages, {posts} posts alternating (in-process ASGI, local store)")
    print(
        f"  with Idempotency-Key p50 {a * 1e3:.2f} ms, without {b * 1e3:.2f} ms, ratio {a / b:.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--levels", type=int, default=7)
    parser.add_argument("--posts", type=int, default=300)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-reliability-") as tmp:
        bomb_figures(args.levels)
        audit_figures(Path(tmp))
        idempotency_figures(Path(tmp), args.posts)


if __name__ == "__main__":
    main()
