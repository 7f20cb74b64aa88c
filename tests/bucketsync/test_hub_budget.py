"""The Hub API request budget per operation (issue 29), counted at the HTTP level on the
Hub emulator: the requests the Hub's rate limiter would charge (kind "api"; Xet CAS
transfers and `/resolve/` reads are other buckets). Each operation is measured warm (the
read model listed once, as a serving worker has it), with one agent doing it alone."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from agenthub.bucketsync.core.audit import AuditLog
from agenthub.bucketsync.storage.base import Batch
from agenthub.bucketsync.storage.hf import HfBucketStore
from agenthub.clock import FrozenClock
from tests.bucketsync.reliability.test_audit_growth import write_rows
from tests.support.hub_emulator import HubEmulator, running_hub
from tests.support.hub_workload import AUDIT, CENTRAL, Workload

AGENTS = ("a1", "a2", "a3")


@pytest.fixture
def hub() -> Iterator[HubEmulator]:
    with running_hub() as emulator:
        yield emulator


@pytest.fixture
def world(hub: HubEmulator, tmp_path: Path) -> Iterator[Workload]:
    with Workload.start(hub, tmp_path, clock=FrozenClock()) as workload:
        for agent in AGENTS:
            workload.prepare(agent)
        assert workload.register("a2").status_code == 201
        assert workload.register("a3").status_code == 201
        # Warm: the folders a post and a result consult are listed once.
        for read in (workload.board, lambda: workload.digest("a3")):
            assert read().status_code == 200
        yield workload


def test_a_lone_post_with_a_mention_costs_at_most_5_api_requests(world: Workload) -> None:
    cost = world.measure(lambda: world.post("a2", "a3", key="k-1"), expect=201)
    assert cost <= 5, world.hub.counts(kind="api")


def test_a_lone_result_costs_at_most_5_api_requests(world: Workload) -> None:
    assert world.result("a2").status_code == 201  # the first result lists results/ once
    cost = world.measure(lambda: world.result("a3", 0.8), expect=201)
    assert cost <= 5


def test_a_registration_costs_at_most_6_api_requests(world: Workload) -> None:
    cost = world.measure(lambda: world.register("a1"), expect=201)
    assert cost <= 6


def test_warm_reads_cost_no_api_request(world: Workload) -> None:
    assert world.post("a2", "a3").status_code == 201
    for read in (world.board, lambda: world.digest("a3"), lambda: world.inbox("a3")):
        read()  # a folder the write above did not touch is listed on its first read
    for read in (world.board, lambda: world.digest("a3"), lambda: world.inbox("a3")):
        assert world.measure(read, expect=200) == 0


def test_a_xet_write_token_serves_every_batch_until_it_expires(hub: HubEmulator) -> None:
    hub.add_bucket("acme/tokens")
    store = HfBucketStore(token="hf_tokens", endpoint=hub.url, deadline_s=5)
    for index in range(3):
        store.write_batch("acme/tokens", Batch(adds=[(f"f{index}.md", b"x")]))
    assert hub.counts(kind="api") == {"xet_token": 1, "batch": 3}
    assert hub.count("cas_put") == 3


def test_a_file_read_is_a_resolver_request_not_an_api_request(hub: HubEmulator) -> None:
    hub.add_bucket("acme/reads")
    hub.put("acme/reads", "dir/a b.md", b"hello")
    store = HfBucketStore(token="hf_reads", endpoint=hub.url, deadline_s=5)
    assert store.read("acme/reads", "dir/a b.md") == b"hello"
    assert store.read("acme/reads", "dir/missing.md") is None
    assert store.read("acme/none", "a.md") is None
    assert hub.api_requests() == 0 and hub.count("resolve") == 3


def test_concurrent_posts_share_batches_at_most_2_5_api_requests_each(
    world: Workload,
) -> None:
    posts = 24
    before = world.hub.api_requests()
    with ThreadPoolExecutor(max_workers=posts) as pool:
        answers = list(pool.map(lambda n: world.post(AGENTS[1 + n % 2], "a2"), range(posts)))
    assert [answer.status_code for answer in answers] == [201] * posts
    used = world.hub.api_requests() - before
    assert used / posts <= 2.5, world.hub.counts(kind="api")
    # Every acknowledged post is in the Hub, with its audit row and no open journal entry.
    files = world.hub.files(CENTRAL)
    audit = world.hub.files(AUDIT)
    for answer in answers:
        assert answer.json()["path"] in files
    assert not [path for path in audit if path.startswith("journal/")]
    assert sum(path.startswith("audit/") for path in audit) >= posts


def test_concurrent_audit_rows_share_batches(hub: HubEmulator) -> None:
    hub.add_bucket(AUDIT, private=True)
    store = HfBucketStore(token="hf_audit", endpoint=hub.url, deadline_s=5, group_linger_s=0.05)
    audit = AuditLog(store, AUDIT, FrozenClock(), two_org=True)

    with ThreadPoolExecutor(max_workers=20) as pool:
        list(pool.map(lambda _: write_rows(audit, 1), range(20)))
    assert audit.written == 20 and hub.count("batch") < 10
    assert sum(path.startswith("audit/") for path in hub.files(AUDIT)) == 20
