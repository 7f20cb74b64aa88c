"""The live closure check: near a page's keys, the same findings as the full check.

`closure_violations_near` looks only at the rows a page wrote and at the rows
naming a message it removed. That is all a page can break in a projection that
was closed before it; the property below gives it such projections and random
pages and compares it with `closure_violations`, which reads every row.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy.orm import Session

from agenthub.clock import FrozenClock
from agenthub.hubcore import feedrepo
from agenthub.hubcore import repository as repo
from agenthub.hubcore.apply import PageApplier
from agenthub.hubcore.errors import FeedRefused
from agenthub.hubcore.store import Database
from tests.hubcore.bundles import message, receipt, uid
from tests.hubcore.feedpages import m, page, r, start_cursor, t

POOL = list(range(1, 8))
AGENTS = ["bob", "carol"]
LIMIT = 1000  # above any scenario's findings: the two checks' cut-offs never differ


@st.composite
def scenarios(draw: st.DrawFn) -> dict[str, Any]:
    """A closed projection and what one page does to it."""
    present = sorted(draw(st.sets(st.sampled_from(POOL))))
    inside = st.one_of(st.none(), st.sampled_from(present)) if present else st.none()
    anywhere = st.one_of(st.none(), st.sampled_from(POOL))
    before = {n: (draw(inside), draw(inside)) for n in present}
    receipts_before = (
        draw(st.sets(st.tuples(st.sampled_from(present), st.sampled_from(AGENTS))))
        if present
        else set()
    )
    written = {n: (draw(anywhere), draw(anywhere)) for n in draw(st.sets(st.sampled_from(POOL)))}
    rest = [n for n in POOL if n not in written]
    removed = draw(st.sets(st.sampled_from(rest))) if rest else set()
    receipts_written = draw(st.sets(st.tuples(st.sampled_from(POOL), st.sampled_from(AGENTS))))
    return {
        "before": before,
        "receipts_before": receipts_before,
        "written": written,
        "removed": removed,
        "receipts_written": receipts_written,
    }


def _row(n: int, refs: tuple[int | None, int | None], revision: int) -> dict[str, Any]:
    thread, supersedes = refs
    return message(
        n,
        thread_id=uid(thread) if thread else None,
        supersedes_id=uid(supersedes) if supersedes else None,
        revision=revision,
    )


def _apply(session: Session, s: dict[str, Any]) -> None:
    """Write the page's effects the way the applier does (`page_merge.PageMerge.run`)."""
    repo.insert_messages(session, [_row(n, refs, 1) for n, refs in s["before"].items()])
    repo.insert_receipts(session, [receipt(n, a, revision=1) for n, a in s["receipts_before"]])
    assert feedrepo.closure_violations(session) == []  # the scenario starts closed
    final: dict[str, Any] = {uid(n): None for n in s["removed"]}
    final.update({uid(n): _row(n, refs, 2) for n, refs in s["written"].items()})
    feedrepo.write_messages(session, final, {uid(n) for n in s["before"]})
    feedrepo.drop_receipts_of(session, [uid(n) for n in s["removed"]])
    left = {f"{uid(n)}:{a}" for n, a in s["receipts_before"] if n not in s["removed"]}
    feedrepo.write_receipts(
        session,
        {f"{uid(n)}:{a}": receipt(n, a, revision=2) for n, a in s["receipts_written"]},
        left,
    )


def _near(session: Session, s: dict[str, Any], *, with_removed: bool = True) -> list[str]:
    return feedrepo.closure_violations_near(
        session,
        written=[uid(n) for n in s["written"]],
        removed=[uid(n) for n in s["removed"]] if with_removed else [],
        receipts_of={uid(n) for n, _ in s["receipts_written"]},
        limit=LIMIT,
    )


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(s=scenarios())
def test_near_the_page_finds_what_the_full_check_finds(hubcore_db: Database, s: Any) -> None:
    with hubcore_db.scratch() as session:
        _apply(session, s)
        full = feedrepo.closure_violations(session, limit=LIMIT)
        assert sorted(_near(session, s)) == sorted(full)


ORPHANED_REPLY: dict[str, Any] = {
    "before": {1: (None, None), 2: (1, None), 3: (None, 1)},
    "receipts_before": set(),
    "written": {},
    "removed": {1},
    "receipts_written": set(),
}


def test_a_check_that_forgets_removed_messages_misses_their_orphans(
    hubcore_db: Database,
) -> None:
    """The broken variant: looking only at written rows misses a reply and a
    supersession left naming a root the page deleted."""
    with hubcore_db.scratch() as session:
        _apply(session, ORPHANED_REPLY)
        expected = [f"{uid(2)} thread_id->{uid(1)}", f"{uid(3)} supersedes_id->{uid(1)}"]
        assert feedrepo.closure_violations(session) == expected
        assert _near(session, ORPHANED_REPLY) == expected
        assert _near(session, ORPHANED_REPLY, with_removed=False) == []


# -- the applier takes the near check only from a closed projection --------------------


@pytest.fixture
def applier(hubcore_db: Database) -> PageApplier:
    start_cursor(hubcore_db)
    return PageApplier(hubcore_db, FrozenClock())


def _full_check_forbidden(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_args: Any, **_kwargs: Any) -> list[str]:
        raise AssertionError("a live page from a closed projection read every row")

    monkeypatch.setattr(feedrepo, "closure_violations", refuse)


def test_a_live_page_after_a_checkpoint_checks_near_its_rows(
    applier: PageApplier, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert applier.apply(page(m(1, 1), m(2, 2, thread_id=uid(1)))).checkpoint
    _full_check_forbidden(monkeypatch)
    assert applier.apply(page(m(3, 3, thread_id=uid(1)), r(1, "bob", 4), after=2)).checkpoint
    assert applier.apply(page(after=4)).checkpoint  # an empty page: nothing to look at


def test_a_live_page_deleting_a_root_its_reply_still_names_is_refused(
    applier: PageApplier, monkeypatch: pytest.MonkeyPatch
) -> None:
    applier.apply(page(m(1, 1), m(2, 2, thread_id=uid(1))))
    _full_check_forbidden(monkeypatch)
    with pytest.raises(FeedRefused) as info:
        applier.apply(page(t(1, 3), after=2))
    assert info.value.code == "closure_broken"
    assert f"{uid(2)} thread_id->{uid(1)}" in info.value.rows


def test_the_checkpoint_after_catch_up_reads_every_row(applier: PageApplier) -> None:
    # The reply arrives mid catch-up (not a checkpoint), its root never does: the
    # projection was not closed before the last page, so that page's check must
    # look beyond its own rows to find the reply.
    applier.apply(page(m(2, 2, thread_id=uid(1)), has_more=True, high_water=4))
    with pytest.raises(FeedRefused) as info:
        applier.apply(page(m(3, 4), after=2))
    assert info.value.code == "closure_broken"
    assert f"{uid(2)} thread_id->{uid(1)}" in info.value.rows
