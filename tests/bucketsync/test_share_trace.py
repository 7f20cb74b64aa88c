"""`clients/share_trace.py`: the Claude Code and Codex usage adapters (BS-10.14), on
session logs built here from the documented line shapes (never real logs)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agenthub.bucketsync.clients import share_trace
from agenthub.bucketsync.clients.share_trace import (
    ShareError,
    claude_code_family,
    claude_code_stats,
    codex_stats,
    manifest,
)

SESSION = "11111111-2222-4333-8444-555555555555"
THREAD = "01950000-aaaa-7bbb-8ccc-000000000001"
SCRIPT = Path(share_trace.__file__)


def write_jsonl(path: Path, lines: list[Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n",
        encoding="utf-8",
    )
    return path


def assistant(
    msg: str,
    req: str | None,
    *,
    output: int,
    at: str,
    content: list[dict[str, Any]] | None = None,
    sidechain: bool = False,
    model: str = "claude-sonnet-4-5-20250929",
    cache_read: int = 15000,
) -> dict[str, Any]:
    line: dict[str, Any] = {
        "type": "assistant",
        "uuid": f"a-{msg}-{output}",
        "isSidechain": sidechain,
        "sessionId": SESSION,
        "timestamp": at,
        "message": {
            "id": msg,
            "role": "assistant",
            "model": model,
            "content": content or [{"type": "text", "text": "..."}],
            "usage": {
                "input_tokens": 12,
                "cache_creation_input_tokens": 800,
                "cache_read_input_tokens": cache_read,
                "output_tokens": output,
            },
        },
    }
    if req is not None:
        line["requestId"] = req
    return line


def user(at: str, content: Any = "run the tests") -> dict[str, Any]:
    return {
        "type": "user",
        "sessionId": SESSION,
        "timestamp": at,
        "message": {"role": "user", "content": content},
    }


def bash(tool_id: str) -> list[dict[str, Any]]:
    return [{"type": "tool_use", "id": tool_id, "name": "Bash", "input": {"command": "pytest -q"}}]


# -- Claude Code ---------------------------------------------------------------------


def test_claude_documented_example_counts_one_response(tmp_path: Path) -> None:
    log = write_jsonl(
        tmp_path / f"{SESSION}.jsonl",
        [
            user("2026-03-02T10:00:00.000Z"),
            assistant("msg_T1", "req_T1", output=4, at="2026-03-02T10:00:02.100Z"),
            assistant(
                "msg_T1",
                "req_T1",
                output=61,
                at="2026-03-02T10:00:02.900Z",
                content=bash("toolu_T1"),
            ),
        ],
    )

    stats = claude_code_stats([log])

    assert stats.tokens is not None
    assert stats.tokens.as_dict() == {
        "input": 12,
        "output": 61,
        "cache_read": 15000,
        "cache_creation": 800,
    }
    assert stats.tool_calls == 1
    assert stats.tool_calls_by_name == {"Bash": 1}
    assert stats.model == "claude-sonnet-4-5-20250929"
    assert (stats.started_at, stats.ended_at) == (
        "2026-03-02T10:00:00.000Z",
        "2026-03-02T10:00:02.900Z",
    )
    assert stats.session_id == SESSION


def test_claude_noise_is_ignored(tmp_path: Path) -> None:
    """Malformed lines, summaries without timestamps, `<synthetic>` errors, string
    content and `progress` lines that mirror a subagent's usage add nothing."""
    log = write_jsonl(
        tmp_path / f"{SESSION}.jsonl",
        [
            "{not json",
            {"type": "summary", "summary": "title", "leafUuid": "x"},
            user("2026-03-02T10:00:00.000Z", content="plain string content"),
            assistant("msg_A", "req_A", output=10, at="2026-03-02T10:00:01.000Z"),
            {
                **assistant(
                    "msg_E", "req_E", output=0, at="2026-03-02T10:00:01.500Z", model="<synthetic>"
                )
            },
            {
                "type": "progress",
                "timestamp": "2026-03-02T10:00:01.700Z",
                "data": {
                    "type": "agent_progress",
                    "message": {
                        "message": assistant("msg_P", "req_P", output=999, at="x")["message"]
                    },
                },
            },
            ["a", "list", "line"],
        ],
    )

    stats = claude_code_stats([log])

    assert stats.tokens is not None and stats.tokens.output == 10


def test_claude_missing_request_id_dedupes_by_message_id(tmp_path: Path) -> None:
    log = write_jsonl(
        tmp_path / f"{SESSION}.jsonl",
        [
            assistant("msg_A", None, output=5, at="2026-03-02T10:00:01.000Z"),
            assistant("msg_A", None, output=90, at="2026-03-02T10:00:02.000Z"),
        ],
    )
    stats = claude_code_stats([log])
    assert stats.tokens is not None and stats.tokens.output == 90


def test_claude_sidechain_replay_and_subagent_files_count_once(tmp_path: Path) -> None:
    """A /btw replay (same message.id, new requestId, isSidechain) is dropped; a
    subagent's own response under <session-id>/subagents/ is counted; a copy of a
    parent response in a subagent file counts once across the family."""
    session_file = write_jsonl(
        tmp_path / f"{SESSION}.jsonl",
        [
            assistant(
                "msg_A", "req_A", output=50, at="2026-03-02T10:00:01.000Z", content=bash("toolu_1")
            )
        ],
    )
    write_jsonl(
        tmp_path / SESSION / "subagents" / "agent-x.jsonl",
        [
            assistant(
                "msg_A", "req_REPLAY", output=50, at="2026-03-02T10:00:03.000Z", sidechain=True
            ),
            assistant("msg_A", "req_A", output=50, at="2026-03-02T10:00:01.000Z"),
            assistant(
                "msg_S",
                "req_S",
                output=7,
                at="2026-03-02T10:00:04.000Z",
                sidechain=True,
                model="claude-haiku-4-5",
                cache_read=100,
                content=bash("toolu_2"),
            ),
        ],
    )
    write_jsonl(tmp_path / SESSION / "subagents" / "journal.jsonl", [{"type": "assistant"}])

    family = claude_code_family(session_file)
    stats = claude_code_stats(family)

    assert len(family) == 2
    assert stats.tokens is not None
    assert stats.tokens.output == 57
    assert stats.tokens.cache_read == 15100
    assert stats.tool_calls == 2
    assert set(stats.by_model) == {"claude-sonnet-4-5-20250929", "claude-haiku-4-5"}
    assert stats.model == "claude-sonnet-4-5-20250929"


def test_claude_naive_summation_would_double_count(tmp_path: Path) -> None:
    """The broken variant: summing every assistant line's usage overcounts the split response."""
    lines = [
        assistant("msg_T1", "req_T1", output=4, at="2026-03-02T10:00:02.100Z"),
        assistant("msg_T1", "req_T1", output=61, at="2026-03-02T10:00:02.900Z"),
    ]
    log = write_jsonl(tmp_path / f"{SESSION}.jsonl", lines)
    naive = sum(line["message"]["usage"]["output_tokens"] for line in lines)

    stats = claude_code_stats([log])

    assert naive == 65
    assert stats.tokens is not None and stats.tokens.output == 61


# -- Codex ---------------------------------------------------------------------------


def meta(at: str = "2026-03-02T10:00:00.120Z", **extra: Any) -> dict[str, Any]:
    return {
        "timestamp": at,
        "type": "session_meta",
        "payload": {
            "id": THREAD,
            "timestamp": at,
            "cwd": "/example/proj",
            "originator": "codex_cli_rs",
            "cli_version": "0.120.0",
            "source": "cli",
            **extra,
        },
    }


def turn(model: str, at: str) -> dict[str, Any]:
    return {
        "timestamp": at,
        "type": "turn_context",
        "payload": {"cwd": "/example/proj", "model": model},
    }


def call(kind: str, at: str, **payload: Any) -> dict[str, Any]:
    return {"timestamp": at, "type": "response_item", "payload": {"type": kind, **payload}}


def tokens(at: str, inp: int, cached: int, out: int, reasoning: int = 0) -> dict[str, Any]:
    usage = {
        "input_tokens": inp,
        "cached_input_tokens": cached,
        "output_tokens": out,
        "reasoning_output_tokens": reasoning,
        "total_tokens": inp + out,
    }
    return {
        "timestamp": at,
        "type": "event_msg",
        "payload": {
            "type": "token_count",
            "info": {
                "total_token_usage": usage,
                "last_token_usage": usage,
                "model_context_window": 272000,
            },
            "rate_limits": None,
        },
    }


def rollout(tmp_path: Path, lines: list[Any]) -> Path:
    return write_jsonl(
        tmp_path / "sessions/2026/03/02" / f"rollout-2026-03-02T11-00-00-{THREAD}.jsonl", lines
    )


def test_codex_documented_example_and_reemits(tmp_path: Path) -> None:
    last = tokens("2026-03-02T10:00:04.000Z", 9000, 6000, 400, 256)
    log = rollout(
        tmp_path,
        [
            meta(),
            turn("gpt-5-codex", "2026-03-02T10:00:01.000Z"),
            call(
                "function_call",
                "2026-03-02T10:00:03.000Z",
                name="shell",
                arguments="{}",
                call_id="call_001",
            ),
            last,
            last,  # byte-identical re-emit
            {**last, "timestamp": "2026-03-02T10:00:09.000Z"},  # unchanged total, new time
            {
                "timestamp": "2026-03-02T10:00:10.000Z",
                "type": "event_msg",
                "payload": {"type": "token_count", "info": None, "rate_limits": {}},
            },
        ],
    )

    stats = codex_stats(log)

    assert stats.tokens is not None
    assert stats.tokens.as_dict() == {
        "input": 3000,
        "output": 400,
        "cache_read": 6000,
        "cache_creation": None,
    }
    assert stats.tool_calls == 1
    assert stats.model == "gpt-5-codex"
    assert stats.session_id == THREAD


def test_codex_model_switch_splits_deltas_and_counts_tools(tmp_path: Path) -> None:
    log = rollout(
        tmp_path,
        [
            meta(),
            turn("gpt-5-codex", "2026-03-02T10:00:01.000Z"),
            tokens("2026-03-02T10:00:02.000Z", 1000, 0, 100),
            turn("gpt-5-mini", "2026-03-02T10:00:03.000Z"),
            call(
                "custom_tool_call",
                "2026-03-02T10:00:03.500Z",
                name="apply_patch",
                input="...",
                call_id="c2",
            ),
            call(
                "local_shell_call",
                "2026-03-02T10:00:03.600Z",
                status="completed",
                action={"type": "exec", "command": ["ls"]},
            ),
            call("web_search_call", "2026-03-02T10:00:03.700Z", status="completed"),
            call("mystery_item", "2026-03-02T10:00:03.800Z"),
            tokens("2026-03-02T10:00:04.000Z", 3000, 500, 300),
        ],
    )

    stats = codex_stats(log)

    assert stats.by_model["gpt-5-codex"].output == 100
    assert stats.by_model["gpt-5-mini"].output == 200
    assert stats.tokens is not None and stats.tokens.output == 300
    assert stats.tool_calls == 2


def test_codex_without_token_counts_reports_unknown_not_zero(tmp_path: Path) -> None:
    log = rollout(
        tmp_path, [meta(), call("function_call", "2026-03-02T10:00:03.000Z", name="shell")]
    )
    stats = codex_stats(log)
    assert stats.tokens is None
    assert "tokens: null" in manifest(stats, native_log_file=None)


def test_codex_legacy_flat_header_gives_the_session_id(tmp_path: Path) -> None:
    log = rollout(
        tmp_path,
        [{"id": THREAD, "timestamp": "2025-08-01T10:00:00Z"}, {"type": "message", "role": "user"}],
    )
    assert codex_stats(log).session_id == THREAD


def test_codex_subagent_replayed_parent_totals_are_a_baseline(tmp_path: Path) -> None:
    log = rollout(
        tmp_path,
        [
            meta(source={"subagent": {"thread_spawn": {"parent_thread_id": "p", "depth": 1}}}),
            tokens("2026-03-02T10:00:00.500Z", 50000, 40000, 2000),  # the parent's, replayed
            turn("gpt-5-codex", "2026-03-02T10:00:02.000Z"),
            tokens("2026-03-02T10:00:05.000Z", 51000, 40500, 2100),
        ],
    )
    stats = codex_stats(log)
    assert stats.tokens is not None
    assert stats.tokens.as_dict() == {
        "input": 500,
        "output": 100,
        "cache_read": 500,
        "cache_creation": None,
    }


def test_codex_decreasing_totals_fail_closed(tmp_path: Path) -> None:
    log = rollout(
        tmp_path,
        [
            meta(),
            tokens("2026-03-02T10:00:02.000Z", 1000, 0, 100),
            tokens("2026-03-02T10:00:03.000Z", 10, 0, 1),
        ],
    )
    with pytest.raises(ShareError, match="went down"):
        codex_stats(log)


# -- manifest and command line ----------------------------------------------------------


def test_manifest_frontmatter_is_yaml_with_the_required_fields(tmp_path: Path) -> None:
    import yaml

    log = write_jsonl(
        tmp_path / f"{SESSION}.jsonl",
        [assistant("msg_A", "req_A", output=5, at="2026-03-02T10:00:01.000Z")],
    )
    text = manifest(claude_code_stats([log]), native_log_file=f"{SESSION}.jsonl")

    fields = yaml.safe_load(text.split("---")[1])

    assert fields["schema_version"] == 1
    assert fields["harness"] == "claude-code"
    assert fields["session_id"] == SESSION
    assert fields["tokens"]["output"] == 5
    assert fields["native_log_file"] == f"{SESSION}.jsonl"
    assert fields["client_completeness"] == "full"


def run_script(
    *args: str, env: dict[str, str] | None = None, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        env=env,
        input=stdin,
        timeout=60,
    )


def test_script_runs_standalone_and_dry_run_prints_the_manifest(tmp_path: Path) -> None:
    """One self-contained file: copied out of the package it still runs."""
    copy = tmp_path / "share_trace.py"
    copy.write_text(SCRIPT.read_text())
    log = write_jsonl(tmp_path / "home/.claude/projects/-example-proj" / f"{SESSION}.jsonl",
                      [assistant("msg_A", "req_A", output=5, at="2026-03-02T10:00:01.000Z")])  # fmt: skip
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path / "home"),
        "CLAUDE_CODE_SESSION_ID": SESSION,
    }

    result = subprocess.run(
        [sys.executable, str(copy), "--dry-run"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )

    assert result.returncode == 0, result.stderr
    assert f'session_id: "{SESSION}"' in result.stdout
    assert log.exists()


def test_full_share_needs_confirmation_when_not_interactive(tmp_path: Path) -> None:
    log = write_jsonl(
        tmp_path / f"{SESSION}.jsonl",
        [assistant("msg_A", "req_A", output=5, at="2026-03-02T10:00:01.000Z")],
    )

    result = run_script(
        "--log", str(log), "--full", "--bucket", "acme/c-a", "--url", "http://127.0.0.1:9"
    )

    assert result.returncode == 2
    assert "--yes" in result.stderr


def test_unknown_session_gets_a_clear_error(tmp_path: Path) -> None:
    result = run_script(env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert result.returncode == 2
    assert "--harness and --log" in result.stderr
