"""Trace & stats sharing (seed §10): agents promote a session's `manifest.md` (and, with
`share: full`, the one native log it declares) from `traces/<session>` (with or without
the trailing slash) in their scratch bucket; the library lives at
`traces/{agent}/{session}/` in the central bucket.

Two manifest dialects are read (docs/compatibility.md): ours (`tokens{input, output,
cache_read, cache_creation}`, `tool_calls`) and agent-collabs' (`usage{total_tokens,
input_tokens, output_tokens, cache_read[_input]_tokens, cache_creation[_input]_tokens,
reasoning_tokens}`, `activity{tool_calls}`). `usage_of` maps both onto one shape; what a
manifest says is counted as it says it (no de-duplication of a client's own counting).

Records key on (agent, session) and are updatable: a re-POST replaces the manifest and
can upgrade `stats` to `full`; a later `stats` re-POST never drops a log already shared.
Reads are in `read.py`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from agenthub.bucketsync.core import frontmatter, naming
from agenthub.bucketsync.core.hub import CallerInfo, Hub
from agenthub.bucketsync.core.naming import SourceRef
from agenthub.bucketsync.core.sources import claim_source
from agenthub.bucketsync.errors import (
    InvalidFrontmatter,
    InvalidPath,
    InvalidRequest,
    SyncTooLarge,
)
from agenthub.bucketsync.storage.base import Batch

TRACES = "traces/"
MANIFEST = "manifest.md"
SHARES = ("stats", "full")
ADAPTED_HARNESSES = ("claude-code", "codex")
TOKEN_FIELDS = ("input", "output", "cache_read", "cache_creation")
# The project totals' fields (agent-collabs' `TokenTotals`): ours plus `total`, `reasoning`.
TOTAL_FIELDS = ("total", *TOKEN_FIELDS, "reasoning")
# agent-collabs' `usage.<key>` -> our field; both spellings of the cache counts are read.
USAGE_KEYS = {
    "total_tokens": "total",
    "input_tokens": "input",
    "output_tokens": "output",
    "cache_read_tokens": "cache_read",
    "cache_read_input_tokens": "cache_read",
    "cache_creation_tokens": "cache_creation",
    "cache_creation_input_tokens": "cache_creation",
    "reasoning_tokens": "reasoning",
}
SERVER_FIELDS = ("agent", "promoted_at", "via", "share", "completeness", "log_files")
SESSION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
SOURCE_PATH_RE = re.compile(r"^traces/([^/]+)/?$")
SOURCE_HINT = "promote the folder: hf://buckets/{ORG}/{COLLAB_SLUG}-{agent}/traces/<session>"


def trace_dir(agent_id: str, session: str) -> str:
    return f"{TRACES}{agent_id}/{session}/"


# -- validation -------------------------------------------------------------------------


def validate_manifest(fm: Mapping[str, Any], session: str) -> None:
    """Lenient (BS-10.4): only schema_version, harness and session_id are required; the
    stats are type-checked when present; `null` means unknown and is never read as 0."""
    for name in ("schema_version", "harness", "session_id"):
        if fm.get(name) in (None, ""):
            raise InvalidFrontmatter(
                f"manifest is missing {name!r}",
                hint="share_trace.py writes schema_version, harness and session_id",
            )
    if str(fm["session_id"]) != session:
        raise InvalidPath(
            f"manifest session_id {fm['session_id']!r} does not match the folder {session!r}",
            hint="promote traces/<session_id>/ with the manifest of that session",
        )
    tokens = fm.get("tokens")
    if tokens is not None:
        if not isinstance(tokens, Mapping):
            raise InvalidFrontmatter("tokens must be a mapping of token counts or null")
        for name, value in tokens.items():
            _count(f"tokens.{name}", value)
    by_model = fm.get("tokens_by_model")
    if by_model is not None:
        if not isinstance(by_model, Mapping):
            raise InvalidFrontmatter("tokens_by_model must map a model to its token counts")
        for model, counts in by_model.items():
            if not isinstance(counts, Mapping):
                raise InvalidFrontmatter(f"tokens_by_model.{model} must be a mapping")
            for name, value in counts.items():
                _count(f"tokens_by_model.{model}.{name}", value)
    usage = fm.get("usage")
    if usage is not None:
        if not isinstance(usage, Mapping):
            raise InvalidFrontmatter("usage must be a mapping of token counts or null")
        for name in USAGE_KEYS:
            _count(f"usage.{name}", usage.get(name))
    activity = fm.get("activity")
    if activity is not None:
        if not isinstance(activity, Mapping):
            raise InvalidFrontmatter("activity must be a mapping or null")
        _count("activity.tool_calls", activity.get("tool_calls"))
    _count("tool_calls", fm.get("tool_calls"))
    cost = fm.get("cost_usd")
    if cost is not None and (
        isinstance(cost, bool)
        or not isinstance(cost, int | float)
        or not math.isfinite(cost)
        or cost < 0
    ):
        raise InvalidFrontmatter(f"cost_usd must be a non-negative number or null, got {cost!r}")
    for name in ("started_at", "ended_at"):
        value = fm.get(name)
        if value is not None and naming.parse_moment(value) is None:
            raise InvalidFrontmatter(
                f"{name} {value!r} is not a timestamp", hint=f"{name}: 2026-03-02T10:00:00Z"
            )


def _count(name: str, value: Any) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidFrontmatter(
            f"{name} must be a non-negative integer or null (unknown), got {value!r}"
        )


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def usage_of(fm: Mapping[str, Any]) -> dict[str, int] | None:
    """The token counts a manifest reports, in either dialect, keyed by `TOTAL_FIELDS`;
    None when it reports none (unknown, never 0). `total` is the manifest's own total
    when it states one, else the sum of the parts it reports."""
    counts: dict[str, int] = {}
    tokens = fm.get("tokens")
    if isinstance(tokens, Mapping):
        for name in (*TOKEN_FIELDS, "total", "reasoning"):
            value = _int(tokens.get(name))
            if value is not None:
                counts[name] = value
    usage = fm.get("usage")
    if isinstance(usage, Mapping):
        for key, name in USAGE_KEYS.items():
            value = _int(usage.get(key))
            if value is not None and name not in counts:
                counts[name] = value
    if not counts:
        return None
    if "total" not in counts:
        counts["total"] = sum(counts.get(name, 0) for name in TOKEN_FIELDS)
    return counts


def tool_calls_of(fm: Mapping[str, Any]) -> int | None:
    """`tool_calls` (ours) or `activity.tool_calls` (agent-collabs'); None when unknown."""
    mine = _int(fm.get("tool_calls"))
    if mine is not None:
        return mine
    activity = fm.get("activity")
    return _int(activity.get("tool_calls")) if isinstance(activity, Mapping) else None


def completeness(fm: Mapping[str, Any]) -> str:
    """`full` iff a known-harness adapter delivered tokens and tool calls (BS-10.9)."""
    has_tokens = usage_of(fm) is not None
    has_tools = tool_calls_of(fm) is not None
    return (
        "full" if fm.get("harness") in ADAPTED_HARNESSES and has_tokens and has_tools else "partial"
    )


# -- promote ------------------------------------------------------------------------------


def promote_trace(
    hub: Hub, source_uri: str, share: str | None, *, caller_info: CallerInfo
) -> dict[str, Any]:
    share = share or "stats"
    if share not in SHARES:
        raise InvalidRequest(f"share must be 'stats' or 'full', got {share!r}")

    def session_of(source: SourceRef) -> str:
        match = SOURCE_PATH_RE.match(source.path)
        if match is None or not SESSION_RE.match(match.group(1)):
            raise InvalidPath(f"{source_uri} is not a traces/<session>/ folder", hint=SOURCE_HINT)
        return match.group(1)

    source = claim_source(hub, source_uri, check=session_of)
    session = session_of(source)
    folder = source.path.rstrip("/") + "/"  # both forms name the same folder
    files = {e.path: e for e in hub.store.list(source.bucket, folder, recursive=True)}
    manifest_entry = files.get(folder + MANIFEST)
    data = hub.store.read(source.bucket, folder + MANIFEST) if manifest_entry else None
    if data is None:
        raise InvalidPath(
            f"{source_uri} has no {MANIFEST}",
            hint="run share_trace.py, which writes traces/<session>/manifest.md first",
        )
    document = frontmatter.parse_strict(data)
    client = {k: v for k, v in document.frontmatter.items() if k not in SERVER_FIELDS}
    validate_manifest(client, session)

    dest = trace_dir(source.agent_id, session)
    previous = hub.read_model.record(dest + MANIFEST, TRACES)
    log_files: list[str] = list((previous.frontmatter.get("log_files") if previous else None) or [])
    copies = []
    bytes_copied = 0
    if share == "full":
        native = client.get("native_log_file")
        if not isinstance(native, str) or not native.strip():
            raise InvalidFrontmatter(
                "share: full needs manifest.native_log_file naming the session log",
                hint="run share_trace.py --full, which declares the session log it uploads",
            )
        native = native.strip()
        if native == MANIFEST or "/" in native:
            raise InvalidPath(
                "share: full needs manifest.native_log_file naming one file beside the manifest",
                hint="run share_trace.py --full, which declares the session log it uploads",
            )
        naming.validate_components(native)
        entry = files.get(folder + native)
        if entry is None:
            raise InvalidPath(
                f"the declared log {native!r} is not in {source_uri}",
                hint=f"upload it to {source_uri.rstrip('/')}/{native} first",
            )
        if entry.size > hub.settings.sync_max_bytes:
            raise SyncTooLarge(
                f"{native} is {entry.size} bytes; a full share copies at most "
                f"{hub.settings.sync_max_bytes}",
                hint="share stats only",
            )
        copies.append((source.bucket, entry.content_hash, dest + native))
        bytes_copied = entry.size
        if native not in log_files:
            log_files.append(native)
    elif previous is not None and previous.frontmatter.get("share") == "full":
        share = "full"  # a stats re-POST never takes back a log already shared

    stamped = {
        **client,
        "agent": source.agent_id,
        "promoted_at": naming.iso_now(hub.clock.now(), "milliseconds"),
        "via": "bucket",
        "share": share,
        "completeness": completeness(client),
        "log_files": log_files,
    }
    rendered = frontmatter.render(stamped, document.body)
    if copies:  # the log lands first, so a visible full manifest never lacks its log
        hub.store.write_batch(hub.central, Batch(copies=copies))
    hub.write_central([(dest + MANIFEST, rendered)])
    hub.audit.record(
        agent_id=source.agent_id,
        route="/v1/traces",
        via="bucket",
        source=source_uri,
        target_path=dest + MANIFEST,
        size=len(rendered),
        status_code=201,
        caller_ip=caller_info.ip,
        user_agent=caller_info.user_agent,
    )
    return {
        "agent": source.agent_id,
        "session_id": session,
        "path": dest,  # the folder, as agent-collabs answers (its client links to it)
        "manifest_path": dest + MANIFEST,
        "files_copied": len(copies),
        "bytes_copied": bytes_copied,
        "share": share,
        "completeness": stamped["completeness"],
        "log_files": [dest + name for name in log_files],  # central paths, as listed
    }


# -- read -----------------------------------------------------------------------------------
