"""Three answers that differed from agent-collabs' (issue 27 point 4), now the same, over
real HTTP on loopback: what `GET /v1/agents` lists, which check a reserved registration
meets first, and which `excluded` counts the leaderboard names."""

from __future__ import annotations

from tests.bucketsync.conftest import World, message


def test_the_agent_list_names_registration_files(served: World) -> None:
    for agent in ("agent-1", "agent-2", "agent-3"):
        served.agent(agent)
    listed = served.client.get("/v1/agents").json()
    assert listed["items"] == ["agent-1.md", "agent-2.md", "agent-3.md"]
    page = served.client.get("/v1/agents?limit=1").json()
    assert page["items"] == ["agent-1.md"] and page["next"] == "agent-1.md"
    rest = served.client.get("/v1/agents", params={"after": page["next"]}).json()
    assert rest["items"] == ["agent-2.md", "agent-3.md"]
    # The cursor of the earlier shape (a bare id) still pages the same way.
    assert served.client.get("/v1/agents?after=agent-1").json()["items"] == rest["items"]
    expanded = served.client.get("/v1/agents?expand=true&limit=1").json()["items"]
    assert expanded[0]["agent_id"] == "agent-1"


def test_a_reserved_id_is_refused_before_the_token_is_asked_for(served: World) -> None:
    for agent_id in ("human-alice", "human"):
        refused = served.client.post("/v1/agents/register", json={"agent_id": agent_id})
        assert refused.status_code == 400, refused.text
        assert refused.json()["error"]["code"] == "INVALID_PATH"
        assert "reserved" in refused.json()["error"]["message"]
    malformed = served.client.post("/v1/agents/register", json={"agent_id": "-bad-"})
    assert malformed.status_code == 400
    # A well-formed id without a token still needs one.
    tokenless = served.client.post("/v1/agents/register", json={"agent_id": "agent-1"})
    assert tokenless.status_code == 401 and tokenless.json()["error"]["code"] == "UNAUTHORIZED"


def _result(world: World, agent: str, score: float) -> str:
    text = message("run", score=score, method="m", status="agent-run", description="d")
    assert world.put(agent, "r.md", text).status_code == 201
    posted = world.client.post("/v1/results", json={"source": world.uri(agent, "r.md")})
    assert posted.status_code == 201, posted.text
    filename: str = posted.json()["filename"]
    return filename


def test_the_leaderboard_names_only_the_verification_states_it_left_out(served: World) -> None:
    served.agent("agent-1")
    _result(served, "agent-1", 0.5)
    excluded = served.client.get("/v1/leaderboard").json()["meta"]["excluded"]
    assert excluded == {"status_negative": 0, "malformed": 0}
    strict = served.client.get("/v1/leaderboard?verification=valid").json()["meta"]["excluded"]
    assert strict == {"status_negative": 0, "malformed": 0, "verification_pending": 1}
