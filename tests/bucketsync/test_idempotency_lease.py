"""A request holding its Idempotency-Key with a lease (the Redis gate of many workers)
runs under `deadlines.within`: every Hub call it makes ends before another worker could
take the key over (issue 29). A key held in-process has no lease and no such bound."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import redis
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from agenthub.bucketsync import deadlines
from agenthub.bucketsync.api.idempotency import FINISH_MARGIN_S, IdempotencyKeys
from agenthub.bucketsync.core.idempotency import BucketIdempotency, LocalGate, RunningGate
from agenthub.bucketsync.scaleout.state import RedisGate
from agenthub.bucketsync.storage.local import LocalBucketStore
from agenthub.clock import FrozenClock
from tests.support.redisdb import drop_prefix, require_redis, unique_prefix

AUDIT = "acme/audit"


def remaining(request: Request) -> JSONResponse:
    """What a backend call made by this request would be bounded by (sync: a thread)."""
    return JSONResponse({"remaining": deadlines.remaining()}, status_code=201)


def client(tmp_path: Path, gate: RunningGate) -> TestClient:
    clock = FrozenClock(datetime(2026, 3, 1, tzinfo=UTC))
    store = LocalBucketStore(tmp_path, clock=clock)
    store.create(AUDIT, creator="acme", private=True)
    app = Starlette(routes=[Route("/work", remaining, methods=["POST"])])
    keys = BucketIdempotency(store, AUDIT, clock, gate)
    return TestClient(IdempotencyKeys(app, keys=keys))


@pytest.fixture
def redis_gate() -> Iterator[RedisGate]:
    url = require_redis()
    prefix = unique_prefix()
    connection = redis.Redis.from_url(url)
    yield RedisGate(connection, prefix)
    connection.close()
    drop_prefix(url, prefix)


@pytest.mark.redis
def test_a_key_held_with_a_lease_bounds_the_requests_backend_calls(
    tmp_path: Path, redis_gate: RedisGate
) -> None:
    with client(tmp_path, redis_gate) as http:
        answer = http.post("/work", headers={"Idempotency-Key": "k-1"}, json={})
    assert answer.status_code == 201
    bound = answer.json()["remaining"]
    assert bound is not None
    assert redis_gate.lease_s - FINISH_MARGIN_S - 5 < bound <= redis_gate.lease_s - FINISH_MARGIN_S


def test_an_in_process_key_has_no_lease_and_no_bound(tmp_path: Path) -> None:
    with client(tmp_path, LocalGate()) as http:
        answer = http.post("/work", headers={"Idempotency-Key": "k-1"}, json={})
    assert answer.status_code == 201 and answer.json()["remaining"] is None


def test_a_request_without_a_key_is_not_bounded(tmp_path: Path) -> None:
    with client(tmp_path, LocalGate()) as http:
        assert http.post("/work", json={}).json()["remaining"] is None
