"""`GET /v1/leaderboard/final`: the final leaderboard, on the private split, from each
agent's final entries; sealed (no scores at all) until the reveal.

Per agent, the entries that count are the results it marked final (`phases.finals`), or,
when it marked none, its best FINAL_ENTRIES_MAX results on the public board (every
eligible result, `pending` + `valid`, better public score first). Its final score is the
best private-split score among them (`phases.private`); an agent none of whose entries has
a private score yet is listed apart in `unscored`. Rows rank by that score under
SCORE_ORDER, ties to the earlier result, then the agent id. Baselines are not ranked.
"""

from __future__ import annotations

from typing import Any

from agenthub.bucketsync.core import naming
from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.phases import finals, private
from agenthub.bucketsync.phases.schedule import reveal_at, revealed
from agenthub.bucketsync.results.leaderboard import (
    DEFAULT_VERIFICATION,
    BoardQuery,
    Row,
    cached_ranking,
)


def counting(
    rows: tuple[Row, ...], marks: dict[str, list[str]], limit: int
) -> dict[str, list[Row]]:
    """Agent -> the rows that count for it (marked ones, else its best `limit` public)."""
    by_agent: dict[str, list[Row]] = {}
    for row in rows:  # better public score first
        if not row.baseline:
            by_agent.setdefault(row.agent, []).append(row)
    chosen: dict[str, list[Row]] = {}
    for agent, mine in by_agent.items():
        wanted = marks.get(agent)
        chosen[agent] = [r for r in mine if r.filename in wanted] if wanted else mine[:limit]
    return chosen


def final_rows(
    rows: tuple[Row, ...],
    marks: dict[str, list[str]],
    scores: dict[str, float],
    *,
    limit: int,
    order: str,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(ranked rows, unscored agents) of the final board: a pure function."""
    sign = -1.0 if order == "desc" else 1.0
    ranked: list[tuple[tuple[float, str, str], dict[str, Any]]] = []
    unscored: list[dict[str, Any]] = []
    for agent, entries in sorted(counting(rows, marks, limit).items()):
        selected = "marked" if marks.get(agent) else "best_public"
        names = [r.filename for r in entries]
        scored = [(scores[r.filename], r) for r in entries if r.filename in scores]
        if not scored:
            unscored.append({"agent": agent, "entries": names, "selection": selected})
            continue
        best_score, best = min(scored, key=lambda sr: (sign * sr[0], sr[1].timestamp))
        stamp = naming.parse_stamped_filename(best.filename)
        ranked.append(
            (
                (sign * best_score, stamp[0] if stamp else best.filename, agent),
                {
                    "agent": agent,
                    "score": best_score,
                    "public_score": best.score,
                    "filename": best.filename,
                    "method": best.method,
                    "verification": best.verification,
                    "entries": names,
                    "selection": selected,
                },
            )
        )
    ranked.sort(key=lambda item: item[0])
    return [{"rank": at + 1, **row} for at, (_key, row) in enumerate(ranked)], unscored


def final_board(hub: Hub) -> dict[str, Any]:
    s = hub.settings
    now = hub.clock.now()
    at = reveal_at(s.challenge_phases)
    head: dict[str, Any] = {
        "split": "private",
        "score_field": s.score_field,
        "order": s.score_order,
        "final_entries_max": s.final_entries_max,
        "reveal_at": naming.iso_now(at) if at is not None else None,
        "generated_at": naming.iso_now(now),
    }
    if not revealed(s, now):
        why = "no private split is configured" if at is None else "the private split is sealed"
        return head | {"status": "sealed", "detail": why, "count": 0, "rows": [], "unscored": []}
    # Every eligible result by public score, memoized per results listing version.
    every = BoardQuery(verification=tuple(sorted(DEFAULT_VERIFICATION)), best_per_agent=False)
    ranking = cached_ranking(hub, every)
    rows, unscored = final_rows(
        ranking.rows,
        finals.every_selection(hub),
        private.scores(hub),
        limit=s.final_entries_max,
        order=s.score_order,
    )
    return head | {"status": "revealed", "count": len(rows), "rows": rows, "unscored": unscored}
