"""eval-space mode: `agenthub challenge evaluate` turns pending results into verdicts on the
private eval set, through the verifier's ledger and compare-and-set (humans win)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from agenthub.bucketsync.app import create_app
from agenthub.bucketsync.identity.local import LocalIdentity
from agenthub.bucketsync.storage.base import Batch
from agenthub.bucketsync.storage.local import LocalBucketStore
from agenthub.challenge.evaluate import EvalLoop, EvaluatorError, load_evaluator
from agenthub.cli import app as cli
from tests.bucketsync.conftest import ORG, make_settings
from tests.bucketsync.scoring.conftest import (
    EXAMPLE,
    ScoringWorld,
    eventually,
    install_challenge,
)
from tests.bucketsync.scoring.test_verifier import promote, verifier_posts

EVALUATOR = f"{EXAMPLE / 'evaluator.py'}:evaluate"
AUDIT = "acme-admin/chal-audit"
INDEX = "results/verification_status.json"


@pytest.fixture
def world(tmp_path: Path) -> Iterator[ScoringWorld]:
    settings = make_settings(tmp_path / "data", VERIFIER_SCORE_TOL="0.02")
    store = LocalBucketStore(settings.data_dir)
    identity = LocalIdentity(settings.data_dir / "users.json", org=ORG)
    app = create_app(settings, store=store, identity=identity)
    with TestClient(app) as client:
        install_challenge(store, settings)
        yield ScoringWorld(client, app.state.hub, identity)


def loop_of(world: ScoringWorld) -> EvalLoop:
    return EvalLoop(world.hub, load_evaluator(EVALUATOR))


def set_index(world: ScoringWorld, **verdicts: str) -> None:
    body = json.dumps({**world.index(), **verdicts}).encode()
    world.hub.store.write_batch(world.hub.central, Batch(adds=[(INDEX, body)]))


def test_a_pending_result_with_an_honest_score_becomes_valid(world: ScoringWorld) -> None:
    world.agent("agent-1", "alice")
    world.submission("agent-1", "good")
    filename = promote(world, "agent-1", "results/r1.md", 1.0, artifacts="submission/")

    report = loop_of(world).run_once()

    assert report.outcomes == {filename: "valid"}
    assert world.index()[filename] == "valid"
    ledger = world.status(AUDIT, f"verification_ledger/{filename}/verdict.json")
    assert ledger is not None and ledger["mode"] == "eval-space" and ledger["announced"]
    posts = verifier_posts(world)
    assert len(posts) == 1 and "**valid**" in posts[0]["body"] and "@agent-1" in posts[0]["body"]
    assert posts[0]["filename"] in world.client.get("/v1/inbox/agent-1").json()["items"]


def test_a_tampered_score_becomes_invalid(world: ScoringWorld) -> None:
    world.agent("agent-1", "alice")
    world.submission("agent-1", "naive")
    filename = promote(world, "agent-1", "results/r1.md", 0.99, artifacts="submission/")

    report = loop_of(world).run_once()

    assert report.outcomes == {filename: "invalid"}
    assert world.index()[filename] == "invalid"
    assert world.client.get("/v1/leaderboard").json()["rows"] == []


def test_a_human_verdict_is_never_overwritten(world: ScoringWorld) -> None:
    world.agent("agent-1", "alice")
    world.submission("agent-1", "naive")
    decided = promote(world, "agent-1", "results/a.md", 0.99, artifacts="submission/")
    raced = promote(world, "agent-1", "results/b.md", 0.98, artifacts="submission/")
    set_index(world, **{decided: "valid"})  # a human decided before the evaluator ran
    loop = loop_of(world)

    # A human writes while the evaluator is scoring `raced`: the compare-and-set sees it.
    original = loop.evaluate

    def racing(submission_dir: Path, private_dir: Path) -> Any:
        set_index(world, **{raced: "valid"})
        return original(submission_dir, private_dir)

    loop.evaluate = racing
    report = loop.run_once()

    assert decided not in report.outcomes  # not pending: never evaluated
    assert report.outcomes == {raced: "deferred to a human verdict"}
    assert world.index() == {decided: "valid", raced: "valid"}
    ledger = world.status(AUDIT, f"verification_ledger/{raced}/verdict.json")
    assert ledger is not None and ledger["state"] == "deferred"
    assert ledger["human_verdict"] == "valid" and ledger["verdict"] == "invalid"
    assert verifier_posts(world) == []


def test_a_second_pass_changes_nothing(world: ScoringWorld) -> None:
    world.agent("agent-1", "alice")
    world.submission("agent-1", "good")
    filename = promote(world, "agent-1", "results/r1.md", 1.0, artifacts="submission/")
    loop = loop_of(world)
    loop.run_once()
    index_before = world.index()
    posts_before = verifier_posts(world)

    again = loop.run_once()

    assert again.examined == 0 and again.outcomes == {}
    assert world.index() == index_before == {filename: "valid"}
    assert verifier_posts(world) == posts_before


def test_negative_and_unlocatable_results_are_handled_once(world: ScoringWorld) -> None:
    world.agent("agent-1", "alice")
    promote(world, "agent-1", "results/neg.md", 0.4, status="negative")
    lost = promote(world, "agent-1", "results/lost.md", 0.9)
    loop = loop_of(world)

    first = loop.run_once()
    second = loop.run_once()

    assert first.outcomes == {lost: "unlocatable"}
    assert second.outcomes == {lost: "already unlocatable"}
    nudges = verifier_posts(world)
    assert len(nudges) == 1 and "cannot be verified" in nudges[0]["body"]
    assert world.index().get(lost, "pending") == "pending"


def test_a_crashing_evaluator_leaves_the_result_pending_until_it_is_fixed(
    world: ScoringWorld,
) -> None:
    world.agent("agent-1", "alice")
    world.submission("agent-1", "good")
    filename = promote(world, "agent-1", "results/r1.md", 1.0, artifacts="submission/")

    def broken(submission_dir: Path, private_dir: Path) -> dict[str, Any]:
        raise RuntimeError("eval.json is corrupt")

    report = EvalLoop(world.hub, broken).run_once()

    assert report.outcomes == {filename: "failed"}
    assert world.index().get(filename, "pending") == "pending"
    ledger = world.status(AUDIT, f"verification_ledger/{filename}/verdict.json")
    assert ledger == {
        "state": "failed",
        "attempts": 1,
        "message": "RuntimeError: eval.json is corrupt",
    }
    assert loop_of(world).run_once().outcomes == {filename: "valid"}  # fixed: retried


def test_without_a_private_eval_set_nothing_is_judged(world: ScoringWorld) -> None:
    world.agent("agent-1", "alice")
    world.submission("agent-1", "good")
    filename = promote(world, "agent-1", "results/r1.md", 1.0, artifacts="submission/")
    world.hub.store.write_batch(AUDIT, Batch(deletes=["private/eval.json"]))

    with pytest.raises(EvaluatorError, match=r"no private eval set.*private_dir"):
        loop_of(world).run_once()

    assert world.status(AUDIT, f"verification_ledger/{filename}/verdict.json") is None


def test_evaluator_spec_errors_name_the_fix() -> None:
    with pytest.raises(EvaluatorError, match="module:function"):
        load_evaluator("evaluator.py")
    with pytest.raises(EvaluatorError, match="has no callable 'score'"):
        load_evaluator(f"{EXAMPLE / 'evaluator.py'}:score")
    with pytest.raises(EvaluatorError, match="does not exist"):
        load_evaluator("no/such/file.py:evaluate")


def test_the_cli_runs_one_pass_from_the_environment(
    world: ScoringWorld, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    world.agent("agent-1", "alice")
    world.submission("agent-1", "good")
    filename = promote(world, "agent-1", "results/r1.md", 1.0, artifacts="submission/")
    env = {
        "ORG": ORG,
        "COLLAB_SLUG": "chal",
        "AUDIT_BUCKET": AUDIT,
        "BUCKETSYNC_DATA_DIR": str(tmp_path / "data"),
        "BUCKETSYNC_STORAGE": "local",
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)

    result = CliRunner().invoke(cli, ["challenge", "evaluate", "--evaluator", EVALUATOR, "--once"])

    assert result.exit_code == 0, result.output
    assert f"valid  {filename}" in result.output and "pending examined: 1" in result.output
    assert world.index() == {filename: "valid"}
    bad = CliRunner().invoke(cli, ["challenge", "evaluate", "--evaluator", "nope", "--once"])
    assert bad.exit_code == 2 and "module:function" in bad.output


def test_the_shipped_example_challenge_is_verified_end_to_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`challenge init` on examples/…/challenge.yaml → an agent promotes a result naming its
    submission → one `challenge evaluate` pass → `valid` on the strict leaderboard."""
    data = tmp_path / "data"
    env_out = tmp_path / "challenge.env"
    init = CliRunner().invoke(
        cli,
        ["challenge", "init", str(EXAMPLE / "challenge.yaml"), "--data-dir", str(data),
         "--env-out", str(env_out)],
    )  # fmt: skip
    assert init.exit_code == 0, init.output
    env = dict(line.split("=", 1) for line in env_out.read_text().splitlines())
    assert env["VERIFIER_ENABLED"] == "false"  # eval-space: the evaluator decides, not jobs
    store = LocalBucketStore(data)
    assert (
        store.read(env["AUDIT_BUCKET"], "private/eval.json")
        == (EXAMPLE / "private" / "eval.json").read_bytes()
    )
    # The server sees the evaluator's index write (another process) after its listing TTL.
    settings = make_settings(data, **{**env, "LISTING_TTL_S": "0.05"})
    identity = LocalIdentity(data / "users.json", org=env["ORG"])
    auth = {"Authorization": f"Bearer {identity.add_user('alice', role='contributor')}"}
    bucket = settings.scratch_bucket("solver")
    predict = (EXAMPLE / "submissions" / "good" / "predict.py").read_bytes()
    result = (
        b"---\nscore: 1.0\nmethod: trial division\nstatus: agent-run\ndescription: d\n"
        b"artifacts: submission/\n---\n"
    )
    with TestClient(create_app(settings, store=store, identity=identity)) as client:
        assert client.post(f"/local/buckets/{bucket}", headers=auth).status_code == 201
        for path, payload in [
            (".bucket-sync-handshake", b"alice"),
            ("submission/predict.py", predict),
            ("results/r1.md", result),
        ]:
            put = client.put(f"/local/buckets/{bucket}/files/{path}", content=payload, headers=auth)
            assert put.status_code == 201, put.text
        registered = client.post(
            "/v1/agents/register",
            json={"agent_id": "solver", "model": "m", "harness": "h"},
            headers=auth,
        )
        assert registered.status_code == 201, registered.text
        promoted = client.post(
            "/v1/results", json={"source": f"hf://buckets/{bucket}/results/r1.md"}
        )
        assert promoted.status_code == 201, promoted.text
        filename = promoted.json()["filename"]
        for key, value in {**env, "BUCKETSYNC_DATA_DIR": str(data)}.items():
            monkeypatch.setenv(key, value)
        monkeypatch.setenv("BUCKETSYNC_STORAGE", "local")

        evaluated = CliRunner().invoke(
            cli, ["challenge", "evaluate", "--evaluator", EVALUATOR, "--once"]
        )

        assert evaluated.exit_code == 0, evaluated.output
        rows = eventually(
            lambda: client.get("/v1/leaderboard", params={"verification": "valid"}).json()["rows"]
        )
    assert [(r["filename"], r["verification"]) for r in rows] == [(filename, "valid")]


def test_without_once_the_loop_keeps_polling_at_the_interval(world: ScoringWorld) -> None:
    world.agent("agent-1", "alice")
    world.submission("agent-1", "good")
    loop = loop_of(world)
    passes: list[dict[str, str]] = []
    slept: list[float] = []

    class Stop(Exception):
        pass

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        if len(slept) == 1:  # a result arrives between two passes
            promote(world, "agent-1", "results/late.md", 1.0, artifacts="submission/")
        if len(slept) == 2:
            raise Stop

    with pytest.raises(Stop):
        loop.run(
            interval_s=7.5, once=False, on_pass=lambda r: passes.append(r.outcomes), sleep=sleep
        )

    assert slept == [7.5, 7.5]
    assert passes[0] == {} and list(passes[1].values()) == ["valid"]
