"""Promotion finds every problem of a result at once (issue 28 point 4): an `artifacts:`
that names nothing is refused with a hint, and several problems come in one 400 whose
top-level code and message are the first problem's."""

from __future__ import annotations

from typing import Any

import pytest

from tests.bucketsync.conftest import World


def promote(world: World, agent: str, **fm: Any) -> Any:
    lines = "".join(f"{k}: {v}\n" for k, v in fm.items())
    assert world.put(agent, "results/r.md", f"---\n{lines}---\nnotes\n").status_code == 201
    return world.client.post("/v1/results", json={"source": world.uri(agent, "results/r.md")})


GOOD = {"score": "0.8", "method": "m", "status": "agent-run", "description": "d"}


@pytest.mark.parametrize(
    ("artifacts", "problem"),
    [
        ("submision/", "has no files"),  # a typo of the uploaded folder
        ("hf://buckets/acme/chal-agent-2/submission/", "not in your own"),
        ("artifacts/v1_agent-2/", "not one of your"),
    ],
)
def test_an_artifacts_line_that_names_nothing_is_refused_at_promotion(
    world: World, artifacts: str, problem: str
) -> None:
    world.agent("agent-1", "alice")
    world.agent("agent-2", "bob")
    assert world.put("agent-1", "submission/model.py", "print(1)").status_code == 201
    assert world.put("agent-2", "submission/model.py", "print(2)").status_code == 201
    response = promote(world, "agent-1", **GOOD, artifacts=artifacts)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "INVALID_FRONTMATTER"
    assert problem in error["message"] and "artifacts:" in error["message"]
    assert "buckets sync" in error["hint"]
    assert [p["field"] for p in error["problems"]] == ["artifacts"]
    assert world.client.get("/v1/results").json()["count"] == 0


def test_an_artifacts_folder_that_holds_the_submission_is_promoted(world: World) -> None:
    world.agent("agent-1", "alice")
    assert world.put("agent-1", "submission/model.py", "print(1)").status_code == 201
    response = promote(world, "agent-1", **GOOD, artifacts="submission/")
    assert response.status_code == 201, response.text


def test_three_problems_are_reported_at_once(world: World) -> None:
    world.agent("agent-1", "alice")
    response = promote(
        world,
        "agent-1",
        score="-1",
        method="m",
        status="done",
        description="d",
        artifacts="submision/",
    )
    assert response.status_code == 400
    error = response.json()["error"]
    problems = error["problems"]
    assert [p["field"] for p in problems] == ["score", "status", "artifacts"]
    # Clients that read only the top level see the first problem, as before.
    assert error["code"] == "INVALID_FRONTMATTER"
    assert error["message"] == problems[0]["message"] == "'score' must be positive, got -1"
    assert error["hint"] == problems[0]["hint"]
    assert all(p["message"] and p["hint"] for p in problems)


def test_a_single_problem_keeps_its_message_and_lists_itself(world: World) -> None:
    world.agent("agent-1", "alice")
    response = promote(world, "agent-1", score="0.8", status="agent-run", description="d")
    error = response.json()["error"]
    assert error["message"] == "result frontmatter is missing 'method'"
    assert [p["field"] for p in error["problems"]] == ["method"]
