"""Stamps issued off any request (the verifier deciding a result, its loop's pass) are
settled when that unit of work ends, as a request's are: a write that failed there holds
no watcher's stream for the stamp lease (30 s)."""

from __future__ import annotations

import pytest

from agenthub.bucketsync.errors import StorageUnavailable
from agenthub.bucketsync.scoring.verifier import Verifier
from tests.bucketsync.scoring.conftest import AppFactory, ScoringWorld

RESULT = "20260301-120000-000_agent-1.md"


def refused_after_its_stamp(
    scoring_world: AppFactory, monkeypatch: pytest.MonkeyPatch
) -> tuple[ScoringWorld, Verifier, list[str]]:
    """The app's verifier, whose `consider` stamps an event, then finds the Hub refusing
    its write; returns (world, verifier, the stamps it issued)."""
    world = scoring_world(VERIFIER_ENABLED="true")
    issued: list[str] = []

    def consider(_self: Verifier, _filename: str) -> str:
        issued.append(world.hub.stamps.issue("bucket-sync"))
        raise StorageUnavailable("the Hub refused the write")

    monkeypatch.setattr(Verifier, "consider", consider)
    return world, world.client.app.state.scoring.verifier, issued  # type: ignore[attr-defined]


def test_a_verification_that_failed_after_its_stamp_holds_no_stream(
    scoring_world: AppFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    world, verifier, issued = refused_after_its_stamp(scoring_world, monkeypatch)

    verifier._consider_logged(RESULT)

    assert issued and world.hub.stamps.mark() > issued[0]


def test_broken_variant_outside_a_settling_scope_the_stamp_holds_streams(
    scoring_world: AppFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    world, verifier, issued = refused_after_its_stamp(scoring_world, monkeypatch)

    with pytest.raises(StorageUnavailable):
        verifier.consider(RESULT)  # the same work, with no scope around it

    assert world.hub.stamps.mark() == issued[0]  # held until the lease runs out
