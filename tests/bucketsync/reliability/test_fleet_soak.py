"""The fleet soak of issue 31 in the suite (`bench/fleet_soak.py`, the same code, small):
four agents for a minute against `serve --workers 2` on Redis, State Hub writers on
PostgreSQL and a hub-core follower, one `kill -9` of each kind (a worker, the whole
server, State Hub, hub-core). Delivery gets generous time on a loaded machine; every
invariant stays exact. The checker is also shown failing on a ledger that breaks each
delivery promise, so a soak that passes has proven something."""

from __future__ import annotations

import time

import pytest
from bench.fleet import checks
from bench.fleet.ledger import Ledger, Write
from bench.fleet_soak import KINDS, Config, soak

from tests.support.databases import require_pg
from tests.support.redisdb import require_redis

SMALL = Config(agents=4, seconds=60, kills=4, seed=31, writers=2, drain_s=240, restart_s=240)


@pytest.mark.redis
@pytest.mark.pg
@pytest.mark.timeout(1200)
def test_a_small_fleet_under_kill_9_keeps_every_invariant() -> None:
    require_redis()
    require_pg()
    printed: list[str] = []

    found, ledger = soak(SMALL, printed.append)

    assert sorted(w.kind for w in ledger.windows) == sorted(KINDS)
    assert {w.kind for w in ledger.writes} >= {"board", "channel", "result", "statehub"}
    failed = [c.name for c in found if not c.passed]
    assert not failed, "\n".join(printed)


def ledger_with_one_mention(delivered: list[str]) -> Ledger:
    ledger = Ledger()
    ledger.watch("fleet-02")
    for filename in ("20260101-000000-000_fleet-01.md", "20260101-000001-000_fleet-01.md"):
        ledger.acked(Write("op", "board", "fleet-01", filename, frozenset({"fleet-02"}), 0.0, 0.1))
    for filename in delivered:
        ledger.delivered("fleet-02", filename, ["mention"])
    return ledger


def test_the_delivery_check_passes_each_addressed_item_delivered_once() -> None:
    ledger = ledger_with_one_mention(
        ["20260101-000000-000_fleet-01.md", "20260101-000001-000_fleet-01.md"]
    )
    assert checks.delivered_once(ledger).passed


def test_broken_variant_a_skipped_item_fails_the_delivery_check() -> None:
    ledger = ledger_with_one_mention(["20260101-000001-000_fleet-01.md"])
    check = checks.delivered_once(ledger)
    assert not check.passed and check.got == "1/2"
    assert "fleet-02<-20260101-000000-000_fleet-01.md" in check.detail


def test_broken_variant_a_duplicate_or_an_unaddressed_item_fails_the_delivery_check() -> None:
    both = ["20260101-000000-000_fleet-01.md", "20260101-000001-000_fleet-01.md"]
    twice = ledger_with_one_mention([*both, both[0]])
    assert not checks.delivered_once(twice).passed
    stray = ledger_with_one_mention([*both, "20260101-000002-000_fleet-03.md"])
    assert not checks.delivered_once(stray).passed


def test_a_5xx_fails_only_outside_a_kill_window() -> None:
    ledger = Ledger()
    ledger.window_opened("bucketsync")
    ledger.answer("bucketsync", 503, "/v1/messages")
    ledger.window_closed("bucketsync", "server", time.monotonic(), grace_s=0)
    assert checks.no_5xx(ledger).passed
    time.sleep(0.01)
    ledger.answer("bucketsync", 500, "/v1/messages")
    assert not checks.no_5xx(ledger).passed


def test_broken_variant_a_retry_answered_otherwise_than_at_first_fails_the_replay_check() -> None:
    ledger = Ledger()
    assert checks.replayed(ledger).passed
    ledger.recovered("bucketsync", "op-fleet-01-00001", '409 {"error":{"code":"ALREADY_PROMOTED"}}')
    assert not checks.replayed(ledger).passed


def test_broken_variant_a_state_hub_answer_lost_fails_the_replay_check() -> None:
    # State Hub's answer commits with its write, so "applied, answer not recorded" after a
    # kill is a lost first answer like any other (it was counted apart, and passed, while
    # the answer was stored only after the commit).
    ledger = Ledger()
    ledger.recovered("statehub", "op-sh-writer-1-00001", '409 {"code":"idempotency_answer_lost"}')
    assert not checks.replayed(ledger).passed
    assert any(": 1" in line for line in checks.summary(ledger, []) if "State Hub" in line)
