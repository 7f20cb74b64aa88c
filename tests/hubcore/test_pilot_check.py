"""`pilot-check`: passes on a faithful import, fails on a wrong one, says what it cannot prove."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from agenthub.cli import app as cli
from agenthub.hubcore.app import create_app
from agenthub.hubcore.bundle_import import import_into
from agenthub.hubcore.bundlefile import PARTS, BundleWriter
from agenthub.hubcore.settings import HubCoreSettings
from agenthub.hubcore.store import Database
from tests.hubcore.bundles import bundle, inbox_bundle, message, rehash
from tests.support.servers import live_server as serving

TOKEN = "check-token"


def check(hubcore_url: str, oracle: dict[str, Any], tmp_path: Path) -> tuple[int, str]:
    path = tmp_path / "oracle.json"
    with BundleWriter(path) as writer:  # the v1 file `agenthub hubcore capture` writes
        for part in PARTS:
            writer.part(part, iter(oracle[part]))
        writer.finish(oracle["source"], oracle["captured_at"])
    settings = HubCoreSettings(
        database_url=hubcore_url, inbox_reads=True, operator_token=TOKEN, inbox_agent="state-hub"
    )
    env = {
        "HUBCORE_DATABASE_URL": hubcore_url,
        "HUB_CORE_OPERATOR_TOKEN": TOKEN,
        "HUB_CORE_STATEHUB_INBOX_AGENT": "state-hub",
    }
    with serving(create_app(settings)) as base:
        args = ["hubcore", "pilot-check", str(path), "--expected-hash", oracle["content_hash"]]
        result = CliRunner().invoke(cli, [*args, "--url", base], env=env)
    return result.exit_code, result.output


def test_pilot_check_passes_on_the_imported_bundle(
    hubcore_url: str, hubcore_db: Database, tmp_path: Path
) -> None:
    b = inbox_bundle()
    import_into(hubcore_db, b, expected_hash=b["content_hash"], apply=True)
    code, output = check(hubcore_url, b, tmp_path)
    assert code == 0, output
    assert "0 failed, 0 not provable" in output


def test_pilot_check_fails_when_the_receiver_serves_other_rows(
    hubcore_url: str, hubcore_db: Database, tmp_path: Path
) -> None:
    served = inbox_bundle()
    import_into(hubcore_db, served, expected_hash=served["content_hash"], apply=True)
    oracle = copy.deepcopy(served)
    oracle["messages"][0]["body"] = "what the source really said"
    code, output = check(hubcore_url, rehash(oracle), tmp_path)
    assert code == 1
    assert "FAIL" in output and "differs in body" in output


def test_pilot_check_says_what_a_snapshot_cannot_prove(
    hubcore_url: str, hubcore_db: Database, tmp_path: Path
) -> None:
    b = bundle([message(1), message(2, to_agent="*")])
    import_into(hubcore_db, b, expected_hash=b["content_hash"], apply=True)
    code, output = check(hubcore_url, b, tmp_path)
    assert code == 0, output
    assert "n/a" in output and "1 not provable" in output
