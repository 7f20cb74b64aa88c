"""Claims, directives and acks on the `hf` adapters (the Hub emulator on loopback):
every write goes through the store port into the central bucket, and reads come back
through the read model."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from tests.bucketsync.test_hf_adapters import B, client, hub, identity, register_agent
from tests.support.hub_emulator import HubEmulator

__all__ = ["client", "hub", "identity"]


def _claim(hub: HubEmulator, client: TestClient, agent: str, idea: str) -> dict[str, Any]:
    hub.put(f"acme/chal-{agent}", "claim.md", f"---\nidea: {idea}\n---\n".encode())
    answer = client.post("/v1/claims", json={"source": f"hf://buckets/acme/chal-{agent}/claim.md"})
    assert answer.status_code == 201, answer.text
    body: dict[str, Any] = answer.json()
    return body


def test_claims_land_in_the_central_bucket_and_warn_on_hf(
    hub: HubEmulator, client: TestClient
) -> None:
    register_agent(hub, client, "a1", "alice", "t1")
    register_agent(hub, client, "a2", "bob", "t2")
    first = _claim(hub, client, "a1", "segmented sieve with a wheel")
    second = _claim(hub, client, "a2", "wheel segmented sieve")

    assert f"claims/{first['filename']}" in hub.files(B)
    assert b"overlap_owners:\n- a1" in hub.files(B)[f"claims/{second['filename']}"]
    assert [m["filename"] for m in second["near_duplicates"]] == [first["filename"]]
    live = client.get("/v1/claims", params={"live": "true"}).json()
    assert live["items"] == [second["filename"], first["filename"]]
    updates = client.get("/v1/updates", params={"as": "a1", "expand": "true"}).json()
    assert [(i["filename"], i["reasons"]) for i in updates["items"]] == [
        (second["filename"], ["claim-overlap"])
    ]


def test_a_directive_and_its_ack_are_written_through_the_store_on_hf(
    hub: HubEmulator, client: TestClient
) -> None:
    register_agent(hub, client, "a1", "alice", "t1")
    register_agent(hub, client, "a2", "bob", "t2")
    hub.accounts.add_user("tok-boss", "boss", acme="admin")
    posted = client.post(
        "/v1/directives",
        json={"agent_id": "human-boss", "body": "freeze the public split"},
        headers={"Authorization": "Bearer tok-boss"},
    )
    assert posted.status_code == 201, posted.text
    directive = posted.json()["filename"]
    assert b"ack_required: true" in hub.files(B)[f"broadcasts/{directive}"]

    hub.put("acme/chal-a2", "ack.md", b"ok")
    acked = client.post(
        f"/v1/directives/{directive}/ack", json={"source": "hf://buckets/acme/chal-a2/ack.md"}
    )

    assert acked.status_code == 200, acked.text
    assert f"acks/{directive.removesuffix('.md')}/a2.md" in hub.files(B)
    roster = client.get(f"/v1/directives/{directive}").json()
    assert (roster["acked"], roster["not_acked"]) == (["a2"], ["a1"])
    pinned = client.get("/v1/digest", params={"as": "a1"}).json()["directives"]["items"]
    assert [d["filename"] for d in pinned] == [directive]
    assert client.get("/v1/digest", params={"as": "a2"}).json()["directives"]["count"] == 0
