"""Scoring configuration is checked at start (BS-4.19, 4.52): bad combinations fail loudly."""

from __future__ import annotations

from pathlib import Path

import pytest

from agenthub.bucketsync.settings import SettingsError
from tests.bucketsync.conftest import make_settings


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"VERIFIER_ENABLED": "true"}, "needs JOBS_ENABLED"),
        (
            {"JOBS_ENABLED": "true", "VERIFIER_GUARD_FIELD": "runtime_s"},
            "VERIFIER_GUARD_CAP",
        ),
        (
            {"BUCKETSYNC_STORAGE": "hf", "BUCKETSYNC_JOB_RUNNER": "local"},
            "BUCKETSYNC_STORAGE=local",
        ),
        ({"JOB_PER_AGENT_PER_DAY": "-1"}, "greater than or equal"),
    ],
)
def test_bs_4_19_inconsistent_job_settings_are_refused(
    tmp_path: Path, env: dict[str, str], message: str
) -> None:
    with pytest.raises(SettingsError, match=message):
        make_settings(tmp_path, **env)


def test_bs_4_52_defaults_and_derived_values(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, HARNESS_PREFIX="bench", JOB_TIMEOUT_MINUTES="0.5")
    assert settings.harness_prefix == "bench/" and settings.job_timeout_s == 30
    assert settings.jobs_namespace == "acme" and settings.runner_kind == "local"
    assert (settings.job_per_agent_per_day, settings.job_per_user_per_day) == (10, 30)
    assert settings.verifier_agent == "verifier" and settings.verifier_score_tol == 0.02
    assert settings.job_quota_ledger_path == "quota/job_ledger.jsonl"
