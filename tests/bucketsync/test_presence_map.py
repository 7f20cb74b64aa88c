"""`scaleout.presence.RedisPresence` on a real Redis: what one worker reports (presence
stamps, parked waiters) another sees in one lookup; a worker skips its own entries, a
crashed worker's are bounded by their budget, and a Redis outage never raises."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from agenthub.bucketsync.core.reach import Sighting
from agenthub.bucketsync.scaleout.presence import RedisPresence
from tests.support.redisdb import drop_prefix, require_redis, unique_prefix

pytestmark = pytest.mark.redis

NOW = 1_800_000_000.0
KEYS = frozenset({"inbox:agent-2", "channel:ideas"})


@pytest.fixture
def pair() -> Iterator[tuple[RedisPresence, RedisPresence]]:
    url = require_redis()
    prefix = unique_prefix()
    workers = tuple(
        RedisPresence(redis.Redis.from_url(url), prefix, origin=name) for name in ("a", "b")
    )
    yield workers[0], workers[1]
    for worker in workers:
        worker.close()
    drop_prefix(url, prefix)


def settled(worker: RedisPresence) -> None:
    deadline = time.monotonic() + 5
    while (stats := worker.stats()) is not None and stats["written"] < stats["queued"]:
        assert time.monotonic() < deadline, stats
        time.sleep(0.01)


def test_a_waiter_parked_on_one_worker_is_sighted_by_the_other(
    pair: tuple[RedisPresence, RedisPresence],
) -> None:
    a, b = pair
    b.seen("agent-2", NOW - 3)
    b.parked("agent-2", 7, KEYS, until=NOW + 50)
    settled(b)

    assert a.sightings(["agent-2", "agent-3"], NOW) == {
        "agent-2": Sighting(seen_at=NOW - 3, parked=(KEYS,))
    }
    # Its own entries are left to the worker's registry, which knows them exactly.
    assert b.sightings(["agent-2"], NOW) == {"agent-2": Sighting(seen_at=NOW - 3)}


def test_an_unparked_waiter_is_gone_and_a_past_budget_counts_for_nothing(
    pair: tuple[RedisPresence, RedisPresence],
) -> None:
    a, b = pair
    b.parked("agent-2", 1, KEYS, until=NOW + 50)
    b.parked("agent-2", 2, KEYS, until=NOW + 50)
    b.unparked("agent-2", 1)
    b.parked("agent-3", 3, KEYS, until=NOW - 1)  # a crashed worker's leftover
    settled(b)

    assert a.sightings(["agent-2", "agent-3"], NOW) == {
        "agent-2": Sighting(seen_at=None, parked=(KEYS,))
    }


def test_an_unreachable_redis_answers_nothing_and_never_raises() -> None:
    gone = RedisPresence(
        redis.Redis(
            host="127.0.0.1", port=1, socket_connect_timeout=0.2, retry=Retry(NoBackoff(), 0)
        ),
        "x:",
        origin="a",
    )
    gone.parked("agent-2", 1, KEYS, until=NOW + 50)
    deadline = time.monotonic() + 5
    while (stats := gone.stats()) is not None and stats["failures"] < 1:
        assert time.monotonic() < deadline, stats
        time.sleep(0.01)

    assert gone.sightings(["agent-2"], NOW) == {}
    assert gone.stats() == {"queued": 1, "written": 0, "failures": 1}
    gone.close()
