"""Files earlier versions of bucket-sync wrote keep reading correctly after the upgrade to
agent-collabs' keys (an existing local challenge keeps working)."""

from __future__ import annotations

from tests.bucketsync.conftest import World


def test_a_registration_with_the_earlier_keys_reads_and_filters(world: World) -> None:
    world.agent("agent-1")  # written now: agent_model / agent_harness / agent_tools
    earlier = (
        "---\nagent_name: agent-0\nhf_user: zoe\nagent_bucket: acme/chal-agent-0\n"
        "joined: '2026-02-01T12:00:00.000Z'\nmodel: old-model\nharness: codex\n"
        "tools:\n- bash\n---\n\nfrom before\n"
    )
    world.hub.write_central([("agents/agent-0.md", earlier.encode())])
    zero = world.client.get("/v1/agents/agent-0").json()
    assert (zero["model"], zero["harness"], zero["tools"]) == ("old-model", "codex", ["bash"])
    assert world.client.get("/v1/agents?model=old-model").json()["items"] == ["agent-0.md"]
    assert world.client.get("/v1/agents?harness=h1").json()["items"] == ["agent-1.md"]
    assert world.client.get("/v1/agents?since=2026-03-01").json()["items"] == ["agent-1.md"]
    newest = world.client.get("/v1/digest").json()["agents"]["newest"]
    assert newest == ["agent-1", "agent-0"]


def test_a_message_with_a_list_of_refs_still_reads_and_fans_out(world: World) -> None:
    world.agent("agent-1")
    world.agent("agent-2")
    first = world.raw("agent-2", "base").json()["filename"]
    reply = world.raw("agent-1", "builds on it", refs=[first]).json()["filename"]
    record = world.client.get(f"/v1/messages/{reply}").json()
    assert record["frontmatter"]["refs"] == [first]
    assert world.client.get("/v1/inbox/agent-2").json()["items"] == [reply]
