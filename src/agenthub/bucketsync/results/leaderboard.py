"""The leaderboard: a pure function over promoted results and the verification index.

`rank()` knows nothing about buckets or HTTP; `leaderboard()` feeds it from the read model
and caches the ranking per results-folder listing version (the index lives in `results/`,
so an admin verdict edit or a new result both invalidate it).
"""

from __future__ import annotations

import bisect
import math
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agenthub.bucketsync.core import listing, naming
from agenthub.bucketsync.core.access import registration
from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.core.perreadmodel import PerReadModel
from agenthub.bucketsync.core.readmodel import Record
from agenthub.bucketsync.errors import InvalidQuery
from agenthub.bucketsync.results import embargo, lineage, pins
from agenthub.bucketsync.results.baseline import is_baseline
from agenthub.bucketsync.results.verification import verification_index
from agenthub.bucketsync.storage.base import FileEntry

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
    rank: int | None  # None for a baseline: shown, never ranked
    agent: str
    score: float
    filename: str
    timestamp: str
    verification: str
    method: Any
    description: Any
    baseline: bool = False


@dataclass(frozen=True)
class Ranking:
    rows: tuple[Row, ...]
    considered: int
    excluded: dict[str, int]
    baselines: tuple[Row, ...] = ()


def score_of(fm: Mapping[str, Any], score_field: str) -> float | None:
    """The positive finite score of a result, or None if it has none."""
    value = fm.get(score_field)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if not math.isfinite(value) or value <= 0:
        return None
    return float(value)


@dataclass(frozen=True)
class Scored:
    """An eligible result with its sort key (better first, then earlier, then agent id)."""

    key: tuple[float, str, str]
    score: float
    entry: Entry


def classify(entry: Entry, *, score_field: str, order: str) -> Scored | str:
    """The result's sort position, or why it is not eligible (`status_negative`,
    `malformed`)."""
    status = entry.frontmatter.get("status")
    if status == "negative":
        return "status_negative"
    score = score_of(entry.frontmatter, score_field)
    if status != "agent-run" or score is None:
        return "malformed"
    sign = -1.0 if order == "desc" else 1.0
    return Scored((sign * score, entry.stamp, entry.agent), score, entry)


def rank_sorted(
    scored: Iterable[Scored],
    index: Mapping[str, str],
    *,
    considered: int,
    excluded: Mapping[str, int],
    verification: Sequence[str] = DEFAULT_VERIFICATION,
    best_per_agent: bool = True,
) -> Ranking:
    """Rank already-sorted eligible results under a verification filter."""
    # agent-collabs names a verification state only once a result was left out for it.
    counts = {"status_negative": 0, "malformed": 0, **excluded}
    rows: list[Row] = []
    baselines: list[Row] = []
    seen: set[str] = set()
    for item in scored:
        entry = item.entry
        state = index.get(entry.filename, "pending")
        if state not in verification:
            counts[f"verification_{state}"] = counts.get(f"verification_{state}", 0) + 1
            continue
        baseline = is_baseline(entry.frontmatter)
        # Every baseline is its own reference point; best_per_agent is for agents.
        if best_per_agent and not baseline:
            if entry.agent in seen:
                continue
            seen.add(entry.agent)
        (baselines if baseline else rows).append(
            Row(
                rank=None if baseline else len(rows) + 1,
                agent=entry.agent,
                score=item.score,
                filename=entry.filename,
                timestamp=str(
                    entry.frontmatter.get("timestamp") or naming.stamp_to_iso(entry.stamp)
                ),
                verification=state,
                method=entry.frontmatter.get("method"),
                description=entry.frontmatter.get("description"),
                baseline=baseline,
            )
        )
    return Ranking(
        rows=tuple(rows), considered=considered, excluded=counts, baselines=tuple(baselines)
    )


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
    scored: list[Scored] = []
    considered = 0
    for entry in entries:
        considered += 1
        outcome = classify(entry, score_field=score_field, order=order)
        if isinstance(outcome, str):
            excluded[outcome] += 1
        else:
            scored.append(outcome)
    scored.sort(key=lambda item: item.key)
    return rank_sorted(
        scored,
        index,
        considered=considered,
        excluded=excluded,
        verification=verification,
        best_per_agent=best_per_agent,
    )


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
        limit = listing.parse_limit(params["limit"])
    return BoardQuery(
        verification=tuple(sorted(verification)),
        best_per_agent=best_raw in ("true", "1", "yes"),
        agent=agent,
        limit=limit,
    )


def _entry(record: Record) -> Entry:
    parsed = naming.parse_stamped_filename(record.filename)
    assert parsed is not None
    return Entry(record.filename, parsed[1], parsed[0], record.frontmatter)


def _result_paths(entries: Mapping[str, FileEntry]) -> dict[str, str]:
    """Stamped result files of the `results/` listing → content hash."""
    return {
        path: entry.content_hash
        for path, entry in entries.items()
        if "/" not in path[len(naming.RESULTS) :]
        and naming.parse_stamped_filename(path[len(naming.RESULTS) :]) is not None
    }


def result_entries(hub: Hub) -> list[Entry]:
    """Every stamped result file, parsed (from the content cache where warm)."""
    paths = _result_paths(hub.read_model.entries(naming.RESULTS))
    return [_entry(r) for r in hub.read_model.records(list(paths), naming.RESULTS).values()]


class ScoredResults:
    """The eligible results kept sorted across listing versions: a new or changed result
    costs one parse and one insertion instead of a re-sort of every result."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._config: tuple[str, str] | None = None
        self._reset()

    def _reset(self) -> None:
        self._hashes: dict[str, str] = {}
        self._outcomes: dict[str, Scored | str] = {}
        self._sorted: list[Scored] = []
        self._excluded = {"status_negative": 0, "malformed": 0}

    def _drop(self, path: str) -> None:
        old = self._outcomes.pop(path, None)
        if isinstance(old, Scored):
            at = bisect.bisect_left(self._sorted, old.key, key=lambda item: item.key)
            while self._sorted[at] is not old:
                at += 1
            del self._sorted[at]
        elif old is not None:
            self._excluded[old] -= 1
        self._hashes.pop(path, None)

    def ranking(
        self,
        hub: Hub,
        index: Mapping[str, str],
        *,
        verification: Sequence[str],
        best_per_agent: bool,
    ) -> Ranking:
        settings = hub.settings
        config = (settings.score_field, settings.score_order)
        listing_entries = hub.read_model.entries(naming.RESULTS)
        with self._lock:
            if config != self._config:
                self._reset()
                self._config = config
            # Known paths are compared by hash; only unknown ones pay for the name check.
            fresh: dict[str, str] = {}
            seen, known_before = 0, len(self._hashes)
            for path, file_entry in listing_entries.items():
                known = self._hashes.get(path)
                if known is None:
                    rest = path[len(naming.RESULTS) :]
                    if "/" not in rest and naming.parse_stamped_filename(rest) is not None:
                        fresh[path] = file_entry.content_hash
                    continue
                seen += 1
                if known != file_entry.content_hash:
                    self._drop(path)
                    fresh[path] = file_entry.content_hash
            if seen < known_before:  # some known result left the listing
                for path in [p for p in self._hashes if p not in listing_entries]:
                    self._drop(path)
            records = hub.read_model.records(list(fresh), naming.RESULTS) if fresh else {}
            for path, record in records.items():
                outcome = classify(_entry(record), score_field=config[0], order=config[1])
                self._hashes[path] = fresh[path]
                self._outcomes[path] = outcome
                if isinstance(outcome, str):
                    self._excluded[outcome] += 1
                else:
                    bisect.insort(self._sorted, outcome, key=lambda item: item.key)
            return rank_sorted(
                self._sorted,
                index,
                considered=len(self._outcomes),
                excluded=self._excluded,
                verification=verification,
                best_per_agent=best_per_agent,
            )


_SCORED = PerReadModel(ScoredResults)


def scored_results(hub: Hub) -> ScoredResults:
    return _SCORED.of(hub.read_model)


def cached_ranking(hub: Hub, query: BoardQuery) -> Ranking:
    """The ranking for `query`, memoized per results listing version."""
    settings = hub.settings
    key = (
        f"leaderboard:{','.join(query.verification)}:{query.best_per_agent}:"
        f"{settings.score_field}:{settings.score_order}"
    )

    def build(_entries: object) -> Ranking:
        return scored_results(hub).ranking(
            hub,
            verification_index(hub),
            verification=query.verification,
            best_per_agent=query.best_per_agent,
        )

    return hub.read_model.derived(naming.RESULTS, key, build)


@dataclass(frozen=True)
class Board:
    """One leaderboard read: the ranking, and the rows and baselines the query shows."""

    query: BoardQuery
    ranking: Ranking
    rows: Sequence[Row]
    baselines: Sequence[Row]


def board(hub: Hub, params: Mapping[str, str]) -> Board:
    query = parse_board_query(params)
    ranking = cached_ranking(hub, query)
    rows: Sequence[Row] = ranking.rows
    baselines: Sequence[Row] = ranking.baselines
    if query.agent is not None:  # the global rank is kept
        rows = [row for row in rows if row.agent == query.agent]
        baselines = [row for row in baselines if row.agent == query.agent]
    if query.limit is not None:
        rows = rows[: query.limit]
    return Board(query, ranking, rows, baselines)


def envelope(hub: Hub, found: Board) -> dict[str, Any]:
    """What every view of the board answers besides its rows."""
    return {
        "score_field": hub.settings.score_field,
        "score_unit": hub.settings.score_unit,
        "order": hub.settings.score_order,
        "best_per_agent": found.query.best_per_agent,
        "verification": list(found.query.verification),
        "count": len(found.ranking.rows),
        # Per agent shown, how often others built on their work (results/lineage.py).
        "credits": lineage.credits_of(
            hub, sorted({row.agent for row in (*found.rows, *found.baselines)})
        ),
        "meta": {
            "generated_at": hub.clock.now().isoformat(timespec="seconds").replace("+00:00", "Z"),
            "results_considered": found.ranking.considered,
            "excluded": dict(found.ranking.excluded),
        },
    }


def leaderboard(hub: Hub, params: Mapping[str, str]) -> dict[str, Any]:
    """`GET /v1/leaderboard`: ranked agents in `rows`; organizer baselines, unranked, in
    `baselines`."""
    found = board(hub, params)
    return envelope(hub, found) | {
        "rows": [render_row(hub, row) for row in found.rows],
        "baselines": [render_row(hub, row) for row in found.baselines],
    }


def render_row(hub: Hub, row: Row) -> dict[str, Any]:
    record = registration(hub, row.agent)
    pinned = pins.read_pin(hub, row.filename)
    shown = {
        "rank": row.rank,
        "agent": row.agent,
        "hf_user": record.frontmatter.get("hf_user") if record else None,
        "score": row.score,
        "method": row.method,
        "verification": row.verification,
        "filename": row.filename,
        "timestamp": row.timestamp,
        "description": row.description,
        "baseline": row.baseline,
        # The same pin `GET /v1/results/{filename}` shows (the server's record of the
        # submission at promotion), by its manifest hash; null when the result names none.
        "pin": pinned["manifest_hash"] if pinned is not None else None,
    }
    return embargo.row(hub, shown)
