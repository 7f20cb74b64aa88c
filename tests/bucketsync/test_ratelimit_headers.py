"""`X-RateLimit-Limit/-Remaining/-Reset` on every answer a limiter had a say in: they count
down with each request, agree with Retry-After on the 429, and come back as windows refill.
(Across two workers sharing Redis: tests/bucketsync/test_multiworker.py.)"""

from __future__ import annotations

import time
from typing import Any

import pytest
from limits.storage import RedisStorage

from agenthub.bucketsync.core.limiter import Quota, Rate, noting_quotas
from agenthub.bucketsync.errors import RateLimited
from agenthub.bucketsync.scaleout.state import RedisLimiter
from agenthub.clock import FrozenClock
from tests.bucketsync.conftest import World
from tests.support.redisdb import drop_prefix, require_redis, unique_prefix


def standing(response: Any) -> tuple[int, int, int]:
    h = response.headers
    return int(h["X-RateLimit-Limit"]), int(h["X-RateLimit-Remaining"]), int(h["X-RateLimit-Reset"])


def test_headers_count_down_to_the_429_then_reset(world: World, clock: FrozenClock) -> None:
    world.agent("agent-1")
    sent = [world.raw("agent-1", f"m{i}") for i in range(5)]
    # 5/min refills one token every 12 s: each answer says when the next one comes back.
    assert [r.status_code for r in sent] == [201] * 5
    assert [standing(r) for r in sent] == [
        (5, 4, 12),
        (5, 3, 12),
        (5, 2, 12),
        (5, 1, 12),
        (5, 0, 12),
    ]

    refused = world.raw("agent-1", "limited")
    assert refused.status_code == 429
    assert standing(refused) == (5, 0, 12)
    assert refused.headers["Retry-After"] == refused.headers["X-RateLimit-Reset"]

    clock.advance(5)
    assert standing(world.raw("agent-1", "still limited")) == (5, 0, 7)

    clock.advance(7)
    after_refill = world.raw("agent-1", "after refill")
    assert after_refill.status_code == 201
    assert standing(after_refill) == (5, 0, 12)

    clock.advance(60)
    assert standing(world.raw("agent-1", "a full window later")) == (5, 4, 12)


def test_the_tightest_window_is_the_one_reported(world: World, clock: FrozenClock) -> None:
    world.agent("agent-1")
    last: Any = None
    for minute in range(7):  # 5 a minute drains the 30-an-hour window in the 7th minute
        for i in range(5):
            last = world.raw("agent-1", f"m{minute}-{i}")
        clock.advance(60)
    assert last is not None and last.status_code == 429
    limit, remaining, reset = standing(last)
    assert (limit, remaining) == (30, 0)  # the hourly window, not the minute one
    assert reset == int(last.headers["Retry-After"])


def test_an_answer_no_limiter_saw_has_no_headers(world: World) -> None:
    world.agent("agent-1")
    for response in (world.client.get("/v1/healthz"), world.client.get("/v1/inbox/agent-1")):
        assert response.status_code == 200
        assert "X-RateLimit-Limit" not in response.headers


def test_each_agent_has_its_own_standing(world: World) -> None:
    world.agent("agent-1")
    world.agent("agent-2")
    for i in range(3):
        world.raw("agent-1", f"m{i}")
    assert standing(world.raw("agent-2", "first"))[1] == 4


@pytest.mark.redis
def test_two_workers_on_redis_share_one_countdown_and_it_resets() -> None:
    """Two `RedisLimiter`s (one per worker) on one Redis, with a 1-second window so the
    reset is seen in real time (the Redis windows run on wall-clock time)."""
    url = require_redis()
    prefix = unique_prefix()
    workers = [
        RedisLimiter("test", [Rate(2, 1.0)], RedisStorage(url, key_prefix=f"{prefix}limits"))
        for _ in range(2)
    ]

    def attempt(worker: RedisLimiter) -> tuple[bool, Quota]:
        admitted = True
        with noting_quotas() as note:
            try:
                worker.acquire("agent-1")
            except RateLimited:
                admitted = False
        assert note.quota is not None
        return admitted, note.quota

    try:
        answers = [attempt(workers[i % 2]) for i in range(3)]
        assert [admitted for admitted, _ in answers] == [True, True, False]
        assert [(q.limit, q.remaining) for _, q in answers] == [(2, 1), (2, 0), (2, 0)]
        assert all(0 < q.reset_s <= 1.0 for _, q in answers)
        time.sleep(1.1)  # the whole window has passed: both hits have left it
        admitted, quota = attempt(workers[1])
        assert admitted and (quota.limit, quota.remaining) == (2, 1)
    finally:
        drop_prefix(url, prefix)


def test_bucket_source_writes_and_registration_carry_the_headers_too(world: World) -> None:
    world.agent("agent-1")
    world.put(
        "agent-1", "r.md", "---\nscore: 1\nmethod: m\nstatus: agent-run\ndescription: d\n---\n"
    )
    world.put("agent-1", "note.md", "an idea")
    world.put("agent-1", "out/a.txt", "a")
    uri = world.uri
    answers = {
        "result": world.client.post("/v1/results", json={"source": uri("agent-1", "r.md")}),
        "message": world.client.post("/v1/messages", json={"source": uri("agent-1", "note.md")}),
        "artifacts": world.client.post(
            "/v1/artifacts:sync", json={"source": uri("agent-1", "out/"), "dest_slug": "run1"}
        ),
    }
    for name, response in answers.items():
        assert response.status_code in (200, 201), (name, response.text)
    # One bucket's source writes share one window: it counts down across the three routes.
    assert [standing(r)[:2] for r in answers.values()] == [(20, 19), (20, 18), (20, 17)]

    world.user("dora")
    world.create_bucket("agent-9", "dora")
    world.put("agent-9", ".bucket-sync-handshake", "dora", user="dora")
    registered = world.register("agent-9", "dora")
    assert registered.status_code == 201, registered.text
    limit, remaining, _ = standing(registered)
    assert remaining == limit - 1
