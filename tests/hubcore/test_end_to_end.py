"""The pilot end to end: a real State Hub, capture both ways, import, compare reads (step 3)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from typer.testing import CliRunner

from agenthub.cli import app as cli
from agenthub.clock import FrozenClock
from agenthub.hubcore.app import create_app as create_hubcore
from agenthub.hubcore.bundle_rules import SCHEMA
from agenthub.hubcore.canonical import snapshot_hash
from agenthub.hubcore.settings import HubCoreSettings
from agenthub.statehub.app import create_app as create_statehub
from agenthub.statehub.settings import StateHubSettings
from tests.hubcore.statehub_source import READER, populate
from tests.support.servers import live_server as serving

PATH = "/ports/projections/statehub-inbox"
TOKEN = "e2e-operator-token"
CASES: list[dict[str, Any]] = [
    {},
    {"unread_only": "true"},
    {"from_agent": "alice"},
    {"from_agent": "ops"},
    {"from_agent": "carol"},
    {"from_agent": "dave", "unread_only": "true"},
    {"from_agent": "ops", "unread_only": "true"},
    {"limit": 1},
    {"limit": 3},
    {"limit": 1000},
    {"unread_only": "true", "limit": 2},
]


def run(args: list[str], env: dict[str, str] | None = None) -> Any:
    result = CliRunner().invoke(cli, args, env=env)
    assert result.exit_code == 0, result.output
    return result


def hubcore_settings(url: str, *, reads: bool = True) -> HubCoreSettings:
    return HubCoreSettings(
        database_url=url, inbox_reads=reads, operator_token=TOKEN, inbox_agent=READER
    )


def test_captured_inbox_reads_the_same_through_hub_core(
    statehub_url: str, hubcore_url: str, tmp_path: Path
) -> None:
    # State Hub's clock starts two hours back so one message has expired by "now", for both.
    clock = FrozenClock(datetime.now(UTC))
    clock.advance(-7200)
    statehub = create_statehub(StateHubSettings(database_url=statehub_url), clock=clock)
    db_bundle, feed_bundle = tmp_path / "db.json", tmp_path / "feed.json"
    lines_bundle = tmp_path / "feed.jsonl"
    with serving(statehub) as statehub_base, httpx.Client(base_url=statehub_base) as source:
        ids = populate(source, clock)
        run(["hubcore", "capture", "--source-db", statehub_url, "--out", str(db_bundle)])
        run(
            [
                "hubcore",
                "capture",
                "--from-statehub",
                statehub_base,
                "--page-size",
                "7",
                "--out",
                str(feed_bundle),
            ]
        )
        run(
            [
                "hubcore",
                "capture",
                "--from-statehub",
                statehub_base,
                "--format",
                "jsonl",
                "--out",
                str(lines_bundle),
            ]
        )
        clock.advance((datetime.now(UTC) - clock.now()).total_seconds())
        # The oracle: State Hub's own answers over the same frozen rows.
        oracle = [
            source.get("/messages/", params={"to_agent": READER, **case}).json() for case in CASES
        ]

    # Both captures wrote the seed's bundle: one JSON object, its hash the seed's.
    with db_bundle.open() as handle:
        captured = json.load(handle)
    content_hash = captured["content_hash"]
    assert captured["schema"] == SCHEMA and content_hash == snapshot_hash(captured["messages"])
    assert json.loads(feed_bundle.read_text())["content_hash"] == content_hash

    env = {"HUBCORE_DATABASE_URL": hubcore_url}
    dry = run(["hubcore", "import", str(feed_bundle), "--expected-hash", content_hash], env)
    assert "nothing written" in dry.output
    run(["hubcore", "import", str(feed_bundle), "--expected-hash", content_hash, "--apply"], env)
    again = run(
        ["hubcore", "import", str(db_bundle), "--expected-hash", content_hash, "--apply"], env
    )
    assert "exact repeat" in again.output
    lines = run(
        ["hubcore", "import", str(lines_bundle), "--expected-hash", content_hash, "--apply"], env
    )
    assert "exact repeat" in lines.output  # v2, written on request, reads the same

    auth = {"Authorization": f"Bearer {TOKEN}"}
    with serving(create_hubcore(hubcore_settings(hubcore_url))) as base:
        with httpx.Client(base_url=base) as reader:
            answers = [
                reader.get(PATH, params={"to_agent": READER, **case}, headers=auth).json()
                for case in CASES
            ]
        for case, want, got in zip(CASES, oracle, answers, strict=True):
            assert got == want, case
        check_env = {
            **env,
            "HUB_CORE_OPERATOR_TOKEN": TOKEN,
            "HUB_CORE_STATEHUB_INBOX_AGENT": READER,
        }
        report = run(
            [
                "hubcore",
                "pilot-check",
                str(db_bundle),
                "--expected-hash",
                content_hash,
                "--url",
                base,
            ],
            check_env,
        )
        assert "0 failed" in report.output

    # The broadcast case the original pilot got wrong: read state is the reader's receipt.
    unread = {m["id"] for m in answers[CASES.index({"unread_only": "true"})]}
    assert {ids["runner"], ids["freeze_v2"]} <= unread
    assert not {ids["read_broadcast"], ids["replied_broadcast"]} & unread
    assert ids["expiring"] not in {m["id"] for m in answers[0]}
    assert ids["archived"] not in {m["id"] for m in answers[CASES.index({"limit": 1000})]}

    with (
        serving(create_hubcore(hubcore_settings(hubcore_url, reads=False))) as base,
        httpx.Client(base_url=base) as reader,
    ):
        assert reader.get(PATH, params={"to_agent": READER}, headers=auth).status_code == 404
    with (
        serving(create_hubcore(hubcore_settings(hubcore_url))) as base,
        httpx.Client(base_url=base) as reader,
    ):
        assert reader.get(PATH, params={"to_agent": READER}, headers=auth).json() == answers[0]
        assert reader.get(PATH, params={"to_agent": READER}).status_code == 401
