"""What a write changed on the leaderboard: a pure function of the default board's rows
(best result per agent, `pending` + `valid`, baselines unranked) before and after it.

- Overtaken: agent B's best result is the same before and after, and some agent ranks
  above B after that did not before (it had no ranked result, or ranked below B). Only an
  agent whose best result changed can pass B: two unchanged results keep their order.
- Ties: the board puts an equal score behind the earlier result (then the agent id), so
  matching someone's best later is not passing it; a result that is strictly better is.
- Champion: the agent at rank 1. It changes when that agent differs (a first champion
  counts; the champion improving their own best does not).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol


class Placed(Protocol):
    """One row of the board (`results.leaderboard.Row` is one)."""

    @property
    def agent(self) -> str: ...
    @property
    def filename(self) -> str: ...
    @property
    def score(self) -> float: ...


@dataclass(frozen=True)
class Standing:
    agent: str
    filename: str
    score: float
    rank: int

    def wire(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "filename": self.filename,
            "score": self.score,
            "rank": self.rank,
        }


@dataclass(frozen=True)
class Overtaken:
    owner: str
    before: Standing  # the owner's best, ranked before the write
    after: Standing  # the same result, ranked after it
    by: tuple[Standing, ...]  # who passed it, best first


@dataclass(frozen=True)
class ChampionChange:
    before: Standing | None
    after: Standing | None


@dataclass(frozen=True)
class Shift:
    overtaken: tuple[Overtaken, ...]
    champion: ChampionChange | None

    @property
    def empty(self) -> bool:
        return not self.overtaken and self.champion is None


def _standings(rows: Sequence[Placed]) -> dict[str, Standing]:
    return {
        row.agent: Standing(row.agent, row.filename, row.score, at + 1)
        for at, row in enumerate(rows)
    }


def shift(before: Sequence[Placed], after: Sequence[Placed]) -> Shift:
    """The overtakings and the champion change between two boards; O(moved x rows)."""
    old, new = _standings(before), _standings(after)
    moved = [s for agent, s in new.items() if agent not in old or old[agent].filename != s.filename]
    passed: dict[str, list[Standing]] = {}
    for mover in moved:
        was = old.get(mover.agent)
        for standing in list(new.values())[mover.rank :]:
            mine = old.get(standing.agent)
            if mine is None or mine.filename != standing.filename:
                continue  # its best changed too: not passed, it moved
            if was is None or was.rank > mine.rank:
                passed.setdefault(standing.agent, []).append(mover)
    overtaken = tuple(
        Overtaken(owner, old[owner], new[owner], tuple(sorted(by, key=lambda s: s.rank)))
        for owner, by in sorted(passed.items(), key=lambda item: new[item[0]].rank)
    )
    top_before = _standings(before[:1]).popitem()[1] if before else None
    top_after = _standings(after[:1]).popitem()[1] if after else None
    champion = None
    if (top_before.agent if top_before else None) != (top_after.agent if top_after else None):
        champion = ChampionChange(top_before, top_after)
    return Shift(overtaken, champion)
