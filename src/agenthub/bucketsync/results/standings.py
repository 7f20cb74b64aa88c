"""Landscape events at the moment a result or a verdict is written: the default board
(`leaderboard.DEFAULT_VERIFICATION`, best per agent) before and after, compared by
`landscape.derive`, the events written by `landscape.publish`.

Both hooks run after their write and never fail it: a lost event is logged, the write
stands."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from agenthub.bucketsync.core import listing, naming
from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.landscape import derive, events
from agenthub.bucketsync.landscape.publish import publish
from agenthub.bucketsync.results.leaderboard import DEFAULT_VERIFICATION, Row, scored_results
from agenthub.bucketsync.results.verification import verification_index

log = logging.getLogger(__name__)


def rows(hub: Hub, index: Mapping[str, str]) -> tuple[Row, ...]:
    """The default board's ranked rows under verification `index`."""
    known = {k: v for k, v in index.items() if v in listing.VERIFICATION_STATES}
    ranking = scored_results(hub).ranking(
        hub, known, verification=DEFAULT_VERIFICATION, best_per_agent=True
    )
    return ranking.rows


def after_result(
    hub: Hub, filename: str, *, built_on: Mapping[str, list[str]] | None = None
) -> str | None:
    """Events of promoting `filename`: the board now, against the board without it (the
    default board never shows an `invalid` result), so a concurrent promotion's effect
    is its own write's to report, never this one's; and for each owner in `built_on`
    (owner -> their works it names) that the result builds on their work."""
    try:
        index = verification_index(hub)
        now = rows(hub, index)
        without = rows(hub, {**index, filename: "invalid"})
        shift = derive.shift(without, now)
        found = events.change(shift, cause="result", result=filename)
        events.built_on(found, built_on or {})
        return publish(hub, found)
    except Exception:  # a result is never refused because its events failed
        log.exception("landscape events failed for result %s", filename)
        return None


def after_verdict(
    hub: Hub, filename: str, verdict: str, *, before: Mapping[str, str], after: Mapping[str, str]
) -> str | None:
    """Events of writing `verdict` on `filename` (index `before` -> `after`): the verdict
    for the result's owner, and whatever it moved on the board, in one event file."""
    try:
        parsed = naming.parse_stamped_filename(filename)
        shift = derive.shift(rows(hub, before), rows(hub, after))
        owner = (parsed[1], verdict) if parsed else None
        found = events.change(shift, cause="verdict", result=filename, verdict=owner)
        return publish(hub, found)
    except Exception:  # the verdict is written; its events are a courtesy
        log.exception("landscape events failed for the verdict on %s", filename)
        return None
