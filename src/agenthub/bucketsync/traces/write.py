"""Trace & stats sharing (seed §10): agents promote a session's `manifest.md` (and, with
`share: full`, the one native log it declares) from `traces/<session>/` in their scratch
bucket; the library lives at `traces/{agent}/{session}/` in the central bucket.

Records key on (agent, session) and are updatable: a re-POST replaces the manifest and
can upgrade `stats` to `full`; a later `stats` re-POST never drops a log already shared.
Reads are in `read.py`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import UTC, datetime
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
SERVER_FIELDS = ("agent", "promoted_at", "via", "share", "completeness", "log_files")
SESSION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
SOURCE_PATH_RE = re.compile(r"^traces/([^/]+)/$")
SOURCE_HINT = "promote the folder: hf://buckets/{ORG}/{COLLAB_SLUG}-{agent}/traces/<session>/"


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
        if value is not None and parse_moment(value) is None:
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


def parse_moment(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def completeness(fm: Mapping[str, Any]) -> str:
    """`full` iff a known-harness adapter delivered tokens and tool calls (BS-10.9)."""
    tokens = fm.get("tokens")
    has_tokens = isinstance(tokens, Mapping) and any(v is not None for v in tokens.values())
    has_tools = isinstance(fm.get("tool_calls"), int)
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
    files = {e.path: e for e in hub.store.list(source.bucket, source.path, recursive=True)}
    manifest_entry = files.get(source.path + MANIFEST)
    data = hub.store.read(source.bucket, source.path + MANIFEST) if manifest_entry else None
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
    if share == "full":
        native = client.get("native_log_file")
        if not isinstance(native, str) or native == MANIFEST or "/" in native:
            raise InvalidPath(
                "share: full needs manifest.native_log_file naming one file beside the manifest",
                hint="run share_trace.py --full, which declares the session log it uploads",
            )
        naming.validate_components(native)
        entry = files.get(source.path + native)
        if entry is None:
            raise InvalidPath(
                f"the declared log {native!r} is not in {source_uri}",
                hint=f"upload it to {source_uri}{native} first",
            )
        if entry.size > hub.settings.sync_max_bytes:
            raise SyncTooLarge(
                f"{native} is {entry.size} bytes; a full share copies at most "
                f"{hub.settings.sync_max_bytes}",
                hint="share stats only",
            )
        copies.append((source.bucket, entry.content_hash, dest + native))
        if native not in log_files:
            log_files.append(native)
    elif previous is not None and previous.frontmatter.get("share") == "full":
        share = "full"  # a stats re-POST never takes back a log already shared

    stamped = {
        **client,
        "agent": source.agent_id,
        "promoted_at": hub.clock.now().isoformat(timespec="milliseconds").replace("+00:00", "Z"),
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
        "path": dest + MANIFEST,
        "share": share,
        "completeness": stamped["completeness"],
        "log_files": log_files,
    }


# -- read -----------------------------------------------------------------------------------
