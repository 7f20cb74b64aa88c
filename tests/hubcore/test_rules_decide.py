"""Contract §6 as one function: what an incoming row does to the stored row of its key."""

from __future__ import annotations

from typing import Any

from agenthub.hubcore.rules import SAME_REVISION_CONFLICT, Decision, decide, no_transition


def row(revision: int, **fields: Any) -> dict[str, Any]:
    return {"id": "m", "body": "hi", "revision": revision, **fields}


def test_with_no_stored_row_the_incoming_one_is_inserted() -> None:
    assert decide(row(3), None, no_transition) == Decision("insert")


def test_a_lower_revision_is_stale() -> None:
    assert decide(row(2), row(3), no_transition) == Decision("stale")


def test_the_same_revision_and_content_is_unchanged() -> None:
    assert decide(row(3), row(3), no_transition) == Decision("unchanged")


def test_the_same_revision_with_other_content_is_refused_as_a_conflict() -> None:
    decision = decide(row(3, body="changed"), row(3), no_transition)

    assert decision == Decision("refuse", SAME_REVISION_CONFLICT, conflict=True)


def test_a_higher_revision_replaces_when_the_transition_is_allowed() -> None:
    assert decide(row(4, body="changed"), row(3), no_transition) == Decision("replace")


def test_a_higher_revision_is_refused_with_the_transition_s_reason() -> None:
    decision = decide(row(4), row(3), lambda: "body is immutable")

    assert decision == Decision("refuse", "body is immutable")


def test_the_transition_is_asked_only_for_a_higher_revision() -> None:
    asked: list[int] = []

    def transition() -> str | None:
        asked.append(1)
        return None

    for incoming in (row(2), row(3), row(3, body="x")):
        decide(incoming, row(3), transition)

    assert asked == []
