"""The leaderboard's Pareto view: the rows no other row beats on score and reported cost.

Cost has two axes, each a number reported for the row's agent (a result names neither a
session nor a run, so an agent's results share its cost):

    tokens        the agent's shared traces (traces/ read side); unknown when it shared
                  none, or when one of its sessions reports no counts
    job_minutes   the agent's benchmark runs in the jobs ledger (scoring/minutes.py)

`null` is unknown, never zero. A row whose cost is unknown on an axis the view uses is not
placed on the front and does not dominate anything: it is listed apart, in `unknown_cost`.
Row A dominates row B when A's score is at least as good (the challenge's SCORE_ORDER) and
A costs no more on every axis, and A is strictly better somewhere; equal rows both stay.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.errors import InvalidQuery
from agenthub.bucketsync.results.leaderboard import Row
from agenthub.bucketsync.scoring.minutes import agent_minutes
from agenthub.bucketsync.traces.read import agent_tokens

AXES = ("tokens", "job_minutes")
# What a Pareto answer says about its cost columns, so a reader needs no other document.
RULES = {
    "tokens": "the agent's shared traces; null when it shared none or a session has no counts",
    "job_minutes": "the agent's runs in the jobs ledger (its 24h window); null while one is "
    "running or its status is unreadable, or when jobs are off",
    "unknown_cost": "rows with a null cost on an axis used: neither on the front nor "
    "dominating, listed apart",
    "dominance": "at least as good a score and no more cost on every axis, better somewhere",
}
FRONT, DOMINATED, UNKNOWN = "front", "dominated", "unknown_cost"


@dataclass(frozen=True)
class Cost:
    tokens: int | None
    job_minutes: float | None

    def on(self, axis: str) -> float | None:
        value: float | None = self.tokens if axis == "tokens" else self.job_minutes
        return value

    def as_json(self) -> dict[str, float | None]:
        minutes = None if self.job_minutes is None else round(self.job_minutes, 3)
        return {"tokens": self.tokens, "job_minutes": minutes}


def parse_axes(raw: str | None) -> tuple[str, ...]:
    """`cost=tokens,job_minutes` (the default: both)."""
    if not raw:
        return AXES
    axes = tuple(dict.fromkeys(part.strip() for part in raw.split(",") if part.strip()))
    if not axes or any(axis not in AXES for axis in axes):
        raise InvalidQuery(f"cost={raw!r} is not valid", hint="a comma list of " + ", ".join(AXES))
    return axes


def costs(hub: Hub, agents: Sequence[str]) -> dict[str, Cost]:
    """Each agent's reported cost (see the module docstring)."""
    tokens = agent_tokens(hub)
    minutes = agent_minutes(hub)
    return {
        agent: Cost(
            tokens=tokens.get(agent),
            job_minutes=None if minutes is None else minutes.get(agent, 0.0),
        )
        for agent in agents
    }


def _dominates(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    return all(x <= y for x, y in zip(a, b, strict=True)) and a != b


def classify(
    rows: Sequence[Row], cost_of: Mapping[str, Cost], *, axes: Sequence[str], order: str
) -> dict[str, str]:
    """filename → `front`, `dominated` or `unknown_cost` for each row."""
    sign = -1.0 if order == "desc" else 1.0  # every coordinate: lower is better
    points: dict[str, tuple[float, ...]] = {}
    verdict: dict[str, str] = {}
    for row in rows:
        values = [cost_of[row.agent].on(axis) for axis in axes]
        if any(value is None for value in values):
            verdict[row.filename] = UNKNOWN
        else:
            points[row.filename] = (sign * row.score, *(float(v or 0) for v in values))
    # A dominator sorts before what it dominates, and the front dominates whatever a
    # dominated row does: one pass in sorted order, checking against the front only.
    front: list[tuple[float, ...]] = []
    for name, point in sorted(points.items(), key=lambda item: item[1]):
        if any(_dominates(other, point) for other in front):
            verdict[name] = DOMINATED
        else:
            verdict[name] = FRONT
            front.append(point)
    return verdict
