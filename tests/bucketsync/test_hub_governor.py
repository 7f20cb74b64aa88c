"""The Hub request budget (storage/governor.py): writes first, reads refused before writes,
TTL refreshes shed first, a 503 with Retry-After before the Hub's 429, the standing in
`/v1/healthz`, and one budget for every worker through Redis."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from limits.storage import MemoryStorage, RedisStorage

from agenthub.bucketsync.app import create_app
from agenthub.bucketsync.settings import HUB_TIERS
from agenthub.bucketsync.storage.governor import BudgetSpent, HubGovernor
from tests.bucketsync.conftest import make_settings
from tests.bucketsync.test_hf_adapters import hub_settings, register_agent
from tests.support.hub_emulator import Fault, HubEmulator, HubRequest
from tests.support.hub_emulator.wire import Route
from tests.support.redisdb import drop_prefix, require_redis, unique_prefix

API = "/api/buckets/acme/x/tree"
ADMIN = "Bearer hf_admin"


def governor(limit: int = 20) -> HubGovernor:
    return HubGovernor(limit=limit, window_s=300, storage=MemoryStorage(), token="hf_admin")


def fill(budget: HubGovernor, used: int) -> None:
    while budget.standing()[0] < used:
        budget.spend(API, "write", ADMIN)


def test_reads_stop_before_writes_and_refreshes_before_reads() -> None:
    budget = governor(20)  # refreshes below 15, reads below 18, writes up to 20
    fill(budget, 15)
    assert not budget.may_refresh()
    for _ in range(3):
        budget.spend(API, "read", ADMIN)
    with pytest.raises(BudgetSpent):
        budget.spend(API, "read", ADMIN)
    budget.spend(API, "write", ADMIN)
    budget.spend(API, "write", ADMIN)
    with pytest.raises(BudgetSpent) as refused:
        budget.spend(API, "write", ADMIN)
    assert 1 <= refused.value.retry_after_s <= 300
    assert budget.report() | {"frees_in_s": 0} == {
        "window_s": 300,
        "used": 20,
        "limit": 20,
        "frees_in_s": 0,
        "shed": 1,
        "refused": 2,
        "spent_here": 20,
        "shared": False,
    }


def test_only_this_tokens_api_requests_count() -> None:
    budget = governor(5)
    budget.spend("/api/whoami-v2", "write", "Bearer a-callers-token")
    budget.spend("/buckets/acme/x/resolve/a.md", "write", ADMIN)  # resolvers: their own limit
    assert budget.standing()[0] == 0


def test_presets_are_the_documented_tiers_less_the_reserve(tmp_path: Path) -> None:
    assert HUB_TIERS == {"free": 1000, "pro": 2500, "team": 3000, "enterprise": 6000}
    assert make_settings(tmp_path, HUB_BUDGET="team").hub_budget_limit == 2700
    assert make_settings(tmp_path, HUB_BUDGET="enterprise").hub_budget_limit == 5400
    custom = make_settings(tmp_path, HUB_BUDGET_REQUESTS="50", HUB_BUDGET_RESERVE="0")
    assert custom.hub_budget_limit == 50
    assert make_settings(tmp_path).hub_budget_limit is None


# -- the service ----------------------------------------------------------------------------


class HubLimiter:
    """The Hub's own limiter on the emulator: 429 past `limit` API requests of a token."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.seen = 0
        self.refused = 0

    def __call__(self, request: HubRequest, route: Route) -> Fault | None:
        if route.kind != "api" or request.token != "hf_admin":
            return None
        self.seen += 1
        if self.seen > self.limit:
            self.refused += 1
            return Fault.rate_limited(retry_after=300)
        return None


def budgeted(hub: HubEmulator, tmp_path: Path, limit: int, **overrides: str) -> TestClient:
    settings = hub_settings(
        hub,
        tmp_path,
        HUB_FEED="false",  # the TTL refreshes are what the budget sheds
        LISTING_TTL_S="0.3",
        HUB_BUDGET_REQUESTS=str(limit),
        HUB_BUDGET_RESERVE="0",
        **overrides,
    )
    return TestClient(create_app(settings))


def post_source(hub: HubEmulator, client: TestClient) -> int:
    """A post from a file of a1's scratch bucket (the source limiter allows 20 a minute)."""
    name = f"m-{uuid.uuid4().hex}.md"
    hub.put("acme/chal-a1", name, f"note {name}".encode())
    response = client.post("/v1/messages", json={"source": f"hf://buckets/acme/chal-a1/{name}"})
    return response.status_code


def used(client: TestClient) -> int:
    return int(client.get("/v1/healthz").json()["hub_budget"]["used"])


def test_a_tiny_budget_sheds_reads_to_the_cache_spends_on_writes_and_answers_503_before_a_429(
    hub: HubEmulator, tmp_path: Path
) -> None:
    limit = 150
    limiter = HubLimiter(limit)  # the Hub would refuse the request after the 150th
    hub.add_policy(limiter)
    with budgeted(hub, tmp_path, limit) as client:
        register_agent(hub, client, "a1", "alice")
        assert client.get("/v1/messages").status_code == 200
        while used(client) < limit * 0.75:  # refreshes shed from here on
            assert post_source(hub, client) == 201
        time.sleep(0.4)  # past the TTL
        hub.reset_counts()
        board = client.get("/v1/messages")
        assert board.status_code == 200 and board.json()["count"] >= 1
        assert hub.count("tree") == 0  # served from the cached listing
        assert client.get("/v1/healthz").json()["hub_budget"]["shed"] >= 1
        assert used(client) < limit * 0.9
        assert post_source(hub, client) == 201  # a write still goes
        # A post is three batch requests (group commit, issue 29): spend the budget down to
        # less than five raw posts cost.
        while used(client) < limit * 0.95:
            assert post_source(hub, client) == 201
        answers = [  # the raw-message limiter allows 5 a minute
            client.post("/v1/messages", json={"agent_id": "a1", "body": f"{i}"}) for i in range(5)
        ]
        refused = [answer for answer in answers if answer.status_code != 201]
        assert refused, "the budget ran out"
        for answer in refused:
            assert answer.status_code == 503
            assert answer.json()["error"]["code"] == "STORAGE_UNAVAILABLE"
            assert 1 <= int(answer.headers["Retry-After"]) <= 300
        time.sleep(0.4)
        assert client.get("/v1/messages").status_code == 200  # the cached listing, shed
        report = client.get("/v1/healthz").json()["hub_budget"]
    assert limiter.refused == 0  # the Hub never had to say 429
    assert report["used"] <= limit and report["refused"] >= 1
    assert set(report) >= {"window_s", "used", "limit", "shed"}


def test_healthz_shows_no_budget_when_none_is_set(hub: HubEmulator, tmp_path: Path) -> None:
    settings = make_settings(
        tmp_path, BUCKETSYNC_STORAGE="hf", HF_TOKEN="hf_admin", HF_ENDPOINT=hub.url
    )
    with TestClient(create_app(settings)) as client:
        assert client.get("/v1/healthz").json()["hub_budget"] is None


# -- across workers ---------------------------------------------------------------------------


@pytest.fixture
def redis_prefix() -> Iterator[tuple[str, str]]:
    """The test Redis (skipped locally without it, a failure in CI) and a key prefix."""
    url = require_redis()
    prefix = unique_prefix()
    yield url, prefix
    drop_prefix(url, prefix)


@pytest.mark.redis
def test_workers_spend_one_budget_through_redis(redis_prefix: tuple[str, str]) -> None:
    url, prefix = redis_prefix
    workers = [
        HubGovernor(
            limit=10,
            window_s=300,
            storage=RedisStorage(url, key_prefix=prefix + "hub-budget", wrap_exceptions=True),
            token="hf_admin",
            shared=True,
        )
        for _ in range(2)
    ]
    for _ in range(7):
        workers[0].spend(API, "write", ADMIN)
    assert workers[1].standing()[0] == 7
    assert not workers[1].may_refresh()  # refreshes stop at 7 of 10, whoever spent them
    for _ in range(3):
        workers[1].spend(API, "write", ADMIN)
    with pytest.raises(BudgetSpent):
        workers[0].spend(API, "write", ADMIN)
    assert workers[0].report()["used"] == 10 and workers[1].report()["shared"] is True


@pytest.mark.redis
def test_two_served_workers_on_one_bus_spend_one_budget(
    hub: HubEmulator, tmp_path: Path, redis_prefix: tuple[str, str]
) -> None:
    url, prefix = redis_prefix
    shared = {"BUCKETSYNC_BUS_URL": url, "BUCKETSYNC_BUS_PREFIX": prefix}
    first = budgeted(hub, tmp_path / "one", 500, **shared)
    second = budgeted(hub, tmp_path / "two", 500, **shared)
    with first, second:
        register_agent(hub, first, "a1", "alice")
        assert post_source(hub, first) == 201
        by_first = client_report(first)
        by_second = client_report(second)
        assert by_second["shared"] is True and by_first["spent_here"] > by_second["spent_here"]
        # One window: the second worker counts what the first spent.
        assert by_second["used"] == by_first["spent_here"] + by_second["spent_here"]


def client_report(client: TestClient) -> dict[str, Any]:
    return dict(client.get("/v1/healthz").json()["hub_budget"])
