"""Re-submitting a result after the platform failed its verification (issue 28 point 4):
`POST /v1/results/{filename}:reverify`, the route the verifier's board post names, for the
author only, never after a verdict, charged to the job quota and audited."""

from __future__ import annotations

import json
from typing import Any

from agenthub.bucketsync.storage.base import Batch
from tests.bucketsync.scoring.conftest import (
    EXAMPLE,
    AppFactory,
    ScoringWorld,
    eventually,
    install_challenge,
    tree,
)
from tests.bucketsync.scoring.test_verifier import (
    AUDIT,
    ledger,
    promote,
    scored_run,
    verifier_posts,
)


def remove_harness(world: ScoringWorld) -> None:
    """The platform side breaks: the challenge harness is gone when the verifier launches."""
    s = world.hub.settings
    paths = [s.harness_prefix + p for p, _ in tree(EXAMPLE / "harness")]
    world.hub.store.write_batch(s.central_bucket, Batch(deletes=paths))


def platform_failed(world: ScoringWorld, agent: str = "agent-1") -> tuple[str, float]:
    """A champion result whose verification the platform failed (no retries left)."""
    world.agent(agent, "alice")
    score = scored_run(world, agent)
    remove_harness(world)
    filename = promote(world, agent, "results/r1.md", score, artifacts="runs/1/")
    try:
        eventually(
            lambda: (
                (ledger(world, filename) or {}).get("reason") == "platform_error"
                and (ledger(world, filename) or {}).get("state") == "failed"
            ),
            timeout=60,  # a shared machine: the launch waits for a thread and a queue pass
        )
    except AssertionError as failure:
        raise AssertionError(f"{failure}: ledger entry {ledger(world, filename)}") from None
    return filename, score


def reverify(world: ScoringWorld, filename: str, user: str = "alice") -> Any:
    return world.client.post(f"/v1/results/{filename}:reverify", headers=world.auth(user))


def audit_rows(world: ScoringWorld) -> list[dict[str, Any]]:
    rows = []
    for entry in world.hub.store.list(AUDIT, "audit/"):
        data = world.hub.store.read(AUDIT, entry.path) or b""
        rows += [json.loads(line) for line in data.decode().splitlines() if line.strip()]
    return rows


def test_a_result_the_platform_failed_is_resubmitted_and_reaches_a_verdict(
    scoring_world: AppFactory,
) -> None:
    world = scoring_world(VERIFIER_ENABLED="true", JOB_PLATFORM_RETRIES="0")
    filename, _score = platform_failed(world)
    [post] = eventually(lambda: verifier_posts(world))
    assert f"POST /v1/results/{filename}:reverify" in post["body"]
    assert "promote the result again" not in post["body"]
    # What the old hint led to: the same result again is a duplicate.
    again = world.client.post("/v1/results", json={"source": world.uri("agent-1", "results/r1.md")})
    assert again.status_code == 409 and again.json()["error"]["code"] == "ALREADY_PROMOTED"

    install_challenge(world.hub.store, world.hub.settings)  # the platform is repaired
    response = reverify(world, filename)
    assert response.status_code == 202, response.text
    assert response.json()["filename"] == filename
    eventually(lambda: world.index().get(filename) == "valid", timeout=30)
    entry = ledger(world, filename)
    assert entry is not None and entry["resubmissions"] == 1 and entry["verdict"] == "valid"
    assert entry["resubmitted_by"] == "alice"
    [row] = [r for r in audit_rows(world) if r.get("route") == "/v1/results/{filename}:reverify"]
    assert row["agent_id"] == "agent-1" and row["hf_user"] == "alice"
    quota = world.client.get("/v1/me/quota", headers=world.auth("alice")).json()
    assert quota["agents"][0]["used"] == 2  # the scored run and the re-submission
    assert reverify(world, filename).json()["error"]["code"] == "CONFLICT"  # decided now


def test_only_the_author_may_resubmit(scoring_world: AppFactory) -> None:
    world = scoring_world(VERIFIER_ENABLED="true", JOB_PLATFORM_RETRIES="0")
    filename, _score = platform_failed(world)
    world.user("bob")
    response = reverify(world, filename, user="bob")
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "IDENTITY_MISMATCH"
    assert (ledger(world, filename) or {}).get("state") == "failed"


def test_a_resubmission_over_the_job_quota_is_refused_and_changes_nothing(
    scoring_world: AppFactory,
) -> None:
    world = scoring_world(
        VERIFIER_ENABLED="true", JOB_PLATFORM_RETRIES="0", JOB_PER_AGENT_PER_DAY="1"
    )
    filename, _score = platform_failed(world)  # its scored run used the one job of the day
    install_challenge(world.hub.store, world.hub.settings)
    response = reverify(world, filename)
    assert response.status_code == 429 and response.json()["error"]["code"] == "RATE_LIMITED"
    assert "Retry-After" in response.headers
    assert (ledger(world, filename) or {}).get("state") == "failed"
    assert world.index() == {filename: "pending"}


def test_a_resubmission_the_platform_fails_again_is_not_charged(
    scoring_world: AppFactory,
) -> None:
    world = scoring_world(VERIFIER_ENABLED="true", JOB_PLATFORM_RETRIES="0")
    filename, _score = platform_failed(world)
    assert reverify(world, filename).status_code == 202  # the harness is still missing
    eventually(lambda: (ledger(world, filename) or {}).get("charge_released") is True)
    quota = world.client.get("/v1/me/quota", headers=world.auth("alice")).json()
    assert quota["agents"][0]["used"] == 1 and quota["agents"][0]["not_charged"] == 1
    # Told again, once per re-submission.
    eventually(lambda: len(verifier_posts(world)) == 2)


def test_an_invalid_verdict_on_the_merits_cannot_be_resubmitted(
    scoring_world: AppFactory,
) -> None:
    world = scoring_world(VERIFIER_ENABLED="true")
    world.agent("agent-1", "alice")
    world.submission("agent-1", "naive")
    filename = promote(
        world, "agent-1", "results/r1.md", 0.99, artifacts=world.uri("agent-1", "submission/")
    )
    eventually(lambda: world.index().get(filename) == "invalid")
    response = reverify(world, filename)
    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == "CONFLICT" and "invalid" in error["message"]
    assert "new result" in error["hint"]


def test_a_crashed_submission_is_not_the_platforms_failure(scoring_world: AppFactory) -> None:
    from tests.bucketsync.scoring.test_jobs import probe_submission, use_probe

    world = scoring_world(VERIFIER_ENABLED="true")
    use_probe(world)
    world.agent("agent-1", "alice")
    sub = probe_submission(world, "agent-1", "crash")
    filename = promote(world, "agent-1", "results/r.md", 0.5, artifacts=sub)
    eventually(lambda: (ledger(world, filename) or {}).get("state") == "failed")
    response = reverify(world, filename)
    assert response.status_code == 409
    assert "on its merits" in response.json()["error"]["message"]
