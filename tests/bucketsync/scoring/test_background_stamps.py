"""Stamps issued off any request (the verifier deciding a result, its loop's pass) are
settled when that unit of work ends, as a request's are: a write that failed there holds
no watcher's stream for the stamp lease (30 s)."""

from __future__ import annotations

import pytest

from agenthub.bucketsync.core.stamps import StampIssuer
from agenthub.bucketsync.errors import StorageUnavailable
from agenthub.bucketsync.scoring.verifier import Verifier
from tests.bucketsync.scoring.conftest import AppFactory


def stamped_then_refused(stamps: StampIssuer) -> tuple[list[str], object]:
    """A `consider` that stamps an event, then finds the Hub refusing its write."""
    issued: list[str] = []

    def consider(_self: Verifier, _filename: str) -> str:
        issued.append(stamps.issue("bucket-sync"))
        raise StorageUnavailable("the Hub refused the write")

    return issued, consider


def test_a_verification_that_failed_after_its_stamp_holds_no_stream(
    scoring_world: AppFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    world = scoring_world(VERIFIER_ENABLED="true")
    verifier = world.client.app.state.scoring.verifier  # type: ignore[attr-defined]
    issued, consider = stamped_then_refused(world.hub.stamps)
    monkeypatch.setattr(Verifier, "consider", consider)

    verifier._consider_logged("20260301-120000-000_agent-1.md")

    assert issued and world.hub.stamps.mark() > issued[0]


def test_broken_variant_outside_a_settling_scope_the_stamp_holds_streams(
    scoring_world: AppFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    world = scoring_world(VERIFIER_ENABLED="true")
    verifier = world.client.app.state.scoring.verifier  # type: ignore[attr-defined]
    issued, consider = stamped_then_refused(world.hub.stamps)
    monkeypatch.setattr(Verifier, "consider", consider)

    with pytest.raises(StorageUnavailable):
        verifier.consider("20260301-120000-000_agent-1.md")  # the same work, unscoped

    assert world.hub.stamps.mark() == issued[0]  # held until the lease runs out
