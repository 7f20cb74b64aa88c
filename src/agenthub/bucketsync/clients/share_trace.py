#!/usr/bin/env python3
"""Share one agent session's usage stats (and, only if asked, its log) with the challenge.

One self-contained file, standard library only. It reads the harness's own
session log, computes comparable numbers client-side, writes a small
`manifest.md` to your scratch bucket under `traces/<session>/`, and promotes it
with `POST /v1/traces`. The Space only ever reads that manifest.

    python3 share_trace.py                      # stats only (tokens, tool calls, model)
    python3 share_trace.py --full               # also the native log; asks first
    python3 share_trace.py --full --yes         # no question (non-interactive)
    python3 share_trace.py --dry-run            # print the manifest, upload nothing

Adapters:
  claude-code  sums per-response usage, one line per (message.id, requestId),
               the largest streaming snapshot wins, sidechain replays dropped,
               across the session file and everything under <session-id>/
  codex        takes the last cumulative `total_token_usage` (re-emits and
               rate-limit-only events change nothing), tool calls from
               function/custom/local-shell call items

Environment: CLAUDE_CODE_SESSION_ID / CLAUDE_CONFIG_DIR (Claude Code),
CODEX_THREAD_ID / CODEX_HOME (Codex), BUCKETSYNC_URL, BUCKETSYNC_TOKEN (local
mode) or the `hf` CLI (Hugging Face buckets), SCRATCH_BUCKET=ORG/NAME.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Iterator

SCHEMA_VERSION = 1
CLIENT_VERSION = "share_trace.py 1"
KNOWN_HARNESSES = ("claude-code", "codex")


class ShareError(Exception):
    """Something the user must fix; the message says what."""


# -- normalised stats ---------------------------------------------------------------


@dataclass
class Usage:
    input: int | None = 0  # uncached input
    output: int | None = 0
    cache_read: int | None = 0
    cache_creation: int | None = 0  # None: the harness does not report it

    def add(self, other: Usage) -> None:
        for name in ("input", "output", "cache_read", "cache_creation"):
            mine, theirs = getattr(self, name), getattr(other, name)
            both_unknown = mine is None and theirs is None
            setattr(self, name, None if both_unknown else (mine or 0) + (theirs or 0))

    def as_dict(self) -> dict[str, int | None]:
        return {
            "input": self.input,
            "output": self.output,
            "cache_read": self.cache_read,
            "cache_creation": self.cache_creation,
        }


@dataclass
class SessionStats:
    harness: str
    session_id: str
    tokens: Usage | None = None  # None: the log reports no usage (never 0)
    by_model: dict[str, Usage] = field(default_factory=dict)
    tool_calls: int | None = None
    tool_calls_by_name: dict[str, int] = field(default_factory=dict)
    started_at: str | None = None
    ended_at: str | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def model(self) -> str | None:
        if not self.by_model:
            return None
        return max(self.by_model.items(), key=lambda kv: _total(kv[1]))[0]


def _total(usage: Usage) -> int:
    return sum(v or 0 for v in usage.as_dict().values())


def _iso(value: Any) -> str | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _json_lines(path: Path) -> Iterator[dict[str, Any]]:
    """Objects of a JSONL file; malformed lines and non-objects are skipped."""
    with path.open("r", encoding="utf-8", errors="replace") as handle:
        for line in handle:
            line = line.strip()
            if not line:
                continue
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict):
                yield value


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _span(stats: SessionStats, timestamp: Any) -> None:
    moment = _iso(timestamp)
    if moment is None:
        return
    if stats.started_at is None or moment < stats.started_at:
        stats.started_at = moment
    if stats.ended_at is None or moment > stats.ended_at:
        stats.ended_at = moment


# -- Claude Code -------------------------------------------------------------------------


def claude_code_family(session_file: Path) -> list[Path]:
    """The session file plus every transcript under `<session-id>/` (subagents)."""
    family = [session_file]
    nested = session_file.with_suffix("")
    if nested.is_dir():
        family += sorted(p for p in nested.rglob("*.jsonl") if p.name != "journal.jsonl")
    return family


def claude_code_stats(files: Iterable[Path], session_id: str | None = None) -> SessionStats:
    kept: dict[str, tuple[dict[str, Any], bool]] = {}  # dedupe key -> (line, sidechain)
    keys_of_message: dict[str, list[str]] = {}
    tools: dict[str, str] = {}
    stats = SessionStats(harness="claude-code", session_id=session_id or "")
    for path in files:
        for line in _json_lines(path):
            if not stats.session_id and isinstance(line.get("sessionId"), str):
                stats.session_id = line["sessionId"]
            _span(stats, line.get("timestamp"))
            if line.get("type") != "assistant":
                continue  # `progress` lines mirror subagent messages: never count them
            message = line.get("message")
            if not isinstance(message, dict):
                continue
            for block in message.get("content") or []:
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    tool_id = block.get("id")
                    if isinstance(tool_id, str) and tool_id:
                        tools.setdefault(tool_id, str(block.get("name") or "unknown"))
            usage = message.get("usage")
            if not isinstance(usage, dict) or message.get("model") == "<synthetic>":
                continue
            _keep_claude_line(kept, keys_of_message, line, message)
    if kept:
        stats.tokens = Usage()
        for line, _sidechain in kept.values():
            message = line["message"]
            usage = _claude_usage(message["usage"])
            stats.tokens.add(usage)
            model = message.get("model") if isinstance(message.get("model"), str) else "unknown"
            stats.by_model.setdefault(model, Usage()).add(usage)
    stats.tool_calls = len(tools)
    for name in tools.values():
        stats.tool_calls_by_name[name] = stats.tool_calls_by_name.get(name, 0) + 1
    return stats


def _keep_claude_line(
    kept: dict[str, tuple[dict[str, Any], bool]],
    keys_of_message: dict[str, list[str]],
    line: dict[str, Any],
    message: dict[str, Any],
) -> None:
    """One line per response: key (message.id, requestId), or message.id alone when
    requestId is missing or either line is a sidechain (a replay of the parent)."""
    message_id = message.get("id")
    sidechain = line.get("isSidechain") is True
    if not isinstance(message_id, str) or not message_id:
        kept[f"line:{len(kept)}"] = (line, sidechain)  # nothing to dedupe on
        return
    request_id = line.get("requestId")
    key = f"{message_id} {request_id}" if isinstance(request_id, str) and request_id else message_id
    siblings = keys_of_message.setdefault(message_id, [])
    rivals = [k for k in siblings if k == key or sidechain or kept[k][1]]
    for rival in rivals:
        if not _better_claude_line(line, sidechain, *kept[rival]):
            return
    for rival in rivals:
        del kept[rival]
        siblings.remove(rival)
    kept[key] = (line, sidechain)
    siblings.append(key)


def _claude_usage(usage: dict[str, Any]) -> Usage:
    creation = usage.get("cache_creation")
    if isinstance(creation, dict) and creation:
        cache_creation = sum(_int(v) for v in creation.values())
    else:
        cache_creation = _int(usage.get("cache_creation_input_tokens"))
    return Usage(
        input=_int(usage.get("input_tokens")),
        output=_int(usage.get("output_tokens")),
        cache_read=_int(usage.get("cache_read_input_tokens")),
        cache_creation=cache_creation,
    )


def _better_claude_line(
    line: dict[str, Any], sidechain: bool, old: dict[str, Any], old_sidechain: bool
) -> bool:
    if sidechain != old_sidechain:
        return not sidechain  # the parent's own line beats a replay
    new_total, old_total = (_total(_claude_usage(x["message"]["usage"])) for x in (line, old))
    if new_total != old_total:
        return new_total > old_total  # streaming snapshots only grow
    return "speed" in line["message"]["usage"] and "speed" not in old["message"]["usage"]


def find_claude_code_session(session_id: str) -> Path:
    roots = [os.environ.get("CLAUDE_CONFIG_DIR", "")] if os.environ.get("CLAUDE_CONFIG_DIR") else []
    roots = [r for part in roots for r in part.split(",") if r] or [
        str(Path.home() / ".claude"),
        str(Path.home() / ".config" / "claude"),
    ]
    for root in roots:
        hits = glob.glob(os.path.join(root, "projects", "*", f"{session_id}.jsonl"))
        if hits:
            return Path(hits[0])
    raise ShareError(
        f"no Claude Code session file {session_id}.jsonl under {', '.join(roots)}; "
        "pass --log PATH to name it"
    )


# -- Codex -------------------------------------------------------------------------------

CODEX_CALLS = ("function_call", "custom_tool_call", "local_shell_call")


def codex_stats(path: Path) -> SessionStats:
    stats = SessionStats(harness="codex", session_id="")
    last_total: dict[str, Any] | None = None
    previous: tuple[int, ...] | None = None
    model = "unknown"
    baseline: Usage | None = None
    first_second: str | None = None
    spawned = False
    for index, line in enumerate(_json_lines(path)):
        kind, payload = line.get("type"), line.get("payload")
        if not isinstance(payload, dict):
            if index == 0 and isinstance(line.get("id"), str):  # legacy flat header
                stats.session_id = line["id"]
            continue
        _span(stats, line.get("timestamp"))
        if kind == "session_meta":
            if not stats.session_id and isinstance(payload.get("id"), str):
                stats.session_id = payload["id"]
            source = payload.get("source")
            spawned = spawned or (isinstance(source, dict) and "subagent" in source)
            spawned = spawned or bool(payload.get("forked_from_id"))
            first_second = (line.get("timestamp") or "")[:19]
        elif kind == "turn_context" and isinstance(payload.get("model"), str):
            model = payload["model"]
        elif kind == "response_item" and payload.get("type") in CODEX_CALLS:
            stats.tool_calls = (stats.tool_calls or 0) + 1
            name = str(payload.get("name") or payload.get("type"))
            stats.tool_calls_by_name[name] = stats.tool_calls_by_name.get(name, 0) + 1
        elif kind == "event_msg" and payload.get("type") == "token_count":
            info = payload.get("info")
            total = info.get("total_token_usage") if isinstance(info, dict) else None
            if not isinstance(total, dict):
                continue  # rate-limit-only event
            vector = tuple(
                _int(total.get(k)) for k in ("input_tokens", "cached_input_tokens", "output_tokens")
            )
            if previous is not None and sum(vector) < sum(previous):
                raise ShareError(f"{path}: cumulative token_count went down; refusing to guess")
            # A spawned thread replays the parent's totals in its first second: a baseline.
            if spawned and baseline is None and (line.get("timestamp") or "")[:19] == first_second:
                baseline = _codex_usage(total)
                previous = vector
                continue
            if vector != previous:
                delta = _codex_usage(total)
                if last_total is not None:
                    delta = _minus(delta, _codex_usage(last_total))
                elif baseline is not None:
                    delta = _minus(delta, baseline)
                stats.by_model.setdefault(model, Usage(cache_creation=None)).add(delta)
                last_total, previous = total, vector
    if stats.tool_calls is None:
        stats.tool_calls = 0
    if last_total is not None:
        stats.tokens = _codex_usage(last_total)
        if baseline is not None:
            stats.tokens = _minus(stats.tokens, baseline)
    if not stats.session_id:  # rollout-<local time>-<thread uuid>.jsonl
        stats.session_id = "-".join(path.stem.split("-")[-5:])
    return stats


def _codex_usage(total: dict[str, Any]) -> Usage:
    cached = _int(total.get("cached_input_tokens"))
    return Usage(
        input=max(0, _int(total.get("input_tokens")) - cached),
        output=_int(total.get("output_tokens")),
        cache_read=cached,
        cache_creation=None,  # Codex does not report it: unknown, not zero
    )


def _minus(a: Usage, b: Usage) -> Usage:
    return Usage(
        input=max(0, (a.input or 0) - (b.input or 0)),
        output=max(0, (a.output or 0) - (b.output or 0)),
        cache_read=max(0, (a.cache_read or 0) - (b.cache_read or 0)),
        cache_creation=None
        if a.cache_creation is None
        else max(0, a.cache_creation - (b.cache_creation or 0)),
    )


def find_codex_session(thread_id: str) -> Path:
    home = Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex")
    for sub in ("sessions/**", "archived_sessions"):  # the active copy wins
        hits = glob.glob(str(home / sub / f"rollout-*-{thread_id}.jsonl"), recursive=True)
        if hits:
            return Path(sorted(hits)[0])
    raise ShareError(f"no Codex rollout for thread {thread_id} under {home}; pass --log PATH")


# -- manifest ----------------------------------------------------------------------------


def manifest(stats: SessionStats, *, native_log_file: str | None) -> str:
    """`manifest.md`: YAML frontmatter (written as JSON values, which YAML reads) and a summary."""
    complete = (
        stats.harness in KNOWN_HARNESSES
        and stats.tokens is not None
        and stats.tool_calls is not None
    )
    fields: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "harness": stats.harness,
        "session_id": stats.session_id,
        "model": stats.model,
        "tokens": stats.tokens.as_dict() if stats.tokens else None,
        "tokens_by_model": {m: u.as_dict() for m, u in sorted(stats.by_model.items())},
        "tool_calls": stats.tool_calls,
        "tool_calls_by_name": dict(sorted(stats.tool_calls_by_name.items())),
        "started_at": stats.started_at,
        "ended_at": stats.ended_at,
        "client": CLIENT_VERSION,
        "client_completeness": "full" if complete else "partial",
    }
    if native_log_file:
        fields["native_log_file"] = native_log_file
    head = "\n".join(f"{key}: {json.dumps(value, sort_keys=True)}" for key, value in fields.items())
    tokens = stats.tokens.as_dict() if stats.tokens else {}
    summary = (
        ", ".join(f"{k} {v}" for k, v in tokens.items() if v is not None) or "no usage reported"
    )
    return f"---\n{head}\n---\n\nSession {stats.session_id} ({stats.harness}): {summary}; {stats.tool_calls} tool calls.\n"


# -- upload and promote --------------------------------------------------------------------


def upload(local: Path, bucket: str, path: str, *, url: str | None, token: str | None) -> None:
    """Into the agent's own scratch bucket: bucket-sync's local API, or the `hf` CLI."""
    if url and token:
        request = urllib.request.Request(
            f"{url.rstrip('/')}/local/buckets/{bucket}/files/{path}",
            data=local.read_bytes(),
            method="PUT",
            headers={
                "Authorization": f"Bearer {token}",
                "Content-Type": "application/octet-stream",
            },
        )
        _send(request)
        return
    command = ["hf", "buckets", "cp", str(local), f"hf://buckets/{bucket}/{path}"]
    try:
        subprocess.run(command, check=True)
    except FileNotFoundError:
        raise ShareError("the `hf` CLI is not installed (pip install huggingface_hub)") from None
    except subprocess.CalledProcessError as exc:
        raise ShareError(f"`{' '.join(command)}` failed with exit code {exc.returncode}") from None


def promote(url: str, bucket: str, session_id: str, share: str) -> dict[str, Any]:
    body = json.dumps({"source": f"hf://buckets/{bucket}/traces/{session_id}/", "share": share})
    request = urllib.request.Request(
        f"{url.rstrip('/')}/v1/traces",
        data=body.encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    result: dict[str, Any] = json.loads(_send(request) or b"{}")
    return result


def _send(request: urllib.request.Request) -> bytes:
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            data: bytes = response.read()
            return data
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode("utf-8", "replace")[:500]
        raise ShareError(
            f"{request.get_method()} {request.full_url} -> {exc.code}: {detail}"
        ) from None
    except urllib.error.URLError as exc:
        raise ShareError(f"{request.full_url} unreachable: {exc.reason}") from None


# -- command line -----------------------------------------------------------------------------


def collect(args: argparse.Namespace) -> tuple[SessionStats, Path]:
    harness = args.harness
    if harness is None:
        if args.log:
            harness = "codex" if Path(args.log).name.startswith("rollout-") else "claude-code"
        elif os.environ.get("CLAUDE_CODE_SESSION_ID"):
            harness = "claude-code"
        elif os.environ.get("CODEX_THREAD_ID"):
            harness = "codex"
        else:
            raise ShareError(
                "cannot tell which session to share: run inside Claude Code or Codex, "
                "or pass --harness and --log PATH"
            )
    if harness == "claude-code":
        session = args.session or os.environ.get("CLAUDE_CODE_SESSION_ID")
        log = Path(args.log) if args.log else find_claude_code_session(session or "")
        return claude_code_stats(claude_code_family(log), session or log.stem), log
    if harness == "codex":
        session = args.session or os.environ.get("CODEX_THREAD_ID")
        log = Path(args.log) if args.log else find_codex_session(session or "")
        return codex_stats(log), log
    raise ShareError(f"unknown harness {harness!r}; known: {', '.join(KNOWN_HARNESSES)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--harness", choices=KNOWN_HARNESSES)
    parser.add_argument(
        "--session", help="session / thread id (default: from the harness's environment)"
    )
    parser.add_argument("--log", help="the session log file (default: found from the session id)")
    parser.add_argument("--full", action="store_true", help="also share the native session log")
    parser.add_argument("--yes", action="store_true", help="do not ask before sharing the log")
    parser.add_argument("--dry-run", action="store_true", help="print the manifest and stop")
    parser.add_argument(
        "--bucket", default=os.environ.get("SCRATCH_BUCKET"), help="your scratch bucket ORG/NAME"
    )
    parser.add_argument(
        "--url", default=os.environ.get("BUCKETSYNC_URL"), help="bucket-sync base URL"
    )
    parser.add_argument(
        "--token", default=os.environ.get("BUCKETSYNC_TOKEN"), help="local-mode bearer token"
    )
    args = parser.parse_args(argv)
    try:
        stats, log = collect(args)
        native = log.name if args.full else None
        text = manifest(stats, native_log_file=native)
        for warning in stats.warnings:
            print(f"warning: {warning}", file=sys.stderr)
        if args.dry_run:
            sys.stdout.write(text)
            return 0
        if not args.bucket or not args.url:
            raise ShareError(
                "set --bucket ORG/NAME (or SCRATCH_BUCKET) and --url (or BUCKETSYNC_URL)"
            )
        if args.full and not args.yes:
            if not sys.stdin.isatty():
                raise ShareError(
                    "--full shares your whole transcript; confirm with --yes when not interactive"
                )
            answer = input(f"Share the full transcript {log} with the challenge? [y/N] ")
            if answer.strip().lower() not in ("y", "yes"):
                print("not shared", file=sys.stderr)
                return 1
        prefix = f"traces/{stats.session_id}/"
        with tempfile.TemporaryDirectory() as tmp:
            manifest_file = Path(tmp) / "manifest.md"
            manifest_file.write_text(text, encoding="utf-8")
            upload(
                manifest_file, args.bucket, prefix + "manifest.md", url=args.url, token=args.token
            )
        if args.full:
            upload(log, args.bucket, prefix + log.name, url=args.url, token=args.token)
        result = promote(args.url, args.bucket, stats.session_id, "full" if args.full else "stats")
        print(json.dumps(result, indent=2, sort_keys=True))
        return 0
    except ShareError as exc:
        print(f"share_trace: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
