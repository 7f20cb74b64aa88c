"""Results (BS-3.4-3.7, 4.11, 4.12, 1.13, 1.18) and `/v1/me` (BS-4.16)."""

from __future__ import annotations

import json

import pytest

from agenthub.bucketsync.storage.base import Batch
from tests.bucketsync.conftest import World

GOOD = {"score": 0.91, "method": "beam search", "status": "agent-run", "description": "v2"}


def result_text(**fields: object) -> str:
    lines = "".join(f"{k}: {json.dumps(v)}\n" for k, v in fields.items())
    return f"---\n{lines}---\nNotes on the run.\n"


def promote_result(world: World, agent: str, path: str, text: str):  # type: ignore[no-untyped-def]
    assert world.put(agent, path, text).status_code == 201
    return world.client.post("/v1/results", json={"source": world.uri(agent, path)})


def test_bs_4_11_bs_1_13_result_promotion(world: World) -> None:
    world.agent("agent-1")
    response = promote_result(world, "agent-1", "r.md", result_text(**GOOD))
    assert response.status_code == 201
    assert response.json() == {
        "filename": "20260301-120000-000_agent-1.md",
        "via": "bucket",
        "path": "results/20260301-120000-000_agent-1.md",
    }
    stored = world.hub.store.read(world.hub.central, response.json()["path"])
    assert stored is not None and b"agent: agent-1" in stored and b"via: bucket" in stored


def test_bs_4_11_results_take_source_only(world: World) -> None:
    world.agent("agent-1")
    response = world.client.post("/v1/results", json={"agent_id": "agent-1", "body": "x"})
    assert response.status_code == 400


@pytest.mark.parametrize("missing", ["score", "method", "status", "description"])
def test_bs_3_4_required_fields_are_named(world: World, missing: str) -> None:
    world.agent("agent-1")
    fields = {k: v for k, v in GOOD.items() if k != missing}
    response = promote_result(world, "agent-1", "r.md", result_text(**fields))
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "INVALID_FRONTMATTER" and repr(missing) in error["message"]


@pytest.mark.parametrize("score", [True, "0.9", 0, -1.5, None])
def test_bs_3_5_score_must_be_a_positive_number(world: World, score: object) -> None:
    world.agent("agent-1")
    response = promote_result(world, "agent-1", "r.md", result_text(**{**GOOD, "score": score}))
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "INVALID_FRONTMATTER"


def test_bs_3_6_status_is_agent_run_or_negative(world: World) -> None:
    world.agent("agent-1")
    bad = promote_result(world, "agent-1", "r.md", result_text(**{**GOOD, "status": "done"}))
    assert bad.status_code == 400
    ok = promote_result(world, "agent-1", "n.md", result_text(**{**GOOD, "status": "negative"}))
    assert ok.status_code == 201


def test_bs_3_7_score_required_even_if_unlisted_and_strings_non_empty(world: World) -> None:
    world.hub.settings.required_result_fields = "method"
    world.agent("agent-1")
    no_score = promote_result(world, "agent-1", "r.md", result_text(method="x"))
    assert "'score'" in no_score.json()["error"]["message"]
    empty = promote_result(world, "agent-1", "e.md", result_text(score=1, method="  "))
    assert empty.status_code == 400 and "'method'" in empty.json()["error"]["message"]


def test_bs_4_12_bs_1_18_results_list_with_verification_inline(world: World) -> None:
    world.agent("agent-1")
    names = []
    for index in range(3):
        text = result_text(**{**GOOD, "score": index + 1})
        names.append(promote_result(world, "agent-1", f"r{index}.md", text).json()["filename"])
        world.hub.clock.advance(1)  # type: ignore[attr-defined]
    index_file = json.dumps({names[0]: "valid", names[1]: "invalid"}).encode()
    world.hub.store.write_batch(  # a human verdict, edited in the bucket directly
        world.hub.central, Batch(adds=[("results/verification_status.json", index_file)])
    )
    world.hub.clock.advance(world.hub.settings.listing_ttl_s + 1)  # type: ignore[attr-defined]
    page = world.client.get("/v1/results?expand=true&order=asc").json()
    assert [item["verification"] for item in page["items"]] == ["valid", "invalid", "pending"]
    assert page["count"] == 3
    strict = world.client.get("/v1/results?verification=valid,pending&order=asc").json()
    assert strict["items"] == [names[0], names[2]] and strict["matched"] == 2
    detail = world.client.get(f"/v1/results/{names[1]}").json()
    assert detail["verification"] == "invalid" and detail["frontmatter"]["score"] == 2
    assert world.client.get("/v1/results?status=negative").json()["matched"] == 0
    assert world.client.get("/v1/results/nope.md").status_code == 404


def test_bs_5_10_result_dedup_uses_the_results_folder(world: World) -> None:
    world.agent("agent-1")
    text = result_text(**GOOD)
    assert promote_result(world, "agent-1", "r.md", text).status_code == 201
    assert promote_result(world, "agent-1", "r.md", text).status_code == 409
    # the same bytes as a message are a different destination folder
    response = world.client.post("/v1/messages", json={"source": world.uri("agent-1", "r.md")})
    assert response.status_code == 400  # but result keys are not allowed on messages


def test_bs_4_16_me_reports_handle_membership_and_organizer(world: World) -> None:
    world.user("Alice")
    world.user("carol", role="admin")
    alice = world.client.get("/v1/me", headers=world.auth("Alice")).json()
    assert alice == {
        "hf_user": "Alice",
        "handle": "human-alice",
        "is_member": True,
        "is_organizer": False,
    }
    assert world.client.get("/v1/me", headers=world.auth("carol")).json()["is_organizer"]
    assert world.client.get("/v1/me").status_code == 401


def test_bs_4_16_role_lookup_failure_is_not_an_error(world: World) -> None:
    from agenthub.bucketsync.errors import StorageUnavailable
    from agenthub.bucketsync.identity.base import Caller

    class OAuthLikeIdentity:
        """whoami without roleInOrg (OAuth tokens), and a members API that is down."""

        def whoami(self, token: str) -> Caller:
            return Caller(user="dana", orgs={})

        def org_role(self, org: str, user: str, email: str | None = None) -> str | None:
            raise StorageUnavailable("members API down")

    world.hub.identity = OAuthLikeIdentity()
    response = world.client.get("/v1/me", headers={"Authorization": "Bearer anything"})
    assert response.status_code == 200
    assert response.json()["is_organizer"] is False
