"""The schedule as a pure function of the phases and a moment."""

from __future__ import annotations

from datetime import timedelta

from agenthub.bucketsync.phases.schedule import reveal_at, selection_deadline, situation
from agenthub.bucketsync.settings import Phase
from tests.bucketsync.phases.conftest import DEV_END, DEV_START, FINAL_END, REVEAL

DEV = Phase(name="dev", start=DEV_START, end=DEV_END)
FINAL = Phase(name="final", start=REVEAL, end=FINAL_END, results=False, split="private")


def test_a_phase_holds_its_start_and_not_its_end() -> None:
    assert situation([DEV, FINAL], DEV_START).current == DEV
    at_end = situation([DEV, FINAL], DEV_END)
    assert at_end.current is None and at_end.next == FINAL and at_end.previous == DEV
    assert not at_end.results_open


def test_a_phase_that_accepts_no_results_is_current_but_closed() -> None:
    where = situation([DEV, FINAL], REVEAL + timedelta(hours=1))
    assert where.current == FINAL and not where.results_open and where.next is None


def test_the_reveal_is_the_first_private_phase_and_locks_the_selection() -> None:
    assert reveal_at([DEV, FINAL]) == REVEAL
    assert selection_deadline([DEV, FINAL]) == REVEAL
    assert reveal_at([DEV]) is None
    assert selection_deadline([DEV]) == DEV_END  # no private phase: the end of results
