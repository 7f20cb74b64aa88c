"""Test Redis: the server from AGENTHUB_TEST_REDIS_URL, with a key prefix unique to each
test so parallel runs (and tests) never see each other's keys or channels."""

from __future__ import annotations

import os
import uuid

import pytest
import redis

from tests.support.databases import REDIS_ENV, services_required


def require_redis() -> str:
    """The Redis URL; skips locally, FAILS in CI when Redis is missing or unreachable."""
    url = os.environ.get(REDIS_ENV) or None
    if url is None:
        if services_required():
            pytest.fail(f"{REDIS_ENV} is not set but CI requires Redis", pytrace=False)
        pytest.skip(f"Redis tests need {REDIS_ENV}")
    try:
        redis.Redis.from_url(url, socket_connect_timeout=2).ping()
    except redis.RedisError as exc:
        if services_required():
            pytest.fail(f"Redis at {url} is unusable: {exc}", pytrace=False)
        pytest.skip(f"Redis at {url} is unusable: {exc}")
    return url


def unique_prefix() -> str:
    return f"agenthub-test:{os.getpid()}:{uuid.uuid4().hex[:8]}:"


def drop_prefix(url: str, prefix: str) -> None:
    client = redis.Redis.from_url(url)
    keys = list(client.scan_iter(match=f"{prefix}*", count=500))
    if keys:
        client.delete(*keys)
    client.close()
