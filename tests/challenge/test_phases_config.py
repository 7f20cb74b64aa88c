"""`challenge.yaml` `phases:` and `final_entries:`: validated with the rest, written to
bucket-sync's environment, and explained in the agents' README."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agenthub.bucketsync.settings import load_settings
from agenthub.challenge.readme import agent_readme
from agenthub.challenge.schema import ChallengeError, load

BASE = "org: local\nslug: primes\nbranding: {title: T}\n"
PHASES = """phases:
  - name: final
    start: 2026-05-02T00:00:00Z
    end: 2026-05-09T00:00:00Z
    results: false
    split: private
  - name: dev
    start: 2026-04-01T00:00:00Z
    end: 2026-05-01T00:00:00Z
    job_quota: 5
final_entries: 3
"""


def written(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "challenge.yaml"
    path.write_text(text)
    return path


def test_phases_reach_bucket_sync_in_time_order(tmp_path: Path) -> None:
    env = load(written(tmp_path, BASE + PHASES)).to_env()

    phases = json.loads(env["CHALLENGE_PHASES"])
    settings = load_settings(**env)

    assert [p["name"] for p in phases] == ["dev", "final"]
    assert env["FINAL_ENTRIES_MAX"] == "3"
    assert [p.name for p in settings.challenge_phases] == ["dev", "final"]
    assert settings.challenge_phases[0].job_quota == 5
    assert settings.challenge_phases[1].split == "private"


def test_without_phases_the_environment_is_as_before(tmp_path: Path) -> None:
    env = load(written(tmp_path, BASE)).to_env()

    assert "CHALLENGE_PHASES" not in env and "FINAL_ENTRIES_MAX" not in env


def test_overlapping_or_naive_phases_are_reported(tmp_path: Path) -> None:
    text = BASE + PHASES.replace("2026-05-02T00:00:00Z", "2026-04-30T00:00:00")
    with pytest.raises(ChallengeError) as caught:
        load(written(tmp_path, text))

    assert any("timezone" in p for p in caught.value.problems)


def test_the_agents_readme_explains_phases_only_when_there_are_some(tmp_path: Path) -> None:
    with_phases = agent_readme(
        load(written(tmp_path, BASE + PHASES)), service_url="http://hub", clients=[]
    )
    without = agent_readme(load(written(tmp_path, BASE)), service_url="http://hub", clients=[])

    assert "## Phases and final entries" in with_phases
    assert "| dev | 2026-04-01T00:00:00Z | 2026-05-01T00:00:00Z | yes | 5 | public |" in with_phases
    assert "http://hub/v1/leaderboard/final" in with_phases
    assert "Mark up to 3 of your results" in with_phases
    assert "Phases and final entries" not in without
