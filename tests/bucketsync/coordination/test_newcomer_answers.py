"""A newcomer's mistakes on bucket-sync are answered with what to do (issue 28, point 6),
over real HTTP on loopback: an unknown @-mention is reported, not dropped silently; an id
someone else owns says whose it is and how to get one's own; a contributor creating a
channel is told channels are an organizer's; `GET /v1/agents/register` says POST; a body
sent under a non-JSON content type is named; an acked directive reads as acked in the
budgeted digest; a person's Bearer-proved post has a verified author."""

from __future__ import annotations

import json

from tests.bucketsync.coordination.conftest import ORGANIZER, Site


def test_an_unknown_mention_is_reported_beside_the_delivered_ones(site: Site) -> None:
    posted = site.world.raw("agent-1", "@agent-2 @agnet-3 @human-zoe @agent-1 and @agnet-3")

    assert posted.status_code == 201, posted.text
    answer = posted.json()
    assert answer["mentions_delivered"] == ["agent-2", "human-zoe"]
    assert answer["mentions_unknown"] == ["agnet-3"]  # once; the author and people are not
    clean = site.world.raw("agent-1", "@agent-3 thanks").json()
    assert clean["mentions_delivered"] == ["agent-3"] and clean["mentions_unknown"] == []


def test_an_agent_id_another_user_owns_says_whose_and_how_to_get_ones_own(site: Site) -> None:
    site.world.user("mallory")
    taken = site.world.register("agent-1", "mallory")

    assert taken.status_code == 403, taken.text
    error = taken.json()["error"]
    assert "user-agent-1" in error["message"]
    assert "pick an agent_id of your own" in error["hint"]
    assert "create acme/chal-NEW-ID" in error["hint"] and "'mallory'" in error["hint"]

    # Following the hint registers an id of one's own.
    site.world.create_bucket("mallory-1", "mallory")
    assert site.world.put("mallory-1", ".bucket-sync-handshake", "mallory", user="mallory")
    assert site.world.register("mallory-1", "mallory").status_code == 201

    # A bucket someone else created, not registered yet: the same answer, naming the creator.
    site.world.user("eve")
    site.world.create_bucket("fresh", "eve")
    other = site.world.register("fresh", "mallory")
    assert other.status_code == 403
    assert "'eve'" in other.json()["error"]["message"]
    assert "pick an agent_id of your own" in other.json()["error"]["hint"]


def test_a_contributor_creating_a_channel_is_told_channels_are_organizers(site: Site) -> None:
    site.world.user("carl")
    refused = site.http.post(
        "/v1/channels",
        json={"name": "evals", "agent_id": "human-carl", "body": "how we evaluate"},
        headers=site.world.auth("carl"),
    )

    assert refused.status_code == 403, refused.text
    error = refused.json()["error"]
    assert error["code"] == "NOT_ORGANIZER"
    assert "create channels" in error["message"] and "broadcast" not in error["message"]
    assert "propose the channel on the board" in error["hint"]


def test_get_on_the_register_route_says_to_post(site: Site) -> None:
    answer = site.http.get("/v1/agents/register")

    assert answer.status_code == 405, answer.text
    assert answer.headers["allow"] == "POST"
    error = answer.json()["error"]
    assert error["code"] == "METHOD_NOT_ALLOWED" and "POST" in error["message"]
    assert "-XPOST" in error["hint"] and "/v1/agents/register" in error["hint"]
    assert "not registered" not in error["message"]


def test_a_body_under_a_non_json_content_type_is_named(site: Site) -> None:
    body = json.dumps({"agent_id": "agent-1", "body": "hi"})
    for content_type in ("application/x-www-form-urlencoded", "text/plain"):  # curl -d's first
        answer = site.http.post(
            "/v1/messages", content=body, headers={"content-type": content_type}
        )
        assert answer.status_code == 400, answer.text
        error = answer.json()["error"]
        assert content_type in error["message"], error
        assert "content-type: application/json" in error["hint"]
    # Without any content type it is not read as JSON either (FastAPI's strict rule).
    bare = site.http.post("/v1/messages", content=body, headers={"content-type": ""})
    assert bare.status_code == 400, bare.text
    assert "no Content-Type" in bare.json()["error"]["message"]
    # A JSON body of the wrong shape keeps its precise message.
    wrong = site.http.post("/v1/messages", json={"agent_id": "agent-1", "body": 3})
    assert wrong.json()["error"]["message"] == "body: Input should be a valid string"


def test_the_budgeted_digest_marks_an_acked_directive_acked(site: Site) -> None:
    posted = site.directive("Report scores with three decimals")
    assert posted.status_code == 201, posted.text
    filename = posted.json()["filename"]

    def listed() -> dict[str, object]:
        digest = site.http.get("/v1/digest", params={"as": "agent-1", "budget_tokens": 4000})
        assert digest.status_code == 200, digest.text
        [item] = [i for i in digest.json()["sections"]["directives"] if i["filename"] == filename]
        return dict(item)

    assert listed()["acked"] is False
    assert site.ack("agent-1", filename).status_code in (200, 201)
    assert listed()["acked"] is True


def test_an_organizers_bearer_post_has_a_verified_author(site: Site) -> None:
    posted = site.http.post(
        "/v1/messages",
        json={
            "agent_id": f"human-{ORGANIZER}",
            "body": "Submissions close Friday",
            "broadcast": True,
        },
        headers=site.world.auth(ORGANIZER),
    )
    assert posted.status_code == 201, posted.text

    item = site.http.get(f"/v1/messages/{posted.json()['filename']}").json()

    assert item["trust"] == {"via": "dashboard", "verified_author": True, "lint": []}
