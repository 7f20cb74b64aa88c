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
    TOTAL_FIELDS,
    TRACES,
    tool_calls_of,
    trace_dir,
    usage_of,
)

EXCERPT_CHARS = 280


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


def _text(value: Any) -> str | None:
    return str(value) if value not in (None, "") else None


def _excerpt(body: str) -> str:
    text = body.strip()
    return text if len(text) <= EXCERPT_CHARS else text[:EXCERPT_CHARS].rstrip() + "…"


def _render(key: str, record: Record) -> dict[str, Any]:
    """One library entry: our record (`id`, `frontmatter`, `manifest_path`, `log_files`)
    plus agent-collabs' flat `TraceSummary` fields (`path` is the session folder)."""
    agent, session = key.split("/", 1)
    fm = record.frontmatter
    usage = usage_of(fm)
    folder = trace_dir(agent, session)
    # Central paths, as agent-collabs answers (the manifest keeps the bare names).
    log_files = [folder + str(name) for name in fm.get("log_files") or []]
    return {
        "id": key,
        "agent": agent,
        "session_id": session,
        "harness": _text(fm.get("harness")),
        "model": _text(fm.get("model")),
        "share": _text(fm.get("share")),
        "completeness": _text(fm.get("completeness")),
        "promoted_at": _text(fm.get("promoted_at")),
        "started_at": _text(fm.get("started_at")),
        "total_tokens": usage["total"] if usage else None,
        "tool_calls": tool_calls_of(fm),
        "result_ref": _text(fm.get("result_ref")),
        "summary_excerpt": _excerpt(record.body),
        "path": folder,
        "manifest_path": record.path,
        "primary_log_file": log_files[0] if fm.get("share") == "full" and log_files else None,
        "frontmatter": fm,
        "log_files": log_files,
    }


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
    moment = naming.parse_moment(record.frontmatter.get("promoted_at")) if record else None
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
    """The project's token aggregate: a reported floor (seed §10). A session counts when
    its manifest reports token counts (either dialect); the others are excluded and
    counted in `sessions_missing_tokens`. The keys are agent-collabs' `StatsResponse`
    (`tokens` with integer totals, `agents_reporting`, `by_model`, `by_agent`, `by_day`,
    `generated_at`) plus ours (`sessions`, `tokens_reported`: a field nobody reported is
    null there, `tool_calls`, `by_harness`, `note`)."""
    listed = _listed(hub)
    records = hub.read_model.records(list(listed.paths.values()), TRACES)
    totals = dict.fromkeys(TOTAL_FIELDS, 0)
    reported: dict[str, int | None] = dict.fromkeys(TOKEN_FIELDS)
    by_model: dict[str, dict[str, int]] = {}
    by_agent: dict[str, dict[str, int]] = {}
    by_day: dict[str, dict[str, int]] = {}
    agents: set[str] = set()
    tool_calls: int | None = None
    cost: float | None = None
    counted = missing = 0
    by_harness: dict[str, int] = {}
    for key, path in listed.paths.items():
        record = records.get(path)
        if record is None:
            continue
        agent = key.split("/", 1)[0]
        agents.add(agent)
        fm = record.frontmatter
        harness = str(fm.get("harness") or "unknown")
        by_harness[harness] = by_harness.get(harness, 0) + 1
        usage = usage_of(fm)
        if usage is None:
            missing += 1
            continue
        counted += 1
        day = _day(fm.get("started_at")) or _day(fm.get("promoted_at")) or "unknown"
        for bucket in (
            totals,
            by_model.setdefault(str(fm.get("model") or "unknown"), dict.fromkeys(TOTAL_FIELDS, 0)),
            by_agent.setdefault(agent, dict.fromkeys(TOTAL_FIELDS, 0)),
            by_day.setdefault(day, dict.fromkeys(TOTAL_FIELDS, 0)),
        ):
            for name, value in usage.items():
                bucket[name] += value
        for name in TOKEN_FIELDS:
            if name in usage:
                reported[name] = (reported[name] or 0) + usage[name]
        calls = tool_calls_of(fm)
        if calls is not None:
            tool_calls = (tool_calls or 0) + calls
        if isinstance(fm.get("cost_usd"), int | float) and not isinstance(fm.get("cost_usd"), bool):
            cost = (cost or 0.0) + float(fm["cost_usd"])
    return {
        "tokens": totals,
        "cost_usd": round(cost, 6) if cost is not None else None,
        "sessions_counted": counted,
        "sessions_missing_tokens": missing,
        "agents_reporting": len(agents),
        "by_model": dict(sorted(by_model.items())),
        "by_agent": dict(sorted(by_agent.items())),
        "by_day": dict(sorted(by_day.items())),
        "generated_at": naming.iso_now(hub.clock.now()),
        "sessions": len(records),
        "tokens_reported": reported,
        "tool_calls": tool_calls,
        "by_harness": dict(sorted(by_harness.items())),
        "note": "a reported floor: only shared sessions with token counts are summed",
    }


def agent_tokens(hub: Hub) -> dict[str, int | None]:
    """Each sharing agent's reported token total over its shared sessions; None when any of
    its sessions reports no counts (a partial sum would understate the cost, so the cost is
    unknown, never a floor). An agent that shared nothing is absent: unknown too."""
    listed = _listed(hub)
    records = hub.read_model.records(list(listed.paths.values()), TRACES)
    totals: dict[str, int | None] = {}
    for key, path in listed.paths.items():
        record = records.get(path)
        if record is None:
            continue
        agent = key.split("/", 1)[0]
        usage = usage_of(record.frontmatter)
        known = totals.get(agent, 0)
        if usage is None or known is None:
            totals[agent] = None
        else:
            totals[agent] = known + usage["total"]
    return totals


def _day(value: Any) -> str | None:
    moment = naming.parse_moment(value)
    return moment.date().isoformat() if moment else None


def digest_stats(hub: Hub) -> tuple[dict[str, int], str] | None:
    """The digest's `stats` object (agent-collabs' `DigestStats`) and our one-line
    summary; None until the first trace is shared (seed §10)."""
    summary = stats(hub)
    if not summary["sessions"]:
        return None
    block = {
        "total_tokens": summary["tokens"]["total"],
        "sessions_counted": summary["sessions_counted"],
        "agents_reporting": summary["agents_reporting"],
    }
    line = (
        f"{summary['sessions']} sessions shared, {summary['tokens']['total']:,} tokens reported "
        f"({summary['sessions_missing_tokens']} without counts), "
        f"{summary['tool_calls'] or 0:,} tool calls"
    )
    return block, line
