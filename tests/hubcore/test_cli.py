"""`agenthub hubcore …`: refusals reach the operator as a code, the offending rows and a hint."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from agenthub.cli import app as cli
from agenthub.hubcore.bundlefile import write_bundle
from tests.hubcore.bundles import bundle, message, uid


def invoke(args: list[str], env: dict[str, str] | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(cli, args, env=env)
    return result.exit_code, result.output


def test_import_of_a_tampered_bundle_names_the_rows_and_writes_nothing(
    hubcore_url: str, tmp_path: Path
) -> None:
    b = bundle([message(1), message(2, thread_id=uid(77))])
    path = tmp_path / "b.json"
    write_bundle(b, path)
    env = {"HUBCORE_DATABASE_URL": hubcore_url}
    code, output = invoke(
        ["hubcore", "import", str(path), "--expected-hash", b["content_hash"], "--apply"], env
    )
    assert code == 2
    assert "missing_thread_roots" in output and uid(2) in output and "hint:" in output
    good = bundle([message(1)])
    write_bundle(good, path)
    code, output = invoke(
        ["hubcore", "import", str(path), "--expected-hash", good["content_hash"], "--apply"], env
    )
    assert code == 0 and "imported" in output


def test_import_of_a_file_that_is_not_a_bundle_is_refused(hubcore_url: str, tmp_path: Path) -> None:
    env = {"HUBCORE_DATABASE_URL": hubcore_url}
    for content in ("[1, 2]", "{not json"):
        path = tmp_path / "x.json"
        path.write_text(content)
        code, output = invoke(["hubcore", "import", str(path), "--expected-hash", "h"], env)
        assert code == 2 and "malformed_bundle" in output


def test_capture_needs_exactly_one_source(tmp_path: Path) -> None:
    out = str(tmp_path / "b.json")
    assert invoke(["hubcore", "capture", "--out", out])[0] == 2
    both = ["--source-db", "sqlite:///x.db", "--from-statehub", "http://127.0.0.1:9"]
    assert invoke(["hubcore", "capture", *both, "--out", out])[0] == 2


def test_capture_of_an_unreachable_source_fails_with_a_hint(tmp_path: Path) -> None:
    code, output = invoke(
        [
            "hubcore",
            "capture",
            "--from-statehub",
            "http://127.0.0.1:9",
            "--out",
            str(tmp_path / "b"),
        ]
    )
    assert code == 2 and "capture_failed" in output and "hint:" in output
    assert not (tmp_path / "b").exists()


def test_serve_refuses_to_enable_reads_without_a_token(hubcore_url: str) -> None:
    env = {"HUBCORE_DATABASE_URL": hubcore_url, "HUB_CORE_STATEHUB_INBOX_READS": "1"}
    code, output = invoke(["hubcore", "serve", "--port", "1"], env)
    assert code == 2 and "HUB_CORE_OPERATOR_TOKEN" in output


def test_evidence_is_written_beside_the_bundle(tmp_path: Path) -> None:
    b = bundle([message(1, body="a secret body")])
    evidence = write_bundle(b, tmp_path / "b.json")
    assert "a secret body" not in evidence.read_text()
    assert json.loads(evidence.read_text())["content_hash"] == b["content_hash"]
