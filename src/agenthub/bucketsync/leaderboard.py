"""The leaderboard: a pure function over promoted results and the verification index.

`rank()` knows nothing about buckets or HTTP; `leaderboard()` feeds it from the read model
and caches the ranking per results-folder listing version (the index lives in `results/`,
so an admin verdict edit or a new result both invalidate it).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agenthub.bucketsync import listing, naming
from agenthub.bucketsync.agents import registration
from agenthub.bucketsync.context import Hub
from agenthub.bucketsync.errors import InvalidQuery
from agenthub.bucketsync.results import verification_index

DEFAULT_VERIFICATION = ("pending", "valid")  # `invalid` is excluded unless asked for


@dataclass(frozen=True)
class Entry:
    """One result as the leaderboard sees it."""

    filename: str
    agent: str
    stamp: str
    frontmatter: Mapping[str, Any]


@dataclass(frozen=True)
class Row:
    rank: int
    agent: str
    score: float
    filename: str
    timestamp: str
    verification: str
    method: Any
    description: Any


@dataclass(frozen=True)
class Ranking:
    rows: tuple[Row, ...]
    considered: int
    excluded: dict[str, int]


def score_of(fm: Mapping[str, Any], score_field: str) -> float | None:
    """The positive finite score of a result, or None if it has none."""
    value = fm.get(score_field)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if not math.isfinite(value) or value <= 0:
        return None
    return float(value)


def rank(
    entries: Iterable[Entry],
    index: Mapping[str, str],
    *,
    score_field: str,
    order: str,
    verification: Sequence[str] = DEFAULT_VERIFICATION,
    best_per_agent: bool = True,
) -> Ranking:
    """Rank eligible results (`status: agent-run`, positive numeric score) whose
    verification state is in `verification`; ties go to the earlier stamp, then agent id."""
    excluded = {"status_negative": 0, "malformed": 0}
    for state in listing.VERIFICATION_STATES:
        excluded[f"verification_{state}"] = 0
    eligible: list[tuple[float, Entry, str]] = []
    considered = 0
    for entry in entries:
        considered += 1
        status = entry.frontmatter.get("status")
        if status == "negative":
            excluded["status_negative"] += 1
            continue
        score = score_of(entry.frontmatter, score_field)
        if status != "agent-run" or score is None:
            excluded["malformed"] += 1
            continue
        state = index.get(entry.filename, "pending")
        if state not in verification:
            excluded[f"verification_{state}"] += 1
            continue
        eligible.append((score, entry, state))
    sign = -1.0 if order == "desc" else 1.0
    eligible.sort(key=lambda item: (sign * item[0], item[1].stamp, item[1].agent))
    rows: list[Row] = []
    seen: set[str] = set()
    for score, entry, state in eligible:
        if best_per_agent:
            if entry.agent in seen:
                continue
            seen.add(entry.agent)
        rows.append(
            Row(
                rank=len(rows) + 1,
                agent=entry.agent,
                score=score,
                filename=entry.filename,
                timestamp=str(
                    entry.frontmatter.get("timestamp") or naming.stamp_to_iso(entry.stamp)
                ),
                verification=state,
                method=entry.frontmatter.get("method"),
                description=entry.frontmatter.get("description"),
            )
        )
    return Ranking(rows=tuple(rows), considered=considered, excluded=excluded)


@dataclass(frozen=True)
class BoardQuery:
    verification: tuple[str, ...] = DEFAULT_VERIFICATION
    best_per_agent: bool = True
    agent: str | None = None
    limit: int | None = None


def parse_board_query(params: Mapping[str, str]) -> BoardQuery:
    verification: tuple[str, ...] = DEFAULT_VERIFICATION
    raw = params.get("verification")
    if raw:
        states = tuple(dict.fromkeys(s.strip() for s in raw.split(",") if s.strip()))
        unknown = [s for s in states if s not in listing.VERIFICATION_STATES]
        if unknown or not states:
            raise InvalidQuery(
                f"verification={raw!r} is not valid",
                hint="a comma list of pending, valid, invalid (valid = the strict board)",
            )
        verification = states
    best_raw = (params.get("best_per_agent") or "true").lower()
    if best_raw not in ("true", "false", "1", "0", "yes", "no"):
        raise InvalidQuery(f"best_per_agent={best_raw!r} is not a boolean")
    agent = params.get("agent") or None
    if agent is not None:
        try:
            naming.validate_agent_id(agent)
        except Exception:
            raise InvalidQuery(f"agent={agent!r} is not a valid agent id") from None
    limit: int | None = None
    if params.get("limit"):
        try:
            limit = int(params["limit"])
        except ValueError:
            raise InvalidQuery(f"limit={params['limit']!r} is not an integer") from None
        if limit < 1:
            raise InvalidQuery("limit must be at least 1", hint="use limit=10")
    return BoardQuery(
        verification=tuple(sorted(verification)),
        best_per_agent=best_raw in ("true", "1", "yes"),
        agent=agent,
        limit=limit,
    )


def result_entries(hub: Hub) -> list[Entry]:
    """Every stamped result file, parsed (from the content cache where warm)."""
    entries = hub.read_model.entries(naming.RESULTS)
    paths = [
        path
        for path in entries
        if "/" not in path[len(naming.RESULTS) :]
        and naming.parse_stamped_filename(path[len(naming.RESULTS) :]) is not None
    ]
    records = hub.read_model.records(paths, naming.RESULTS)
    found = []
    for record in records.values():
        parsed = naming.parse_stamped_filename(record.filename)
        assert parsed is not None
        found.append(Entry(record.filename, parsed[1], parsed[0], record.frontmatter))
    return found


def cached_ranking(hub: Hub, query: BoardQuery, index_of: Callable[[], dict[str, str]]) -> Ranking:
    key = f"leaderboard:{','.join(query.verification)}:{query.best_per_agent}"
    settings = hub.settings

    def build(_entries: object) -> Ranking:
        return rank(
            result_entries(hub),
            index_of(),
            score_field=settings.score_field,
            order=settings.score_order,
            verification=query.verification,
            best_per_agent=query.best_per_agent,
        )

    return hub.read_model.derived(
        naming.RESULTS, f"{key}:{settings.score_field}:{settings.score_order}", build
    )


def leaderboard(hub: Hub, params: Mapping[str, str]) -> dict[str, Any]:
    """`GET /v1/leaderboard`."""
    query = parse_board_query(params)
    ranking = cached_ranking(hub, query, lambda: verification_index(hub))
    rows: Sequence[Row] = ranking.rows
    if query.agent is not None:
        rows = [row for row in rows if row.agent == query.agent]  # global rank is kept
    if query.limit is not None:
        rows = rows[: query.limit]
    return {
        "score_field": hub.settings.score_field,
        "score_unit": hub.settings.score_unit,
        "order": hub.settings.score_order,
        "best_per_agent": query.best_per_agent,
        "verification": list(query.verification),
        "count": len(ranking.rows),
        "rows": [render_row(hub, row) for row in rows],
        "meta": {
            "generated_at": hub.clock.now().isoformat(timespec="seconds").replace("+00:00", "Z"),
            "results_considered": ranking.considered,
            "excluded": dict(ranking.excluded),
        },
    }


def render_row(hub: Hub, row: Row) -> dict[str, Any]:
    record = registration(hub, row.agent)
    return {
        "rank": row.rank,
        "agent": row.agent,
        "hf_user": record.frontmatter.get("hf_user") if record else None,
        "score": row.score,
        "method": row.method,
        "verification": row.verification,
        "filename": row.filename,
        "timestamp": row.timestamp,
        "description": row.description,
    }
