"""Landscape-event benchmark: 256 agents parked on `/v1/updates?wait=55`, each woken by
the `leaderboard:overtaken` event a new champion's result writes for it.

It starts a real `agenthub bucketsync serve` on a fresh local data directory seeded with
one ranked result per waiter, parks one `GET /v1/updates?as=<handle>&wait=55` per waiter
(each re-parks from the response's cursor, like collab_watch.sh) on the lean client of
`bench/_lean.py`, then runs rounds, interleaved:

- overtaking: a fresh challenger promotes a result above everyone (`POST /v1/results`):
  one event file addressed to all 256 (overtaken) + the champion change; the figure is the time from the
  POST's send to each waiter's answer carrying its event;
- quiet: another agent promotes a result below everyone (no event is written): its POST
  latency is the baseline the overtaking POST is compared with;
- broadcast: an organizer broadcast wakes the same 256 waiters through the existing path
  (read-time union, `*` wake): the baseline the event wake is compared with.

    PYTHONPATH=src python3 bench/coordination_landscape.py [--waiters 256] [--rounds 8]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable
from pathlib import Path
from urllib.parse import urlencode

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agenthub.bucketsync.core import frontmatter, naming
from agenthub.bucketsync.identity.local import add_user
from agenthub.bucketsync.storage.base import Batch
from agenthub.bucketsync.storage.local import LocalBucketStore
from bench._lean import LeanConnection
from bench.bucketsync_longpoll import CENTRAL, ORG, SLUG, parked, seed, servers, summary


def scratch(agent: str) -> str:
    return f"{ORG}/{SLUG}-{agent}"


def result_text(agent: str, score: float) -> bytes:
    fm = {"score": score, "method": "bench", "status": "agent-run", "description": agent}
    return frontmatter.render(fm, f"run by {agent}\n")


def seed_board(data_dir: Path, waiters: list[str], promoters: list[tuple[str, float]]) -> None:
    """One result per waiter straight into the central bucket (ranked by index), and each
    promoter's source file in its own scratch bucket (registered like the waiters)."""
    store = LocalBucketStore(data_dir, durable=False)
    adds = []
    for i, agent in enumerate(waiters):
        stamp = f"20260101-0000{i // 60:02d}-{i % 60:03d}"
        fm = {
            "agent": agent,
            "timestamp": naming.stamp_to_iso(stamp),
            "via": "bucket",
            "score": 1.0 + i / 1000,
            "method": "seed",
            "status": "agent-run",
            "description": "seeded",
        }
        adds.append((f"results/{stamp}_{agent}.md", frontmatter.render(fm, "")))
    registrations = [
        (
            naming.registration_path(agent),
            frontmatter.render(
                {"agent_name": agent, "hf_user": "bench", "joined": "2026-01-01T00:00:00Z"}, ""
            ),
        )
        for agent, _score in promoters
    ]
    store.write_batch(CENTRAL, Batch(adds=adds + registrations))
    for agent, score in promoters:
        store.create(scratch(agent), creator="bench")
        store.write_batch(scratch(agent), Batch(adds=[("r.md", result_text(agent, score))]))


class UpdateWaiters:
    """One `/v1/updates` long-poll loop per handle on its own lean connection; records
    when a page carrying a landscape event file, or a broadcast, arrives."""

    def __init__(self, base: str, handles: list[str]) -> None:
        self.base = base
        self.handles = handles
        self.arrived: dict[tuple[str, str], float] = {}
        self.events: dict[tuple[str, str], asyncio.Event] = {
            (h, kind): asyncio.Event() for h in handles for kind in ("landscape", "broadcast")
        }
        self.tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        self.tasks = [asyncio.create_task(self._loop(h)) for h in self.handles]

    async def _loop(self, handle: str) -> None:
        conn = await LeanConnection(self.base).open()
        try:
            _status, body = await conn.request("GET", f"/v1/updates?as={handle}&limit=1")
            cursor = json.loads(body)["cursor"]
            while True:
                params = {"as": handle, "wait": "55", "order": "asc", "limit": "50"}
                if cursor:
                    params["after"] = cursor
                _status, body = await conn.request("GET", f"/v1/updates?{urlencode(params)}")
                page = json.loads(body)
                if page["items"]:
                    cursor = page["cursor"]
                    now = time.perf_counter()
                    for kind, suffix in (
                        ("landscape", "_landscape.md"),
                        ("broadcast", "_human-"),
                    ):
                        if any(suffix in name for name in page["items"]):
                            self.arrived[(handle, kind)] = now
                            self.events[(handle, kind)].set()
        finally:
            await conn.close()

    async def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


async def post(
    base: str, route: str, payload: dict[str, object], token: str | None = None
) -> tuple[float, float]:
    """POST `payload` to `route` on a fresh lean connection; (sent, returned) moments."""
    conn = await LeanConnection(base).open()
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    try:
        sent = time.perf_counter()
        status, answer = await conn.request("POST", route, json.dumps(payload).encode(), headers)
        returned = time.perf_counter()
    finally:
        await conn.close()
    if status != 201:
        raise RuntimeError(f"POST {route}: HTTP {status} {answer[:300]!r}")
    return sent, returned


def promote(base: str, agent: str) -> Awaitable[tuple[float, float]]:
    return post(base, "/v1/results", {"source": f"hf://buckets/{scratch(agent)}/r.md"})


async def woken(pool: UpdateWaiters, kind: str, sent: float) -> list[float]:
    """Wait for every waiter's page of `kind`; the wake times from `sent`, in ms."""
    wanted = [pool.events[(h, kind)] for h in pool.handles]
    await asyncio.wait_for(asyncio.gather(*(e.wait() for e in wanted)), timeout=120)
    return [(pool.arrived[(h, kind)] - sent) * 1000 for h in pool.handles]


async def run(waiters: int, rounds: int) -> None:
    handles = [f"agent-{i:03d}" for i in range(waiters)]
    challengers = [(f"champ-{k:03d}", 100.0 + k) for k in range(rounds)]
    quiet = [(f"quiet-{k:03d}", 0.001 + k / 1e6) for k in range(rounds)]
    env = {
        "LONGPOLL_MAX_WAITERS_TOTAL": str(max(256, waiters + 16)),
        "LONGPOLL_WAKE_SPREAD_THRESHOLD": "1000000",
    }
    wake_ms: list[float] = []
    broadcast_ms: list[float] = []
    overtaking_post_ms: list[float] = []
    quiet_post_ms: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        seed(data, waiters, 0)
        # Raw posts are limited to 5 a minute per author: one organizer per broadcast.
        tokens = [add_user(data / "users.json", f"boss{k}", role="admin") for k in range(rounds)]
        seed_board(data, handles, challengers + quiet)
        with servers(data, 1, env) as started:
            base = started[0][1]
            pool = UpdateWaiters(base, handles)
            await pool.start()
            try:
                for k in range(rounds):
                    await parked([base], waiters)
                    sent, returned = await promote(base, quiet[k][0])
                    quiet_post_ms.append((returned - sent) * 1000)
                    await parked([base], waiters)
                    for event in pool.events.values():
                        event.clear()
                    sent, returned = await promote(base, challengers[k][0])
                    overtaking_post_ms.append((returned - sent) * 1000)
                    wake_ms.extend(await woken(pool, "landscape", sent))
                    await parked([base], waiters)
                    body = {
                        "agent_id": f"human-boss{k}",
                        "body": f"all hands {k}",
                        "broadcast": True,
                    }
                    sent, _returned = await post(base, "/v1/messages", body, tokens[k])
                    broadcast_ms.extend(await woken(pool, "broadcast", sent))
            finally:
                await pool.stop()
    ratio = statistics.median(overtaking_post_ms) / statistics.median(quiet_post_ms)
    print(f"== landscape events: 1 worker, {waiters} parked /v1/updates waiters, {rounds} rounds")
    print(f"  overtaken wake (from POST send):      {summary(wake_ms)}")
    print(f"  broadcast wake (from POST send):      {summary(broadcast_ms)}")
    wake_ratio = statistics.median(wake_ms) / statistics.median(broadcast_ms)
    print(f"  wake median ratio event/broadcast:    {wake_ratio:.2f}x")
    print(f"  POST /v1/results, overtaking {waiters}:  {summary(overtaking_post_ms)}")
    print(f"  POST /v1/results, no event (quiet):   {summary(quiet_post_ms)}")
    print(f"  POST median ratio overtaking/quiet:   {ratio:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--waiters", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args()
    asyncio.run(run(args.waiters, args.rounds))


if __name__ == "__main__":
    main()
