"""A fleet soak (issue 31): N agents against `agenthub bucketsync serve --workers 2` on
Redis — board posts with @-mentions, channel posts, results, digest reads, an organizer's
broadcasts, every write retried with one `Idempotency-Key`, and one `/v1/updates` watcher
per agent long-polling from a cursor persisted in a file — plus State Hub writers on
PostgreSQL and a hub-core follower, with `kill -9` faults on a schedule (one worker, the
whole bucket-sync server, State Hub, hub-core; each restarted). At the end it checks:

- every acknowledged write stored exactly once (board, channels, results, inbox copies,
  State Hub sends), and none given up on;
- every mention, broadcast and channel post delivered exactly once to every watcher it
  addresses (each watcher's delivered set == its addressed set, no duplicates);
- the leaderboard equals the best result per agent;
- no 5xx outside a kill window (kill until healthy again + a grace);
- no RSS or fd growth of any server process (sampled from /proc);
- hub-core equal to State Hub.

One line per invariant (name, expected, got, PASS/FAIL), then a summary; exit status 1 when
an invariant fails.

    AGENTHUB_TEST_REDIS_URL=redis://127.0.0.1:6379/15 \\
    AGENTHUB_TEST_PG_URL=postgresql://postgres@127.0.0.1:5432/postgres \\
    PYTHONPATH=src python3 bench/fleet_soak.py --agents 10 --minutes 5 --kills 6 --seed 1
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import httpx

sys.path.insert(1, str(Path(__file__).resolve().parent.parent))

from tests.bucketsync.reliability.processes import ServeProcess
from tests.bucketsync.test_multiworker import SRC
from tests.support.redisdb import drop_prefix

from bench._servers import pg_database
from bench.fleet import checks
from bench.fleet.agents import ORG, SLUG, Agent, Fleet, Organizer, Watcher, set_up
from bench.fleet.ledger import Ledger
from bench.fleet.procs import Sampler, Service, children
from bench.fleet.statehub import Writer, converge, subjects

KINDS = ("worker", "server", "statehub", "hubcore")
GRACE_S = 5.0  # after a restart is healthy, requests parked on the dead process may still fail


@dataclass(frozen=True)
class Config:
    agents: int = 10
    seconds: float = 300.0
    kills: int = 6
    seed: int = 1
    workers: int = 2
    writers: int = 3
    drain_s: float = 120.0  # how long watchers get to catch up once writes stop
    restart_s: float = 120.0  # how long a restarted service gets to be healthy


def schedule(config: Config) -> list[tuple[float, str]]:
    """Kill times spread over the run, every kind once before any repeats, seeded."""
    rng = random.Random(config.seed)
    kinds: list[str] = []
    while len(kinds) < config.kills:
        kinds += rng.sample(KINDS, len(KINDS))
    kinds = kinds[: config.kills]
    step = config.seconds / (config.kills + 1)
    return [(step * (i + 1) + rng.uniform(-0.2, 0.2) * step, k) for i, k in enumerate(kinds)]


class Soak:
    def __init__(self, config: Config, tmp: Path, statehub_url: str, hubcore_url: str) -> None:
        self.config = config
        self.statehub_url, self.hubcore_url = statehub_url, hubcore_url
        self.ledger = Ledger()
        self.rng = random.Random(config.seed)
        self.redis = os.environ.get("AGENTHUB_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
        self.prefix = f"fleet-soak:{uuid.uuid4().hex[:8]}:"
        base = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
        self.server = ServeProcess(
            {
                **base,
                "ORG": ORG,
                "COLLAB_SLUG": SLUG,
                "AUDIT_BUCKET": f"{ORG}-admin/{SLUG}-audit",
                "BUCKETSYNC_DATA_DIR": str(tmp / "data"),
                "BUCKETSYNC_STORAGE": "local",
                "BUCKETSYNC_BUS_URL": self.redis,
                "BUCKETSYNC_BUS_PREFIX": self.prefix,
            },
            tmp / "bucketsync.log",
            workers=config.workers,
        )
        self.statehub = Service(
            "statehub",
            {**base, "STATEHUB_DATABASE_URL": statehub_url},
            tmp / "statehub.log",
            "/state/health",
        )
        self.hubcore = Service(
            "hubcore",
            {
                **base,
                "HUBCORE_DATABASE_URL": hubcore_url,
                "HUBCORE_STATEHUB_URL": self.statehub.base,
            },
            tmp / "hubcore.log",
            "/healthz",
        )
        self.state = tmp / "watch-state"
        self.state.mkdir()
        self.loads: list[float] = []

    # -- processes --------------------------------------------------------------------

    def start_statehub(self) -> float:
        self.statehub.start()
        return self.statehub.wait_ready(self.config.restart_s, lambda r: r.status_code == 200)

    def start_hubcore(self) -> float:
        self.hubcore.start()
        return self.hubcore.wait_ready(self.config.restart_s, lambda r: bool(r.json()["cursor"]))

    def workers(self) -> list[int]:
        assert self.server.process is not None
        return children(self.server.process.pid)

    def pids(self) -> dict[int, str]:
        found: dict[int, str] = {}
        if self.server.process is not None and self.server.process.poll() is None:
            found[self.server.process.pid] = "bucketsync-supervisor"
            found.update({pid: "bucketsync-worker" for pid in self.workers()})
        for service in (self.statehub, self.hubcore):
            if service.pid is not None:
                found[service.pid] = service.name
        return found

    def kill(self, kind: str) -> None:
        service = "bucketsync" if kind in ("worker", "server") else kind
        self.ledger.window_opened(service)
        if kind == "worker":
            before = self.workers()
            os.kill(self.rng.choice(before), signal.SIGKILL)
            healthy = self.wait_workers_replaced(before)
        elif kind == "server":
            self.server.kill()
            self.server.start()
            healthy = self.server.wait_healthy(self.config.restart_s)
        elif kind == "statehub":
            self.statehub.kill()
            healthy = self.start_statehub()
        else:
            self.hubcore.kill()
            healthy = self.start_hubcore()
        self.ledger.window_closed(service, kind, healthy, GRACE_S)

    def wait_workers_replaced(self, before: list[int]) -> float:
        deadline = time.monotonic() + self.config.restart_s
        while True:
            now = self.workers()
            if len(now) == self.config.workers and len(set(now) - set(before)) == 1:
                return self.server.wait_healthy(self.config.restart_s)
            if time.monotonic() > deadline:
                raise RuntimeError(f"the killed worker was not replaced: {before} -> {now}")
            time.sleep(0.1)

    # -- the run ----------------------------------------------------------------------

    def run(self, out: Callable[[str], None]) -> list[checks.Check]:
        config = self.config
        with ExitStack() as stack:
            stack.callback(drop_prefix, self.redis, self.prefix)
            for service in (self.hubcore, self.statehub, self.server):
                stack.callback(service.stop)
            self.server.start()
            self.server.wait_healthy(config.restart_s)
            self.server.wait_workers(config.workers, config.restart_s)
            self.start_statehub()
            self.start_hubcore()
            fleet = set_up(self.server, self.ledger, config.agents, self.rng)
            stop = threading.Event()
            watchers = [Watcher(fleet, self.ledger, a, self.state) for a in fleet.agents]
            stack.callback(stop.set)  # also when a restart fails: no thread outlives the run
            for watcher in watchers:
                stack.callback(watcher.stopping.set)
            actors: list[threading.Thread] = [
                *(Agent(fleet, self.ledger, a, config.seed, stop) for a in fleet.agents),
                Organizer(fleet, self.ledger, "boss", config.seed, stop),
                *(
                    Writer(self.statehub.base, self.ledger, i, config.seed, stop)
                    for i in range(config.writers)
                ),
            ]
            sampler = self.sampler = Sampler(self.pids)
            stack.callback(sampler.stopping.set)
            for thread in [*watchers, sampler, *actors]:
                thread.start()
            started = time.monotonic()
            plan = schedule(config)
            out(f"soak: {config}; kills at " + ", ".join(f"{t:.0f}s {k}" for t, k in plan))
            # Every kill happens, even when restarts under load outlast the planned run.
            while time.monotonic() - started < config.seconds or plan:
                self.loads.append(os.getloadavg()[0])
                if plan and time.monotonic() - started >= plan[0][0]:
                    _, kind = plan.pop(0)
                    self.kill(kind)
                    out(f"  {time.monotonic() - started:6.1f}s kill -9 {kind}: restarted")
                time.sleep(1)
            out(f"  {time.monotonic() - started:6.1f}s writes stop")
            stop.set()
            for thread in actors:
                thread.join(timeout=300)
            drained = time.monotonic()
            while self.ledger.undelivered() and time.monotonic() - drained < config.drain_s:
                self.loads.append(os.getloadavg()[0])
                time.sleep(1)
            out(
                f"  writes stopped; watchers caught up after {time.monotonic() - drained:.1f} s "
                f"({self.ledger.undelivered()} addressed items still undelivered)"
            )
            for watcher in watchers:
                watcher.stopping.set()
            for watcher in watchers:  # each ends with its current long-poll
                watcher.join(timeout=60)
            sampler.stop()
            found = self.verify(fleet)
        out(checks.render(found, checks.summary(self.ledger, self.loads)))
        return found

    def verify(self, fleet: Fleet) -> list[checks.Check]:
        ledger = self.ledger
        with httpx.Client(base_url=self.server.base, timeout=60) as client:
            found = checks.stored_once(client, fleet, ledger)
            found.append(checks.delivered_once(ledger))
            found.append(checks.leaderboard(client, ledger))
        found.append(checks.replayed(ledger))
        found.append(checks.no_5xx(ledger))
        found += checks.growth(self.sampler.samples)
        found.append(checks.statehub_stored(ledger, subjects(self.statehub_url)))
        rows, differ, waited = converge(self.statehub_url, self.hubcore_url, 60)
        found.append(
            checks.Check(
                "hub-core equals State Hub",
                f"{rows} rows, 0 differ",
                f"{differ} differ",
                differ == 0,
                f"compared for {waited:.1f} s",
            )
        )
        return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=10)
    length = parser.add_mutually_exclusive_group()
    length.add_argument("--minutes", type=float)
    length.add_argument("--seconds", type=float)
    parser.add_argument("--kills", type=int, default=6)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--writers", type=int, default=3, help="State Hub writers")
    parser.add_argument("--drain", type=float, default=120.0, help="seconds to catch up")
    args = parser.parse_args()
    seconds = args.seconds if args.seconds else (args.minutes or 5.0) * 60
    config = Config(
        args.agents, seconds, args.kills, args.seed, writers=args.writers, drain_s=args.drain
    )
    found, _ = soak(config, lambda line: print(line, flush=True))
    sys.exit(0 if all(c.passed for c in found) else 1)


def soak(config: Config, out: Callable[[str], None]) -> tuple[list[checks.Check], Ledger]:
    """Run the soak: its invariants' verdicts and what it did."""
    with (
        tempfile.TemporaryDirectory(prefix="fleet-soak-") as tmp,
        pg_database("agenthub_soak_sh") as statehub_url,
        pg_database("agenthub_soak_hc") as hubcore_url,
    ):
        run = Soak(config, Path(tmp), statehub_url, hubcore_url)
        return run.run(out), run.ledger


if __name__ == "__main__":
    main()
