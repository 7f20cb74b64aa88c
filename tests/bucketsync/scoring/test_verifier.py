"""The verifier (BS-4.52-4.60, 9.4): real re-runs of the example challenge with the local
job runner, verdicts in the index, human verdicts winning, and `verify reconcile`."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from agenthub.bucketsync.runners.base import JobState
from agenthub.bucketsync.runners.local import LocalJobRunner
from agenthub.bucketsync.scoring.verdicts import verdict_for
from agenthub.bucketsync.scoring.verifier import Verifier
from agenthub.bucketsync.storage.base import Batch
from agenthub.cli import app as cli
from tests.bucketsync.scoring.conftest import AppFactory, ScoringWorld, eventually
from tests.bucketsync.scoring.test_jobs import probe_submission, use_probe

AUDIT = "acme-admin/chal-audit"
INDEX = "results/verification_status.json"


def verifier_of(world: ScoringWorld) -> Verifier:
    verifier = world.client.app.state.scoring.verifier  # type: ignore[attr-defined]
    assert isinstance(verifier, Verifier)
    return verifier


def synchronous(world: ScoringWorld) -> list[str]:
    """Run the trigger on the request thread so a test can read what it decided."""
    verifier = verifier_of(world)
    outcomes: list[str] = []
    world.hub.result_listeners[:] = [lambda f: outcomes.append(verifier.consider(f))]
    return outcomes


def scored_run(world: ScoringWorld, agent: str, kind: str = "good", run: str = "runs/1/") -> float:
    world.submission(agent, kind)
    assert world.run_job(agent, run=run).status_code == 202
    world.finished(world.bucket(agent), run)
    summary = world.status(world.bucket(agent), run + "summary.json")
    assert summary is not None
    return float(summary["score"])


def promote(world: ScoringWorld, agent: str, path: str, score: float, **fm: Any) -> str:
    response = world.result(
        agent,
        path,
        score=score,
        method="trial division",
        status=fm.pop("status", "agent-run"),
        description="see notes",
        **fm,
    )
    assert response.status_code == 201, response.text
    return str(response.json()["filename"])


def verifier_posts(world: ScoringWorld) -> list[dict[str, Any]]:
    items = world.client.get(
        "/v1/messages", params={"agent": "verifier", "expand": "true", "limit": "50"}
    ).json()["items"]
    return list(items)


def ledger(world: ScoringWorld, filename: str) -> dict[str, Any] | None:
    return world.status(AUDIT, f"verification_ledger/{filename}/verdict.json")


def test_bs_4_52_bs_4_56_end_to_end_champion_is_verified_valid(scoring_world: AppFactory) -> None:
    world = scoring_world(VERIFIER_ENABLED="true")
    world.agent("agent-1", "alice")
    score = scored_run(world, "agent-1")
    filename = promote(world, "agent-1", "results/r1.md", score, artifacts="runs/1/")
    eventually(lambda: world.index().get(filename) == "valid")
    strict = world.client.get("/v1/leaderboard", params={"verification": "valid"}).json()
    assert [(r["filename"], r["verification"]) for r in strict["rows"]] == [(filename, "valid")]
    posts = eventually(lambda: verifier_posts(world))
    post = posts[0]
    assert post["frontmatter"]["via"] == "server" and "@agent-1" in post["body"]
    assert "**valid**" in post["body"] and filename in post["body"]
    inbox = world.client.get("/v1/inbox/agent-1").json()["items"]
    assert post["filename"] in inbox


def test_bs_4_54_tampered_score_ends_invalid(scoring_world: AppFactory) -> None:
    world = scoring_world(VERIFIER_ENABLED="true")
    world.agent("agent-1", "alice")
    world.submission("agent-1", "naive")
    sub = world.uri("agent-1", "submission/")
    filename = promote(world, "agent-1", "results/r1.md", 0.99, artifacts=sub)
    eventually(lambda: world.index().get(filename) == "invalid")
    assert world.client.get("/v1/leaderboard").json()["rows"] == []  # invalid is hidden
    entry = eventually(
        lambda: (ledger(world, filename) or {}).get("announced") and ledger(world, filename)
    )
    assert entry["rerun"] == pytest.approx(0.615) and entry["verdict"] == "invalid"


def test_bs_4_52_only_results_beating_the_valid_champion_are_rerun(
    scoring_world: AppFactory,
) -> None:
    world = scoring_world(VERIFIER_ENABLED="true")
    outcomes = synchronous(world)
    world.agent("agent-1", "alice")
    world.agent("agent-2", "bob")
    world.submission("agent-1")
    world.submission("agent-2", "naive")
    first = promote(world, "agent-1", "results/a.md", 1.0, artifacts="submission/")
    assert outcomes == ["launched"]  # cold start: the first result seeds the champion
    eventually(lambda: world.index().get(first) == "valid")
    promote(world, "agent-2", "results/b.md", 0.7, artifacts="submission/")
    promote(world, "agent-2", "results/c.md", 0.8, status="negative", artifacts="submission/")
    assert outcomes[1:] == ["not a champion", "not eligible"]
    verifier = verifier_of(world)
    assert verifier.consider(first) == "already decided"
    bold = promote(world, "agent-2", "results/d.md", 1.5, artifacts="submission/")
    assert outcomes[-1] == "launched"
    assert verifier.consider(bold) in ("already handled", "already decided")
    eventually(lambda: world.index().get(bold) == "invalid")


def test_bs_4_53_rerun_mounts_the_private_set_and_keeps_state_in_the_audit_bucket(
    scoring_world: AppFactory,
) -> None:
    world = scoring_world(VERIFIER_ENABLED="true")
    world.agent("agent-1", "alice")
    world.submission("agent-1")
    filename = promote(world, "agent-1", "results/r.md", 1.0, submission="submission/")
    eventually(lambda: world.index().get(filename) == "valid")
    run = f"verification_runs/{filename}/"
    summary = world.status(AUDIT, run + "summary.json")
    assert summary is not None and summary["eval_set"] == "private" and summary["cases"] == 600
    status = world.status(AUDIT, run + "job_status.json")
    assert status is not None and status["kind"] == "verifier"
    # It ran the copy pinned at promotion, taken from the agent's submission folder.
    assert status["submission"] == f"hf://buckets/{AUDIT}/verification_submissions/{filename}/"
    assert status["pinned_source"] == world.uri("agent-1", "submission/")
    assert world.hub.store.read(AUDIT, run + "job_logs.txt")
    central = [e.path for e in world.hub.store.list(world.hub.central, "")]
    assert not [p for p in central if "eval.json" in p or p.startswith("verification_runs/")]


def test_bs_4_52_central_artifacts_folder_is_a_valid_submission(scoring_world: AppFactory) -> None:
    world = scoring_world(VERIFIER_ENABLED="true")
    world.agent("agent-1", "alice")
    world.submission("agent-1")
    synced = world.client.post(
        "/v1/artifacts:sync",
        json={"source": world.uri("agent-1", "submission/"), "dest_slug": "v1"},
    )
    assert synced.status_code == 200
    filename = promote(world, "agent-1", "results/r.md", 1.0, artifacts="artifacts/v1_agent-1/")
    eventually(lambda: world.index().get(filename) == "valid")


def test_bs_4_54_verdict_rule_tolerance_guard_and_missing_numbers() -> None:
    assert verdict_for(1.0, {"score": 0.985}, score_field="score", tolerance=0.02)[0] == "valid"
    assert verdict_for(1.0, {"score": 0.97}, score_field="score", tolerance=0.02)[0] == "invalid"
    assert verdict_for(1.0, {"other": 1}, score_field="score", tolerance=0.02)[0] is None
    guarded = {"score": 1.0, "runtime_s": 3.0}
    kw: dict[str, Any] = {"score_field": "score", "tolerance": 0.02, "guard_field": "runtime_s"}
    assert verdict_for(1.0, guarded, guard_cap=5.0, **kw)[0] == "valid"
    assert verdict_for(1.0, guarded, guard_cap=2.0, **kw)[0] == "invalid"
    assert verdict_for(1.0, {"score": 1.0}, guard_cap=2.0, **kw)[0] is None


def test_bs_4_54_guard_field_cap_makes_an_exact_rerun_invalid(scoring_world: AppFactory) -> None:
    world = scoring_world(
        VERIFIER_ENABLED="true", VERIFIER_GUARD_FIELD="cases", VERIFIER_GUARD_CAP="100"
    )
    world.agent("agent-1", "alice")
    world.submission("agent-1")
    filename = promote(world, "agent-1", "results/r.md", 1.0, artifacts="submission/")
    eventually(lambda: world.index().get(filename) == "invalid")


def test_bs_4_55_human_verdict_set_while_the_run_is_in_flight_wins(
    scoring_world: AppFactory,
) -> None:
    world = scoring_world(VERIFIER_ENABLED="true")
    use_probe(world)
    outcomes = synchronous(world)
    world.agent("agent-1", "alice")
    sub = probe_submission(world, "agent-1", "slow")
    filename = promote(world, "agent-1", "results/r.md", 0.5, artifacts=sub)
    assert outcomes == ["launched"]
    world.hub.store.write_batch(
        world.hub.central, Batch(adds=[(INDEX, json.dumps({filename: "invalid"}).encode())])
    )
    entry = eventually(lambda: (ledger(world, filename) or {}).get("state") == "deferred")
    assert entry
    assert world.index() == {filename: "invalid"}
    assert verifier_posts(world) == []


def test_bs_4_55_human_override_of_a_recorded_verdict_is_never_undone(
    scoring_world: AppFactory,
) -> None:
    world = scoring_world(VERIFIER_ENABLED="true")
    world.agent("agent-1", "alice")
    world.submission("agent-1")
    filename = promote(world, "agent-1", "results/r.md", 1.0, artifacts="submission/")
    eventually(lambda: (ledger(world, filename) or {}).get("announced"))
    world.hub.store.write_batch(
        world.hub.central, Batch(adds=[(INDEX, json.dumps({filename: "invalid"}).encode())])
    )
    verifier = verifier_of(world)
    assert verifier.decide(filename, JobState("COMPLETED")) == "deferred to a human verdict"
    assert verifier.reconcile().recorded == 0
    assert world.index() == {filename: "invalid"}
    assert len(verifier_posts(world)) == 1


def test_bs_4_55_unreadable_index_is_skipped_then_healed(scoring_world: AppFactory) -> None:
    world = scoring_world(VERIFIER_ENABLED="true")
    world.agent("agent-1", "alice")
    world.submission("agent-1")
    verifier = verifier_of(world)
    world.hub.result_listeners[:] = []
    filename = promote(world, "agent-1", "results/r.md", 1.0, artifacts="submission/")
    garbage = Batch(adds=[(INDEX, b"{not json")])
    world.hub.store.write_batch(world.hub.central, garbage)
    assert verifier.consider(filename) == "index unreadable"
    world.hub.store.write_batch(world.hub.central, Batch(deletes=[INDEX]))
    assert verifier.consider(filename) == "launched"
    world.hub.store.write_batch(world.hub.central, garbage)
    eventually(lambda: (ledger(world, filename) or {}).get("state") == "decided")
    assert world.hub.store.read(world.hub.central, INDEX) == b"{not json"  # skipped
    world.hub.store.write_batch(world.hub.central, Batch(adds=[(INDEX, b"{}")]))
    assert verifier.reconcile().healed == 1
    assert world.index() == {filename: "valid"}
    assert verifier.reconcile().healed == 0
    assert len(verifier_posts(world)) == 1


def test_bs_4_57_crashed_rerun_leaves_the_result_pending_silently(
    scoring_world: AppFactory,
) -> None:
    world = scoring_world(VERIFIER_ENABLED="true")
    use_probe(world)
    world.agent("agent-1", "alice")
    sub = probe_submission(world, "agent-1", "crash")
    filename = promote(world, "agent-1", "results/r.md", 0.5, artifacts=sub)
    entry = eventually(
        lambda: (ledger(world, filename) or {}).get("state") == "failed" and ledger(world, filename)
    )
    assert entry["stage"] == "ERROR"
    assert world.index() == {filename: "pending"}  # entered at promotion, still waiting
    assert world.client.get(f"/v1/results/{filename}").json()["verification"] == "pending"
    assert verifier_posts(world) == []


# An `artifacts:` that names nothing is refused at promotion now (test_result_problems.py);
# what is left to nudge about is a result that names no submission at all.
@pytest.mark.parametrize(("fm", "problem"), [({}, "names no submission")])
def test_bs_4_57_unlocatable_submission_gets_a_nudge_and_stays_pending(
    scoring_world: AppFactory, fm: dict[str, str], problem: str
) -> None:
    world = scoring_world(VERIFIER_ENABLED="true")
    outcomes = synchronous(world)
    world.agent("agent-1", "alice")
    world.agent("agent-2", "bob")
    world.submission("agent-2")
    filename = promote(world, "agent-1", "results/r.md", 0.9, **fm)
    assert outcomes == ["unlocatable"]
    [nudge] = verifier_posts(world)
    assert "@agent-1" in nudge["body"] and problem in nudge["body"]
    assert "artifacts:" in nudge["body"]
    assert nudge["filename"] in world.client.get("/v1/inbox/agent-1").json()["items"]
    assert world.index() == {filename: "pending"}
    assert verifier_of(world).consider(filename) == "already handled"  # nudged once


def test_bs_4_59_promotion_never_waits_on_or_fails_because_of_the_verifier(
    scoring_world: AppFactory,
) -> None:
    world = scoring_world(VERIFIER_ENABLED="true")
    verifier = verifier_of(world)
    release = threading.Event()
    seen: list[str] = []

    def stuck(filename: str) -> str:
        seen.append(filename)
        release.wait(30)
        raise RuntimeError("verifier exploded")

    verifier.consider = stuck  # type: ignore[method-assign]
    world.hub.result_listeners.append(lambda _f: (_ for _ in ()).throw(RuntimeError("boom")))
    world.agent("agent-1", "alice")
    assert world.put("agent-1", "x/model.py", "print(1)").status_code == 201
    started = time.monotonic()
    filename = promote(world, "agent-1", "results/r.md", 0.9, artifacts="x/")
    assert time.monotonic() - started < 5
    eventually(lambda: seen == [filename])
    release.set()


def reconcile_cli(data_dir: Path) -> str:
    env = {
        "ORG": "acme",
        "COLLAB_SLUG": "chal",
        "AUDIT_BUCKET": AUDIT,
        "BUCKETSYNC_DATA_DIR": str(data_dir),
        "BUCKETSYNC_STORAGE": "local",
        "JOBS_ENABLED": "true",
        "VERIFIER_ENABLED": "true",
    }
    result = CliRunner().invoke(cli, ["bucketsync", "verify", "reconcile"], env=env)
    assert result.exit_code == 0, result.output
    return result.stdout


def test_bs_4_58_bs_9_4_restart_mid_job_then_reconcile_records_the_verdict_once(
    scoring_world: AppFactory, tmp_path: Path
) -> None:
    world = scoring_world(VERIFIER_ENABLED="true")
    use_probe(world)
    outcomes = synchronous(world)
    world.agent("agent-1", "alice")
    sub = probe_submission(world, "agent-1", "slow")
    filename = promote(world, "agent-1", "results/r.md", 0.5, artifacts=sub)
    assert outcomes == ["launched"]
    job_id = (ledger(world, filename) or {})["job_id"]
    world.client.__exit__(None, None, None)  # the Space restarts; its watcher is gone
    runner = LocalJobRunner(tmp_path / "data")
    eventually(lambda: runner.inspect(job_id).terminal)
    assert world.index() == {filename: "pending"}
    first = reconcile_cli(tmp_path / "data")
    assert "recorded 1" in first
    assert world.index() == {filename: "valid"}
    again = reconcile_cli(tmp_path / "data")
    assert "recorded 0" in again
    posts = [
        e.path
        for e in world.hub.store.list(world.hub.central, "message_board/")
        if e.path.endswith("_verifier.md")
    ]
    assert len(posts) == 1
    status = world.status(AUDIT, f"verification_runs/{filename}/job_status.json")
    assert status is not None and status["stage"] == "COMPLETED"


def test_bs_4_52_verifier_agent_id_is_reserved(scoring_world: AppFactory) -> None:
    world = scoring_world(VERIFIER_ENABLED="true")
    world.user("mallory")
    world.create_bucket("verifier", "mallory")
    world._owner = {**world._owner, "verifier": "mallory"}
    world.put("verifier", ".bucket-sync-handshake", "mallory")
    response = world.register("verifier", "mallory")
    assert response.status_code == 400 and "reserved" in response.json()["error"]["message"]


def test_verify_reconcile_puts_back_a_verdict_the_index_lost(
    scoring_world: AppFactory, tmp_path: Path
) -> None:
    """The author was told `valid`; then a lost index write (a stale lock holder's, from
    before fencing) put the index back to `pending`. Reconcile writes the recorded verdict
    again, announces nothing twice, and leaves a human verdict alone."""
    world = scoring_world(VERIFIER_ENABLED="true")
    world.agent("agent-1", "alice")
    world.submission("agent-1")
    filename = promote(world, "agent-1", "results/r.md", 1.0, artifacts="submission/")
    eventually(lambda: (ledger(world, filename) or {}).get("announced"))
    assert world.index() == {filename: "valid"}
    lost = {filename: "pending", "20260101-000000-000_agent-9.md": "pending"}
    world.hub.store.write_batch(world.hub.central, Batch(adds=[(INDEX, json.dumps(lost).encode())]))
    assert "healed 1" in reconcile_cli(tmp_path / "data")
    assert world.index() == {**lost, filename: "valid"}
    assert "healed 0" in reconcile_cli(tmp_path / "data")
    assert len(verifier_posts(world)) == 1
    human = {filename: "invalid"}
    world.hub.store.write_batch(
        world.hub.central, Batch(adds=[(INDEX, json.dumps(human).encode())])
    )
    reconcile_cli(tmp_path / "data")
    assert world.index() == human
