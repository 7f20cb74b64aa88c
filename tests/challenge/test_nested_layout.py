"""`challenge.yaml` in agent-collabs' nested layout: one schema, two readers (issue 15)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from agenthub.challenge.schema import ChallengeError, load
from tests.challenge.test_init import read_env, run_init

# The nested layout agent-collabs' bootstrap reads, with the keys it documents.
NESTED = """
challenge:
  org: acme
  admin_org: acme-admin
  slug: primes
  title: "Prime hunt"
  tagline: >
    Find the primes,
    together.
storage:
  central_bucket: acme/primes-main-bucket
  audit_bucket: acme-admin/primes-audit
spaces:
  backend: acme/primes-bucket-sync
  dashboard: acme/primes-dashboard
  eval: acme-admin/primes-eval
scoring:
  score_field: accuracy
  score_label: Accuracy
  score_unit: percent
  order: desc
  required_fields: [accuracy, method, status, description]
  secondary_field: ""
  secondary_label: ""
verification:
  mode: manual
  eval_poll_s: 60
  agent: ""
  score_tol: 0.05
  guard_field: ""
  guard_cap: 0.0
jobs:
  enabled: false
  image: python:3.12
  flavor: a10g-small
  timeout_minutes: 40
  harness_prefix: shared_resources/harness
  harness_entrypoint: run.py
  extra_args: []
  per_agent_per_day: 10
  per_user_per_day: 30
dashboard:
  invite_url: "https://example.test/invite"
"""

# The same challenge in our flat layout.
FLAT = """
org: acme
admin_org: acme-admin
slug: primes
central_bucket: acme/primes-main-bucket
audit_bucket: acme-admin/primes-audit
branding:
  title: Prime hunt
  tagline: Find the primes, together.
scoring:
  field: accuracy
  unit: percent
  order: desc
  required_fields: [accuracy, method, status, description]
verification:
  mode: manual
  tolerance: 0.05
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_the_nested_layout_reads_as_the_same_challenge_as_the_flat_one(tmp_path: Path) -> None:
    nested = load(write(tmp_path, "nested.yaml", NESTED))
    flat = load(write(tmp_path, "flat.yaml", FLAT))
    assert nested.to_env() == flat.to_env()
    assert nested.branding == flat.branding
    assert nested.jobs is None  # jobs.enabled: false
    assert nested.verification.guard_field is None and nested.verification.guard_cap is None


def test_challenge_init_accepts_the_nested_layout(tmp_path: Path) -> None:
    code, out = run_init(write(tmp_path, "challenge.yaml", NESTED), tmp_path)
    assert code == 0, out
    env = read_env(tmp_path / "challenge.env")
    assert env["ORG"] == "acme" and env["COLLAB_SLUG"] == "primes"
    assert env["SCORE_FIELD"] == "accuracy" and env["SCORE_UNIT"] == "percent"
    assert env["CENTRAL_BUCKET"] == "acme/primes-main-bucket"
    assert env["JOBS_ENABLED"] == "false"


def test_enabled_jobs_carry_their_settings(tmp_path: Path) -> None:
    harness = tmp_path / "harness"
    harness.mkdir()
    (harness / "run.py").write_text("print('ok')\n")
    text = NESTED.replace("enabled: false", f"enabled: true\n  harness_dir: {harness}")
    challenge = load(write(tmp_path, "challenge.yaml", text))
    assert challenge.jobs is not None
    env = challenge.to_env()
    assert env["JOBS_ENABLED"] == "true" and env["JOB_TIMEOUT_MINUTES"] == "40"
    assert env["JOB_IMAGE"] == "python:3.12" and env["JOB_HARNESS_ENTRYPOINT"] == "run.py"


def test_every_problem_of_a_nested_file_is_reported_at_once_by_its_own_name(
    tmp_path: Path,
) -> None:
    broken = (
        NESTED.replace("slug: primes", "slug: Primes_2026")
        .replace('  title: "Prime hunt"\n', "")
        .replace("order: desc", "order: up")
        .replace("storage:", "storge:")
        .replace("  enabled: false", "  enabeld: false")
    )
    with pytest.raises(ChallengeError) as caught:
        load(write(tmp_path, "challenge.yaml", broken))
    problems = caught.value.problems
    assert len(problems) == 5, problems
    assert any(p.startswith("challenge.slug:") for p in problems)
    assert "challenge.title: required (add it to challenge.yaml)" in problems
    assert any(p.startswith("scoring.order:") for p in problems)
    assert any("storge: unknown section (did you mean 'storage'?)" in p for p in problems)
    assert any("jobs.enabeld: unknown field (did you mean 'enabled'?)" in p for p in problems)
    code, out = run_init(write(tmp_path, "again.yaml", broken), tmp_path)
    assert code == 2 and "5 problem(s)" in out
