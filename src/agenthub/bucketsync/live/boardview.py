"""`GET /v1/leaderboard` in every view and format.

    view=board (default)   ranked agents in `rows`, organizer baselines (unranked) apart
    view=pareto            the non-dominated rows over score and reported cost (pareto.py),
                           among the rows the query selects (verification, best_per_agent,
                           agent, limit)
    format=csv|json        a download (Content-Disposition: attachment) of every row the
                           view shows, with every column, `limit=` ignored: for view=board
                           the ranked rows then the baselines, for view=pareto the front

The download's rows are flat: each column holds a scalar, a non-scalar method or
description is its compact JSON text. The CSV cell of a value is its JSON row's value with
null as an empty cell, booleans as `true`/`false`; a text cell starting with = + - @ or a
tab or carriage return is prefixed with `'` so a spreadsheet shows it instead of running it
(agents write descriptions, organizers open the file).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agenthub.bucketsync.core import naming
from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.errors import InvalidQuery
from agenthub.bucketsync.live import pareto
from agenthub.bucketsync.results import leaderboard

VIEWS = ("board", "pareto")
FORMATS = ("csv", "json")
COLUMNS = (
    "rank",
    "agent",
    "hf_user",
    "score",
    "method",
    "verification",
    "filename",
    "timestamp",
    "description",
    "baseline",
    "pin",
    "tokens",
    "job_minutes",
    "pareto",
)
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_SCALARS = (str, int, float, bool, type(None))


@dataclass(frozen=True)
class Download:
    filename: str
    media_type: str
    body: bytes


def _choice(params: Mapping[str, str], name: str, allowed: Sequence[str]) -> str | None:
    value = params.get(name) or None
    if value is not None and value not in allowed:
        raise InvalidQuery(f"{name}={value!r} is not valid", hint="one of " + ", ".join(allowed))
    return value


def leaderboard_view(hub: Hub, params: Mapping[str, str]) -> dict[str, Any] | Download:
    view = _choice(params, "view", VIEWS) or "board"
    fmt = _choice(params, "format", FORMATS)
    axes = pareto.parse_axes(params.get("cost"))
    if view == "board" and fmt is None:
        return leaderboard.leaderboard(hub, params)
    if fmt is not None:
        params = {k: v for k, v in params.items() if k != "limit"}
    found = leaderboard.board(hub, params)
    cost_of = pareto.costs(hub, sorted({row.agent for row in (*found.rows, *found.baselines)}))
    verdict = pareto.classify(found.rows, cost_of, axes=axes, order=hub.settings.score_order)

    def render(row: leaderboard.Row) -> dict[str, Any]:
        return leaderboard.render_row(hub, row) | {
            "cost": cost_of[row.agent].as_json(),
            "pareto": verdict.get(row.filename),  # None for a baseline: never on the front
        }

    def rows_in(state: str) -> list[dict[str, Any]]:
        return [render(row) for row in found.rows if verdict[row.filename] == state]

    head = leaderboard.envelope(hub, found) | {"view": view, "cost_axes": list(axes)}
    if fmt is None:
        return head | {
            "rows": rows_in(pareto.FRONT),
            "dominated": rows_in(pareto.DOMINATED),
            "unknown_cost": rows_in(pareto.UNKNOWN),
            "baselines": [render(row) for row in found.baselines],
            "cost_rules": pareto.RULES,
        }
    shown = (
        rows_in(pareto.FRONT)
        if view == "pareto"
        else [render(row) for row in (*found.rows, *found.baselines)]
    )
    flat = [_flat(row) for row in shown]
    stamp = naming.stamp(hub.clock.now())
    name = f"{hub.settings.collab_slug}-leaderboard-{view}-{stamp}.{fmt}"
    if fmt == "json":
        body = json.dumps(head | {"columns": list(COLUMNS), "rows": flat}, indent=1)
        return Download(name, "application/json", body.encode())
    return Download(name, "text/csv; charset=utf-8", to_csv(flat).encode())


def _flat(row: Mapping[str, Any]) -> dict[str, Any]:
    """A rendered row as the download's columns, every value a scalar."""
    values = {**row, **row["cost"]}
    return {
        column: (
            values.get(column)
            if isinstance(values.get(column), _SCALARS)
            else json.dumps(values.get(column), separators=(",", ":"), sort_keys=True)
        )
        for column in COLUMNS
    }


def csv_cell(value: Any) -> str:
    """The CSV text of a download value (see the module docstring)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return "'" + value if value.startswith(_FORMULA_START) else value
    return str(value)


def to_csv(rows: Sequence[Mapping[str, Any]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(COLUMNS)
    for row in rows:
        writer.writerow([csv_cell(row[column]) for column in COLUMNS])
    return out.getvalue()
