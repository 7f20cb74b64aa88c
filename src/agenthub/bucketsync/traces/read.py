"""Reading the trace library (seed §10): the list, one session, the project token totals
(`GET /v1/stats`) and the digest's one-line stats."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agenthub.bucketsync.core import listing, naming
from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.core.readmodel import Record
from agenthub.bucketsync.errors import NotFound
from agenthub.bucketsync.traces.write import (
    MANIFEST,
    SESSION_RE,
    TOKEN_FIELDS,
    TRACES,
    parse_moment,
    trace_dir,
)


def _listed(hub: Hub) -> listing.Listed:
    def build(entries: Mapping[str, Any]) -> listing.Listed:
        paths = {}
        for path in entries:
            parts = path.split("/")
            if len(parts) == 4 and parts[3] == MANIFEST:
                paths[f"{parts[1]}/{parts[2]}"] = path
        keys = sorted(paths)
        return listing.Listed(keys=keys, paths=paths, count=len(keys))

    return hub.read_model.derived(TRACES, "traces", build)


def _render(key: str, record: Record) -> dict[str, Any]:
    agent, session = key.split("/", 1)
    fm = record.frontmatter
    item: dict[str, Any] = {
        "id": key,
        "agent": agent,
        "session_id": session,
        "frontmatter": fm,
        "path": record.path,
        "log_files": list(fm.get("log_files") or []),
    }
    if fm.get("share") == "full" and item["log_files"]:
        item["primary_log_file"] = trace_dir(agent, session) + item["log_files"][0]
    return item


def list_traces(hub: Hub, params: Mapping[str, str]) -> dict[str, Any]:
    query = listing.parse_query(
        params,
        expand_max=hub.settings.expand_max_limit,
        extra_fields=("harness", "model", "share"),
    )
    listed = _listed(hub)
    return listing.page(
        listed,
        query,
        load=lambda paths: hub.read_model.records(paths, TRACES),
        render=_render,
        agent_of=lambda key: key.split("/", 1)[0],
        stamp_of=lambda _key, record: _stamp(record),
        time_from_content=True,
    )


def _stamp(record: Record | None) -> str | None:
    moment = parse_moment(record.frontmatter.get("promoted_at")) if record else None
    return naming.stamp(moment) if moment else None


def get_trace(hub: Hub, agent_id: str, session: str) -> dict[str, Any]:
    record = None
    if naming.AGENT_ID_RE.match(agent_id) and SESSION_RE.match(session):
        record = hub.read_model.record(trace_dir(agent_id, session) + MANIFEST, TRACES)
    if record is None:
        raise NotFound(f"no trace {agent_id}/{session}", hint="list them with GET /v1/traces")
    item = _render(f"{agent_id}/{session}", record)
    item["body"] = record.body
    return item


def stats(hub: Hub) -> dict[str, Any]:
    """The project's token aggregate: a reported floor (BS-10.12). Sessions without token
    counts are excluded and counted; a field nobody reported stays null."""
    listed = _listed(hub)
    records = hub.read_model.records(list(listed.paths.values()), TRACES)
    totals: dict[str, int | None] = dict.fromkeys(TOKEN_FIELDS)
    tool_calls: int | None = None
    cost: float | None = None
    counted = missing = 0
    by_harness: dict[str, int] = {}
    for record in records.values():
        fm = record.frontmatter
        harness = str(fm.get("harness") or "unknown")
        by_harness[harness] = by_harness.get(harness, 0) + 1
        tokens = fm.get("tokens")
        if not isinstance(tokens, Mapping) or all(tokens.get(f) is None for f in TOKEN_FIELDS):
            missing += 1
            continue
        counted += 1
        for name in TOKEN_FIELDS:
            value = tokens.get(name)
            if isinstance(value, int) and not isinstance(value, bool):
                totals[name] = (totals[name] or 0) + value
        if isinstance(fm.get("tool_calls"), int):
            tool_calls = (tool_calls or 0) + fm["tool_calls"]
        if isinstance(fm.get("cost_usd"), int | float) and not isinstance(fm.get("cost_usd"), bool):
            cost = (cost or 0.0) + float(fm["cost_usd"])
    return {
        "sessions": len(records),
        "sessions_counted": counted,
        "sessions_missing_tokens": missing,
        "tokens": totals,
        "tool_calls": tool_calls,
        "cost_usd": cost,
        "by_harness": dict(sorted(by_harness.items())),
        "note": "a reported floor: only shared sessions with token counts are summed",
    }


def digest_line(hub: Hub) -> str | None:
    """One line for the digest; None until the first trace is shared (BS-10.13)."""
    summary = stats(hub)
    if not summary["sessions"]:
        return None
    tokens = summary["tokens"]
    known = sum(v for v in tokens.values() if v)
    return (
        f"{summary['sessions']} sessions shared, {known:,} tokens reported "
        f"({summary['sessions_missing_tokens']} without counts), "
        f"{summary['tool_calls'] or 0:,} tool calls"
    )
