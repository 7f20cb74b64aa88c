"""Reach-forecast overhead on `POST /v1/messages` (issue 18, item 3).

One bucket-sync app in process (ASGI, local store) with `--agents` registered agents; a
third of them long-polled recently, a third are parked — on this worker (its registry) or,
on Redis, on "another worker" (entries written to the shared presence map by a second
`RedisPresence`, the way a second worker's registry would). Each scenario posts
`--posts` messages, alternating the forecast on (`hub.reach_forecast = True`) and off (the
control: the same post, same wake, no `reach`), and prints p50/p99 of each and their ratio:

- mention: one post mentioning `--mentions` agents;
- broadcast: an organizer broadcast to every agent;
- both again with `BUCKETSYNC_BUS_URL` (the lookup is one pipelined Redis round trip);
- and the forecast alone (audience, lookup, sort), called directly, for 8 and all agents.

The rate limiters are widened for the run: the benchmark measures the forecast, not them.

    PYTHONPATH=src python3 bench/coordination_reach.py [--agents 64] [--posts 400] [--skip-redis]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import redis
from fastapi.testclient import TestClient

sys.path.insert(1, str(Path(__file__).resolve().parent.parent))

from agenthub.bucketsync.app import create_app
from agenthub.bucketsync.board import reach
from agenthub.bucketsync.core.hub import Hub, Limiters
from agenthub.bucketsync.core.limiter import CompoundLimiter, Rate
from agenthub.bucketsync.identity.local import LocalIdentity
from agenthub.bucketsync.scaleout.presence import RedisPresence
from agenthub.bucketsync.settings import load_settings
from agenthub.bucketsync.storage.local import LocalBucketStore
from agenthub.clock import SystemClock
from bench._servers import percentile, register_agent

ORG, SLUG = "bench", "chal"
AUDIT = f"{ORG}-admin/{SLUG}-audit"
REDIS = os.environ.get("AGENTHUB_BENCH_REDIS_URL", "redis://127.0.0.1:6379/15")


@contextmanager
def served(data: Path, bus_url: str | None, prefix: str) -> Iterator[tuple[TestClient, Hub]]:
    env: dict[str, Any] = {
        "ORG": ORG,
        "COLLAB_SLUG": SLUG,
        "AUDIT_BUCKET": AUDIT,
        "BUCKETSYNC_DATA_DIR": str(data),
        "BUCKETSYNC_STORAGE": "local",
    }
    if bus_url:
        env |= {"BUCKETSYNC_BUS_URL": bus_url, "BUCKETSYNC_BUS_PREFIX": prefix}
    settings = load_settings(**env)
    identity = LocalIdentity(data / "users.json", org=ORG)
    # durable=False: no fsync per file, so the post is as fast as the store allows and the
    # forecast's share of it as visible as it can be.
    app = create_app(settings, store=LocalBucketStore(data, durable=False), identity=identity)
    with TestClient(app) as client:
        hub: Hub = app.state.hub
        clock = SystemClock()
        hub.limiters = Limiters.build(
            lambda name, _rates: CompoundLimiter(name, [Rate(10**9, 60.0)], clock)
        )
        yield client, hub


class Parked:
    """Real waiters parked in this worker's registry on their own event loop (a thread),
    re-parked when a wake ends their park."""

    def __init__(self, hub: Hub, owners: list[str]) -> None:
        assert hub.longpoll is not None
        self.registry = hub.longpoll.registry
        self.timer = hub.longpoll.timer
        self.owners = owners
        self.loop = asyncio.new_event_loop()
        self.stop = asyncio.Event()
        self.thread = threading.Thread(target=self.loop.run_until_complete, args=(self.run(),))
        self.thread.start()

    async def run(self) -> None:
        self.stop = asyncio.Event()
        await asyncio.gather(*(self.keep(owner) for owner in self.owners))

    async def keep(self, owner: str) -> None:
        while not self.stop.is_set():
            self.registry.stamp_presence(owner, "updates")
            waiter = self.registry.register(owner, {f"inbox:{owner}"})
            assert waiter is not None
            try:
                await self.registry.park(waiter, self.timer, 0.5)
            finally:
                self.registry.unregister(waiter)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.stop.set)
        self.thread.join(timeout=5)
        self.loop.close()


def measure(
    client: TestClient, hub: Hub, posts: int, body: dict[str, Any], headers: dict[str, str]
) -> tuple[list[float], list[float], dict[str, list[str]]]:
    on: list[float] = []
    off: list[float] = []
    sample: dict[str, list[str]] = {}
    for index in range(posts):
        hub.reach_forecast = index % 2 == 0
        started = time.perf_counter()
        payload = {**body, "body": f"{body['body']} {index}"}
        answer = client.post("/v1/messages", json=payload, headers=headers)
        (on if hub.reach_forecast else off).append(time.perf_counter() - started)
        assert answer.status_code == 201, answer.text
        if hub.reach_forecast:
            sample = answer.json()["reach"]
        else:
            assert "reach" not in answer.json()
    hub.reach_forecast = True
    return on, off, sample


def forecast_alone(hub: Hub, handles: list[str], rounds: int = 2000) -> list[float]:
    """The forecast without the post: audience, the presence lookup and the sort."""
    assert hub.longpoll is not None
    registry = hub.longpoll.registry
    keys = [f"inbox:{handle}" for handle in handles]
    timings = []
    for _ in range(rounds):
        started = time.perf_counter()
        who = reach.audience(hub, author="nobody", broadcast=False, channel=None,
                             recipients=handles)  # fmt: skip
        elsewhere = registry.presence_map.sightings(who, time.time())
        reach.forecast(hub, who, keys, frozenset(), elsewhere)
        timings.append(time.perf_counter() - started)
    return timings


def report(name: str, on: list[float], off: list[float], sample: dict[str, list[str]]) -> None:
    p50_on, p50_off = statistics.median(on), statistics.median(off)
    p99_on, p99_off = percentile(on, 99), percentile(off, 99)
    counts = ", ".join(f"{key} {len(value)}" for key, value in sample.items())
    print(
        f"  {name:<22} with reach p50 {p50_on * 1e3:6.2f} ms p99 {p99_on * 1e3:6.2f} ms | "
        f"without p50 {p50_off * 1e3:6.2f} ms p99 {p99_off * 1e3:6.2f} ms | "
        f"ratio p50 {p50_on / p50_off:.3f} p99 {p99_on / p99_off:.3f}   ({counts})"
    )


def scenario(root: Path, args: argparse.Namespace, bus_url: str | None) -> None:
    data = root / ("redis" if bus_url else "local")
    prefix = f"bench-reach:{uuid.uuid4().hex[:8]}:"
    agents = [f"agent-{i:03d}" for i in range(args.agents)]
    third = len(agents) // 3
    recent, parked = agents[:third], agents[third : 2 * third]
    with served(data, bus_url, prefix) as (client, hub):
        identity = LocalIdentity(data / "users.json", org=ORG)
        for agent in agents:
            register_agent(client, identity, agent, org=ORG, slug=SLUG)
        boss = identity.add_user("boss", role="admin")
        assert hub.longpoll is not None
        for agent in recent:
            hub.longpoll.registry.stamp_presence(agent, "updates")
        other: RedisPresence | None = None
        waiters: Parked | None = None
        if bus_url:
            other = RedisPresence(redis.Redis.from_url(bus_url), prefix, origin="other-worker")
            far = time.time() + 3600
            for n, agent in enumerate(parked):
                other.seen(agent, time.time())
                other.parked(agent, n, frozenset({f"inbox:{agent}"}), far)
        else:
            waiters = Parked(hub, parked)
        time.sleep(0.3)  # the presence writes land, the waiters park
        sender = agents[-1]
        step = max(1, len(agents) // args.mentions)
        mentioned = " ".join(f"@{a}" for a in agents[:-1][::step][: args.mentions])
        where = f"on Redis ({bus_url})" if bus_url else "in process (one worker)"
        load = ", ".join(f"{figure:.1f}" for figure in os.getloadavg())
        print(f"POST /v1/messages, {args.posts} posts alternating reach on/off, {where}")
        print(f"  (load average {load} on {os.cpu_count()} cores)")
        mention = measure(client, hub, args.posts, {"agent_id": sender, "body": mentioned}, {})
        report(f"mention x{args.mentions}", *mention)
        broadcast = measure(
            client,
            hub,
            args.posts,
            {"agent_id": "human-boss", "body": "all hands", "broadcast": True},
            {"Authorization": f"Bearer {boss}"},
        )
        report(f"broadcast x{len(agents)}", *broadcast)
        for size in (args.mentions, len(agents)):
            alone = forecast_alone(hub, agents[:size])
            print(
                f"  forecast alone, {size:>3} handles: p50 {statistics.median(alone) * 1e6:7.1f} us"
                f" p99 {percentile(alone, 99) * 1e6:7.1f} us"
            )
        if bus_url:
            pinger = redis.Redis.from_url(bus_url)
            pings = []
            for _ in range(2000):
                started = time.perf_counter()
                pinger.ping()
                pings.append(time.perf_counter() - started)
            pinger.close()
            print(
                f"  (one Redis PING round trip: p50 {statistics.median(pings) * 1e6:7.1f} us"
                f" p99 {percentile(pings, 99) * 1e6:7.1f} us)"
            )
        if waiters is not None:
            waiters.close()
        if other is not None:
            other.close()
            client_r = redis.Redis.from_url(bus_url or "")
            for key in client_r.scan_iter(match=f"{prefix}*"):
                client_r.delete(key)
            client_r.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--agents", type=int, default=64)
    parser.add_argument("--mentions", type=int, default=8)
    parser.add_argument("--posts", type=int, default=400)
    parser.add_argument("--skip-redis", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-reach-") as tmp:
        scenario(Path(tmp), args, None)
        if not args.skip_redis:
            scenario(Path(tmp), args, REDIS)


if __name__ == "__main__":
    main()
