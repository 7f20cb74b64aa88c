"""Hub API requests per operation, and a fleet inside a Team org's rate limit (issue 29).

Everything runs against the Hub emulator (tests/support/hub_emulator) with the real
huggingface_hub client over HTTP; "API requests" are what the Hub's limiter charges to the
API bucket (kind "api": not Xet CAS transfers, not `/resolve/` reads, which the Hub counts
as Resolvers, 20,000 per 5 minutes for a Team org).

1. Per operation (one agent alone, warm: the read model listed once): registration, a
   board post with one @-mention and an Idempotency-Key, a result, a digest, a watched
   read (`GET /v1/inbox/{me}?wait=`), a digest after the listing TTL. `--before REF` runs
   the same figures on the `src/` of git revision REF (in a subprocess, from `git archive`)
   and prints them side by side.
2. A fleet (`--agents 200 --minutes 10`): every agent posts once a minute (one @-mention),
   keeps a watcher parked on its inbox, promotes a result every `--result-every` minutes
   and reads its digest every `--digest-every` minutes, against an emulator enforcing 3,000
   API requests per 5 minutes (tests/support/hub_emulator/ratelimit.py). Printed: writes
   acknowledged but not in the Hub (must be 0), Hub 429s that reached a client as anything
   but 503 + Retry-After (0), 5xx other than 503 (0), post p50/p99, and API requests used
   per 5-minute window. Agents register before the clock starts (4 requests each).
3. agent-collabs (`--agent-collabs DIR`, a checkout of huggingface/agent-collabs): its
   backend is driven through the same emulator with the same per-operation workload, in a
   subprocess with DIR/backend on its path (bench/hub_budget_collabs.py). Nothing of it is
   copied here.

    PYTHONPATH=src python3 bench/hub_budget.py --before fa18f96 --agents 200 --minutes 10
    PYTHONPATH=src python3 bench/hub_budget.py --agents 20 --minutes 2     # a short run

Figures of 2026-12-06 (2 cores shared with other jobs, load average ~9), per operation
before (fa18f96) / after / agent-collabs: registration 9 / 4 / 11, post 12 / 3 / 8,
result 10 / 3 / 12, warm digest and inbox 0 / 0 / 0, digest after the TTL 20 / 0 / -
(the central bucket's change feed replaces the re-listing). Fleet, 200 agents, 10 min:
0 of 2,200 acknowledged writes lost, 0 429s leaked, 0 5xx, no Hub 429 at all, post p50
0.66 s / p99 1.20 s, API requests per 5-min window 1,379 and 1,384 of 3,000 (1.38 per post,
counting every request of the fleet), 7,041 writes in 2,798 batch requests. Before, by
the per-operation counts, the same workload needs ~13,000 API requests per 5 minutes
(4.3x the limit); agent-collabs ~9,200.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(1, str(ROOT))
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

from tests.support.hub_emulator import running_hub  # noqa: E402
from tests.support.hub_emulator.ratelimit import TEAM, RateLimit  # noqa: E402
from tests.support.hub_workload import AUDIT, CENTRAL, Workload  # noqa: E402

from agenthub.clock import FrozenClock, SystemClock  # noqa: E402

OPERATIONS = ("registration", "post", "result", "digest", "watched read", "digest after TTL")


# -- 1. per operation ------------------------------------------------------------------------
def per_operation() -> dict[str, int]:
    """API requests of each operation, one agent alone, warm."""
    figures: dict[str, int] = {}
    clock = FrozenClock()
    with (
        running_hub() as hub,
        tempfile.TemporaryDirectory() as tmp,
        Workload.start(hub, Path(tmp), clock=clock) as world,
    ):
        for agent in ("a1", "a2", "a3"):
            world.prepare(agent)
        world.register("a2")
        world.board()
        world.digest("a2")
        world.result("a2")
        figures["registration"] = world.measure(lambda: world.register("a1"))
        world.register("a3")
        figures["post"] = world.measure(lambda: world.post("a1", "a2", key="k1"))
        figures["result"] = world.measure(lambda: world.result("a1"))
        world.digest("a1")
        figures["digest"] = world.measure(lambda: world.digest("a1"))
        world.inbox("a2")
        figures["watched read"] = world.measure(
            lambda: world.client.get("/v1/inbox/a2", params={"wait": "0.5"})
        )
        clock.advance(31)  # past LISTING_TTL_S: the read model re-lists what it reads
        figures["digest after TTL"] = world.measure(lambda: world.digest("a1"))
    return figures


def per_operation_at(ref: str) -> dict[str, int]:
    """`per_operation` on the src/ of git revision `ref` (this bench and tests/support as
    they are here)."""
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", ref, "src"], check=True, capture_output=True
        ).stdout
        archive_path = Path(tmp) / "src.tar"
        archive_path.write_bytes(archive)
        with tarfile.open(archive_path) as tar:
            tar.extractall(tmp, filter="data")
        env = {**os.environ, "PYTHONPATH": f"{tmp}/src{os.pathsep}{ROOT}"}
        out = subprocess.run(
            [sys.executable, __file__, "--ops-json"],
            env=env,
            check=True,
            capture_output=True,
            text=True,
            cwd=tmp,
        ).stdout
    return {k: int(v) for k, v in json.loads(out.strip().splitlines()[-1]).items()}


# -- 2. the fleet ----------------------------------------------------------------------------
class Tally:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.statuses: Counter[str] = Counter()
        self.post_s: list[float] = []
        self.acknowledged: list[str] = []  # central paths answered 201
        self.bad_503 = 0  # 503 without Retry-After
        self.leaked_429 = 0

    def record(self, kind: str, status: int, headers: Any, seconds: float) -> None:
        with self.lock:
            self.statuses[f"{kind} {status}"] += 1
            if status == 429:
                self.leaked_429 += 1
            if status == 503 and "retry-after" not in {k.lower() for k in headers}:
                self.bad_503 += 1
            if kind == "post" and status == 201:
                self.post_s.append(seconds)


def fleet(agents: int, minutes: float, result_every: float, digest_every: float) -> None:
    names = [f"f{index:03d}" for index in range(agents)]
    seed = 29
    tally = Tally()
    with running_hub() as hub, tempfile.TemporaryDirectory() as tmp:
        waiters = str(agents * 2 + 16)
        with Workload.start(
            hub, Path(tmp), clock=SystemClock(), LONGPOLL_MAX_WAITERS_TOTAL=waiters
        ) as world:
            for name in names:
                world.prepare(name)
            with ThreadPoolExecutor(max_workers=8) as pool:
                registered = list(pool.map(world.register, names))
            assert all(r.status_code == 201 for r in registered), registered[0].text
            limiter = RateLimit(api=TEAM["api"], resolve=TEAM["resolve"])
            hub.add_policy(limiter)
            before = hub.api_requests()
            started = time.monotonic()
            end = started + minutes * 60
            stop = threading.Event()

            def timed(kind: str, call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
                t0 = time.monotonic()
                response = call(*args, **kwargs)
                tally.record(kind, response.status_code, response.headers, time.monotonic() - t0)
                return response

            def agent_loop(index: int, name: str) -> None:
                rng = random.Random(f"{seed}-{name}")
                offset = rng.random() * 60
                next_post = started + offset
                next_result = started + rng.random() * result_every * 60
                next_digest = started + rng.random() * digest_every * 60
                while not stop.is_set():
                    now = time.monotonic()
                    due = min(next_post, next_result, next_digest)
                    if due >= end:
                        return
                    if due > now:
                        stop.wait(due - now)
                        continue
                    if due == next_post:
                        peer = names[(index + 1 + rng.randrange(len(names) - 1)) % len(names)]
                        answer = timed("post", world.post, name, peer)
                        if answer.status_code == 201:
                            with tally.lock:
                                tally.acknowledged.append(answer.json()["path"])
                        next_post += 60
                    elif due == next_result:
                        answer = timed("result", world.result, name)
                        if answer.status_code == 201:
                            with tally.lock:
                                tally.acknowledged.append(answer.json()["path"])
                        next_result += result_every * 60
                    else:
                        timed("digest", world.digest, name)
                        next_digest += digest_every * 60

            def watcher(name: str) -> None:
                cursor: str | None = None  # the stream's cursor: park for what comes next
                while not stop.is_set() and time.monotonic() < end:
                    params = {"wait": "20", **({"after": cursor} if cursor else {})}
                    answer = timed("watch", world.client.get, f"/v1/inbox/{name}", params=params)
                    if answer.status_code == 200:
                        cursor = answer.json().get("cursor") or cursor
                    else:
                        stop.wait(1)

            threads = [
                threading.Thread(target=agent_loop, args=(i, n)) for i, n in enumerate(names)
            ]
            threads += [threading.Thread(target=watcher, args=(n,)) for n in names]
            for thread in threads:
                thread.start()
            for thread in threads[:agents]:
                thread.join()
            stop.set()
            elapsed = time.monotonic() - started
            for thread in threads[agents:]:  # a parked watch answers within its wait
                thread.join()
            used = hub.api_requests() - before
            files = hub.files(CENTRAL)
            lost = [path for path in tally.acknowledged if path not in files]
            journal_open = [p for p in hub.files(AUDIT) if p.startswith("journal/")]
            group = world.store.group
            routes = hub.counts(kind="api")
    posts = sorted(tally.post_s)
    post_count = sum(v for k, v in tally.statuses.items() if k.startswith("post "))
    five_xx = sum(
        v for k, v in tally.statuses.items() if k.split()[-1].startswith("5") and k[-3:] != "503"
    )
    print(f"\nfleet: {agents} agents, {elapsed / 60:.1f} min, Team limit {TEAM['api']} API/5 min")
    print(f"  answers:                 {dict(sorted(tally.statuses.items()))}")
    print(f"  acknowledged writes lost: {len(lost)} of {len(tally.acknowledged)}")
    print(f"  open journal entries:     {len(journal_open)}")
    print(
        f"  429s reaching a client as other than 503+Retry-After: {tally.leaked_429 + tally.bad_503}"
    )
    print(f"  5xx other than 503:       {five_xx}")
    print(f"  Hub 429s answered:        {dict(limiter.refused)}")
    if posts:
        p99 = posts[min(len(posts) - 1, int(len(posts) * 0.99))]
        print(f"  post p50 / p99:           {statistics.median(posts):.3f} s / {p99:.3f} s")
    print(f"  API requests per 5-min window: {limiter.windows('api')}")
    print(f"  resolver requests per window:  {limiter.windows('resolve')}")
    print(
        f"  API requests per 5 min (rate): {used / elapsed * 300:.0f}; "
        f"per post {used / max(1, post_count):.2f} (all traffic over posts)"
    )
    print(f"  group commit: {group.writes} writes in {group.sent} batch requests")
    print(f"  API requests by route:    {dict(routes)}")


def print_ops(after: dict[str, int], before: dict[str, int] | None, ref: str | None) -> None:
    print("Hub API requests per operation (one agent, warm)")
    header = f"  {'operation':<18}" + (f"{'before (' + str(ref) + ')':>18}" if before else "")
    print(header + f"{'after':>8}")
    for name in OPERATIONS:
        left = f"{before.get(name, '-'):>18}" if before else ""
        print(f"  {name:<18}{left}{after[name]:>8}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", help="git revision to measure the per-operation figures on")
    parser.add_argument("--agents", type=int, default=200)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--result-every", type=float, default=10.0, help="minutes per agent")
    parser.add_argument("--digest-every", type=float, default=5.0, help="minutes per agent")
    parser.add_argument("--no-fleet", action="store_true")
    parser.add_argument("--agent-collabs", help="a checkout of huggingface/agent-collabs")
    parser.add_argument("--ops-json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.ops_json:
        print(json.dumps(per_operation()))
        return
    after = per_operation()
    before = per_operation_at(args.before) if args.before else None
    print_ops(after, before, args.before)
    columns = {"after": after, **({f"before ({args.before})": before} if before else {})}
    if args.agent_collabs:
        from bench.hub_budget_collabs import collabs_figures

        collabs = collabs_figures(Path(args.agent_collabs))
        print("\nagent-collabs backend, same workload, same emulator (driven, not modelled)")
        for name, count in collabs.items():
            print(f"  {name:<18}{count:>8}")
        if all(isinstance(collabs[k], int) for k in ("post", "result")):
            columns["agent-collabs"] = {k: int(v) for k, v in collabs.items()}
    print(
        f"\nprojected from the lone-operation counts (no batch shared), {args.agents} agents posting once a "
        f"minute and a result every {args.result_every:g} min (API requests per 5 min; "
        "warm reads 0):"
    )
    for label, counts in columns.items():
        posts = args.agents * 5 * counts["post"]
        results = args.agents * 5 / args.result_every * counts["result"]
        print(f"  {label:<22}{posts + results:>8.0f}")
    if not args.no_fleet:
        fleet(args.agents, args.minutes, args.result_every, args.digest_every)


if __name__ == "__main__":
    main()
