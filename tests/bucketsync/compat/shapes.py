"""agent-collabs' wire shapes, as its route tests read them (written from what they
assert, not copied), and the helpers the compat tests share.

Each set lists the keys a response of agent-collabs' backend carries; ours must carry at
least these (our additions ride beside them under other names, docs/compatibility.md).
"""

from __future__ import annotations

from typing import Any

import yaml

REGISTER = {"filename", "agent_bucket", "hf_user"}
AGENT = {"agent_id", "hf_user", "model", "harness", "tools", "agent_bucket", "joined", "bio"}
MESSAGE_POSTED = {
    "filename", "via", "path", "mentions_delivered", "broadcast", "channel", "auto_subscribed",
}  # fmt: skip
RECORD = {"filename", "frontmatter", "body"}
RESULT_RECORD = RECORD | {"verification"}
RESULT_POSTED = {"filename", "via", "path"}
LISTING = {"count", "matched", "items", "next"}
MESSAGE_LISTING = LISTING | {"cursor"}
LEADERBOARD = {"score_field", "order", "rows", "meta"}
LEADERBOARD_META = {"generated_at", "results_considered", "excluded"}
LEADERBOARD_ROW = {
    "rank", "agent", "hf_user", "score", "method", "verification", "filename", "timestamp",
    "description",
}  # fmt: skip
TRACE_POSTED = {
    "session_id", "agent", "share", "path", "files_copied", "bytes_copied", "completeness",
}  # fmt: skip
TRACE_SUMMARY = {
    "agent", "session_id", "harness", "model", "share", "completeness", "promoted_at",
    "started_at", "total_tokens", "tool_calls", "result_ref", "summary_excerpt", "path",
    "primary_log_file",
}  # fmt: skip
TRACE_RECORD = {"agent", "session_id", "frontmatter", "body", "path", "log_files"}
TOKEN_TOTALS = {"total", "input", "output", "cache_read", "cache_creation", "reasoning"}
STATS = {
    "tokens", "cost_usd", "sessions_counted", "sessions_missing_tokens", "agents_reporting",
    "by_model", "by_agent", "by_day", "generated_at",
}  # fmt: skip
DIGEST = {
    "agents", "taskforces", "channels", "leaderboard", "recent_messages", "recent_results", "inbox",
    "updates", "watching", "stats", "generated_at",
}  # fmt: skip
DIGEST_STATS = {"total_tokens", "sessions_counted", "agents_reporting"}
WATCHING = {"max_wait_s", "fresh_s", "watching", "longpoll"}
WATCHING_ENTRY = {"last_poll_age_s", "mode", "stream"}
DISCOVERY = {
    "service", "collab", "org", "central_bucket", "score_field", "score_unit", "score_order",
    "docs", "conventions", "endpoints",
}  # fmt: skip
CONVENTIONS = {
    "filenames", "mentions", "polling", "refs", "results_frontmatter", "broadcasts",
    "human_posts", "verification", "taskforces",
}  # fmt: skip
ME = {"hf_user", "handle", "is_member", "is_organizer"}
CHANNEL_SUBSCRIBED = {"channel", "handle", "subscribed", "changed", "notify"}
TASKFORCE_CREATED = {"name", "via", "path", "created"}
TASKFORCE_POSTED = {"kind", "filename", "via", "path"}
TASKFORCE_SUMMARY = {
    "name", "creator", "created", "readme_excerpt", "contributors", "file_count", "note_count",
    "last_activity",
}  # fmt: skip
TASKFORCE_DETAIL = {
    "name", "creator", "created", "updated", "readme", "contributors", "file_count",
    "note_count", "recent_notes",
}  # fmt: skip
TASKFORCE_DIGEST = {"count", "newest"}

# agent-collabs' share_trace.py manifest dialect: `usage{...}` and `activity{tool_calls}`.
UPSTREAM_USAGE = {
    "input_tokens": 1000,
    "output_tokens": 200,
    "cache_read_input_tokens": 5000,
    "cache_creation_input_tokens": 300,
    "total_tokens": 6500,
}


def upstream_manifest(session: str, *, usage: Any = UPSTREAM_USAGE, **extra: Any) -> str:
    fields: dict[str, Any] = {
        "schema_version": 1,
        "harness": "claude-code",
        "session_id": session,
        "model": "claude-opus-4-8",
        "started_at": "2026-06-25T13:50:11Z",
        "ended_at": "2026-06-25T14:30:11Z",
        **({"usage": usage} if usage is not None else {}),
        "activity": {"tool_calls": 18, "tool_calls_by_name": {"Bash": 18}},
        **extra,
    }
    return "---\n" + yaml.safe_dump(fields, sort_keys=False) + "---\n\nSwept BPE vocab; 32k won.\n"


def has(body: Any, keys: set[str]) -> None:
    """`body` is a mapping carrying every key of `keys` (it may carry more)."""
    assert isinstance(body, dict), body
    missing = keys - set(body)
    assert not missing, f"missing {sorted(missing)} in {sorted(body)}"
