"""What the streams' stable point costs (issue 31): mention->watcher latency with the
watermark and without it (`BUCKETSYNC_STREAM_WATERMARK=false`), interleaved in one run —
two `serve --workers 2` on Redis side by side, each with its own fleet of the soak's agents
(`bench/fleet`: board posts with @-mentions, channel posts, results, reads) and one
`/v1/updates` watcher per agent, on the same machine at the same time. No kills. Prints
p50/p99 of mention->watcher and post round trip per variant, and whether every addressed
item reached its watchers exactly once (the variant without the watermark may skip).

    AGENTHUB_TEST_REDIS_URL=redis://127.0.0.1:6379/15 \\
    PYTHONPATH=src python3 bench/watermark_cost.py --agents 10 --seconds 120
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import threading
import time
import uuid
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(1, str(Path(__file__).resolve().parent.parent))

from tests.bucketsync.reliability.processes import ServeProcess
from tests.bucketsync.test_multiworker import SRC
from tests.support.redisdb import drop_prefix

from bench._servers import percentile
from bench.fleet import checks
from bench.fleet.agents import ORG, SLUG, Agent, Watcher, set_up
from bench.fleet.ledger import Ledger

VARIANTS = {"watermark": "true", "no watermark": "false"}


def server(tmp: Path, name: str, flag: str, redis: str, prefix: str) -> ServeProcess:
    return ServeProcess(
        {
            **os.environ,
            "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", ""),
            "ORG": ORG,
            "COLLAB_SLUG": SLUG,
            "AUDIT_BUCKET": f"{ORG}-admin/{SLUG}-audit",
            "BUCKETSYNC_DATA_DIR": str(tmp / name / "data"),
            "BUCKETSYNC_STORAGE": "local",
            "BUCKETSYNC_BUS_URL": redis,
            "BUCKETSYNC_BUS_PREFIX": prefix,
            "BUCKETSYNC_STREAM_WATERMARK": flag,
        },
        tmp / f"{name}.log",
        workers=2,
    )


def mention_from_send(ledger: Ledger) -> list[float]:
    """Seconds from a mentioning post's send (its acknowledged attempt's start) to each
    mentioned watcher's first delivery: a watcher woken before the poster read its 201
    counts its real wait, not 0 (`checks.latencies` measures from the acknowledgement)."""
    found = []
    for w in ledger.writes:
        sent = w.acked_at - w.latency_s
        for handle in w.mentioned & w.addressed:
            at = ledger.watches[handle].first_at.get(w.filename)
            if at is not None:
                found.append(max(0.0, at - sent))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=10, help="agents per variant")
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--drain", type=float, default=60.0)
    args = parser.parse_args()
    redis = os.environ.get("AGENTHUB_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
    loads: list[float] = []
    with tempfile.TemporaryDirectory(prefix="watermark-cost-") as tmp, ExitStack() as stack:
        stop = threading.Event()
        stack.callback(stop.set)
        ledgers: dict[str, Ledger] = {}
        threads: dict[str, tuple[list[Agent], list[Watcher]]] = {}
        for name, flag in VARIANTS.items():
            (Path(tmp) / name).mkdir()
            prefix = f"watermark-cost:{uuid.uuid4().hex[:8]}:"
            stack.callback(drop_prefix, redis, prefix)
            serve = server(Path(tmp), name, flag, redis, prefix)
            stack.callback(serve.stop)
            serve.start()
            serve.wait_healthy(120)
            serve.wait_workers(2, 120)
            ledger = ledgers[name] = Ledger()
            fleet = set_up(serve, ledger, args.agents, random.Random(args.seed))
            state = Path(tmp) / name / "watch-state"
            state.mkdir()
            watchers = [Watcher(fleet, ledger, a, state) for a in fleet.agents]
            for watcher in watchers:
                stack.callback(watcher.stopping.set)
            agents = [Agent(fleet, ledger, a, args.seed, stop) for a in fleet.agents]
            threads[name] = (agents, watchers)
        for agents, watchers in threads.values():
            for thread in [*watchers, *agents]:
                thread.start()
        started = time.monotonic()
        while time.monotonic() - started < args.seconds:
            loads.append(os.getloadavg()[0])
            time.sleep(1)
        stop.set()
        for agents, _ in threads.values():
            for agent in agents:
                agent.join(timeout=120)
        drained = time.monotonic()
        while any(ledger.undelivered() for ledger in ledgers.values()):
            if time.monotonic() - drained > args.drain:
                break
            time.sleep(1)
        for _, watchers in threads.values():
            for watcher in watchers:
                watcher.stopping.set()
            for watcher in watchers:
                watcher.join(timeout=60)
    print(
        f"watermark cost: {args.agents} agents per variant, {args.seconds:.0f} s, both variants "
        f"at once; load average mean {sum(loads) / max(1, len(loads)):.1f}, max {max(loads):.1f}"
    )
    for name, ledger in ledgers.items():
        found = checks.latencies(ledger)
        found["sent"] = mention_from_send(ledger)
        delivery = checks.delivered_once(ledger)
        cells = [
            f"{label} n={len(found[key])} p50 {percentile(found[key], 50) * 1e3:.0f} ms "
            f"p99 {percentile(found[key], 99) * 1e3:.0f} ms"
            for key, label in (
                ("mention", "mention->watcher (from the 201)"),
                ("sent", "(from the send)"),
                ("post", "post round trip"),
            )
        ]
        print(
            f"  {name:<13} " + "; ".join(cells) + f"; delivered once: {delivery.got} "
            f"({'PASS' if delivery.passed else 'FAIL'})"
        )


if __name__ == "__main__":
    main()
