"""Pinned submissions end to end over real HTTP with the local job runner: the pin recorded
at promotion, a pinned file changed after promotion → invalid/submission_changed, an
untouched one → valid, and files added later are not what the verifier runs."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI

from agenthub.bucketsync.storage.base import Batch
from tests.bucketsync.scoring.conftest import ScoringWorld, eventually

LiveWorld = Callable[..., tuple[ScoringWorld, FastAPI]]
AUDIT = "acme-admin/chal-audit"


def submit(world: ScoringWorld, agent: str, prefix: str, **files: str) -> None:
    for name, text in files.items():
        assert world.put(agent, f"{prefix}{name}", text).status_code == 201


def promote(world: ScoringWorld, agent: str, path: str, score: float, prefix: str) -> str:
    response = world.result(
        agent,
        path,
        score=score,
        method="m",
        status="agent-run",
        description="d",
        artifacts=prefix,
    )
    assert response.status_code == 201, response.text
    return str(response.json()["filename"])


def running(world: ScoringWorld) -> list[dict[str, Any]]:
    """Wait until a verification runs (the trigger is off the request thread)."""
    return list(eventually(lambda: world.client.get("/v1/queue").json()["running"]))


def detail(world: ScoringWorld, filename: str) -> dict[str, Any]:
    response = world.client.get(f"/v1/results/{filename}")
    assert response.status_code == 200, response.text
    return dict(response.json())


def test_the_pin_lists_every_submission_file_with_size_and_hash(live_world: LiveWorld) -> None:
    world, _app = live_world(VERIFIER_ENABLED="true")
    world.agent("agent-1", "alice")
    submit(world, "agent-1", "sub/", **{"score.txt": "0.5", "model/weights.bin": "w" * 300})
    filename = promote(world, "agent-1", "results/r.md", 0.5, "sub/")
    pin = detail(world, filename)["pin"]
    assert pin["source"] == world.uri("agent-1", "sub/")
    assert pin["files"] == [
        {"path": "model/weights.bin", "size": 300, "content_hash": sha("w" * 300)},
        {"path": "score.txt", "size": 3, "content_hash": sha("0.5")},
    ]
    assert pin["file_count"] == 2 and pin["total_bytes"] == 303 and pin["manifest_hash"]
    listed = world.client.get("/v1/results").json()
    assert listed["count"] == 1  # the pin is not a result


def test_changed_pinned_file_is_invalid_and_an_untouched_one_valid(
    live_world: LiveWorld,
) -> None:
    world, _app = live_world(VERIFIER_ENABLED="true")
    for agent in ("agent-1", "agent-2", "agent-3"):
        world.agent(agent, f"user-{agent}")
    # agent-1's run holds the only slot (5 s, ample on a loaded machine) while the other
    # two wait with their pins.
    submit(world, "agent-1", "sub/", **{"score.txt": "0.5", "sleep.txt": "5"})
    blocker = promote(world, "agent-1", "results/a.md", 0.5, "sub/")
    running(world)
    submit(world, "agent-2", "sub/", **{"score.txt": "0.9", "notes.txt": "v1"})
    changed = promote(world, "agent-2", "results/b.md", 0.9, "sub/")
    submit(world, "agent-3", "sub/", **{"score.txt": "0.8"})
    untouched = promote(world, "agent-3", "results/c.md", 0.8, "sub/")
    # Promotion never waits for the verifier: the entry appears just after the 201.
    waiting = eventually(lambda: (detail(world, changed)["verification_detail"] or {}).get("queue"))
    assert waiting["state"] == "queued" and waiting["position"] == 1
    submit(world, "agent-2", "sub/", **{"notes.txt": "v2, after promotion"})

    eventually(lambda: world.index().get(untouched) == "valid", timeout=40)
    assert world.index() == {blocker: "valid", changed: "invalid", untouched: "valid"}
    verdict = detail(world, changed)
    assert verdict["verification"] == "invalid"
    assert verdict["verification_detail"]["reason"] == "submission_changed"
    assert verdict["verification_detail"]["changed"] == [{"path": "notes.txt", "change": "changed"}]
    # No run was spent on it, and its author is told why on the board.
    assert world.hub.store.list(AUDIT, f"verification_runs/{changed}/") == []
    posts = world.client.get(
        "/v1/inbox/agent-2", params={"expand": "true", "agent": "verifier"}
    ).json()["items"]
    assert any("submission_changed" in post["body"] for post in posts)
    recent = world.client.get("/v1/queue").json()["recent"]
    assert {r["result"]: r["reason"] for r in recent}[changed] == "submission_changed"


def test_a_vanished_pinned_file_is_invalid(live_world: LiveWorld) -> None:
    world, _app = live_world(VERIFIER_ENABLED="true")
    world.agent("agent-1", "alice")
    world.agent("agent-2", "bob")
    submit(world, "agent-1", "sub/", **{"score.txt": "0.5", "sleep.txt": "5"})
    promote(world, "agent-1", "results/a.md", 0.5, "sub/")
    running(world)
    submit(world, "agent-2", "sub/", **{"score.txt": "0.9", "extra.txt": "x"})
    gone = promote(world, "agent-2", "results/b.md", 0.9, "sub/")
    # What the agent's own `hf buckets rm` does to its bucket.
    world.hub.store.write_batch(world.bucket("agent-2"), Batch(deletes=["sub/extra.txt"]))
    eventually(lambda: world.index().get(gone) == "invalid", timeout=30)
    assert detail(world, gone)["verification_detail"]["changed"] == [
        {"path": "extra.txt", "change": "vanished"}
    ]


def test_files_added_after_promotion_are_not_run(live_world: LiveWorld) -> None:
    """The verifier runs the pinned copy, not the folder: a file added after promotion
    (which this harness would score instead) changes nothing. The folder itself, run as an
    agent's job, does score the added file: mounting it live is the broken variant."""
    world, _app = live_world(VERIFIER_ENABLED="true")
    world.agent("agent-1", "alice")
    world.agent("agent-2", "bob")
    submit(world, "agent-1", "sub/", **{"score.txt": "0.5", "sleep.txt": "5"})
    promote(world, "agent-1", "results/a.md", 0.5, "sub/")
    running(world)
    submit(world, "agent-2", "sub/", **{"score.txt": "0.9"})
    filename = promote(world, "agent-2", "results/b.md", 0.9, "sub/")
    submit(world, "agent-2", "sub/", **{"override.txt": "0.1"})

    eventually(lambda: world.index().get(filename) == "valid", timeout=30)
    staged = world.hub.store.list(AUDIT, f"verification_submissions/{filename}/")
    assert [e.path.rsplit("/", 1)[1] for e in staged] == ["score.txt"]

    assert world.run_job("agent-2", sub="sub/", run="runs/live/").status_code == 202
    world.finished(world.bucket("agent-2"), "runs/live/")
    live = world.status(world.bucket("agent-2"), "runs/live/summary.json")
    assert live == {"score": 0.1}


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()
