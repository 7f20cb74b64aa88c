"""Following the central bucket's change feed (storage/hffeed.py) on the Hub emulator: an
admin's edit made on the Hub is served within 2 s without listing the bucket, warm reads
cost no Hub request past the TTL while the feed is live, and with the feed not served the
read model falls back to re-listing every TTL."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from agenthub.bucketsync.app import create_app
from tests.bucketsync.conftest import CENTRAL
from tests.bucketsync.test_hf_adapters import hub_settings, register_agent
from tests.support.hub_emulator import Fault, HubEmulator


def serve(hub: HubEmulator, tmp_path: Path, **overrides: str) -> TestClient:
    """bucket-sync on the emulator with its default hf adapters and the system clock."""
    return TestClient(create_app(hub_settings(hub, tmp_path, **overrides)))


def post(client: TestClient, agent: str, body: str) -> str:
    response = client.post("/v1/messages", json={"agent_id": agent, "body": body})
    assert response.status_code == 201, response.text
    return str(response.json()["filename"])


def feed(client: TestClient) -> dict[str, Any]:
    report = client.get("/v1/healthz").json()["read_model"]["feed"]
    assert report is not None, "on hf the service follows the central bucket"
    return dict(report)


def wait_for(check: Callable[[], bool], *, within_s: float) -> float:
    """Seconds until `check()` held (fails past `within_s`)."""
    started = time.monotonic()
    while not check():
        assert time.monotonic() - started < within_s, f"not within {within_s} s"
        time.sleep(0.02)
    return time.monotonic() - started


def body(client: TestClient, filename: str) -> str:
    return str(client.get(f"/v1/messages/{filename}").json().get("body"))


def test_an_admin_edit_on_the_hub_is_served_within_2_s_without_listing(
    hub: HubEmulator, tmp_path: Path
) -> None:
    with serve(hub, tmp_path) as client:
        register_agent(hub, client, "a1", "alice")
        filename = post(client, "a1", "original")
        wait_for(lambda: feed(client)["live"], within_s=5)
        assert body(client, filename) == "original\n"
        hub.reset_counts()
        hub.put(CENTRAL, f"message_board/{filename}", b"edited by an admin\n")
        took = wait_for(lambda: body(client, filename) == "edited by an admin\n", within_s=2)
        assert took < 2
        assert hub.count("tree") == 0  # patched from the feed, not listed


def test_a_file_an_admin_adds_or_deletes_on_the_hub_shows_in_the_listing(
    hub: HubEmulator, tmp_path: Path
) -> None:
    with serve(hub, tmp_path) as client:
        register_agent(hub, client, "a1", "alice")
        kept = post(client, "a1", "kept")
        dropped = post(client, "a1", "dropped")
        wait_for(lambda: feed(client)["live"], within_s=5)
        assert client.get("/v1/messages").json()["items"] == [dropped, kept]
        hub.reset_counts()
        added = "20200101-000000-000_a1.md"
        hub.put(CENTRAL, f"message_board/{added}", b"---\nagent_id: a1\n---\nfrom the admin\n")
        hub.buckets.batch(CENTRAL, [{"type": "deleteFile", "path": f"message_board/{dropped}"}])

        def listed() -> bool:
            return bool(client.get("/v1/messages").json()["items"] == [kept, added])

        wait_for(listed, within_s=2)
        assert hub.count("tree") == 0


def test_warm_reads_cost_no_hub_request_past_the_ttl_while_the_feed_is_live(
    hub: HubEmulator, tmp_path: Path
) -> None:
    with serve(hub, tmp_path, LISTING_TTL_S="0.5") as client:
        register_agent(hub, client, "a1", "alice")
        register_agent(hub, client, "a2", "bob")
        wait_for(lambda: feed(client)["live"], within_s=5)
        applied = feed(client)["applied"]["changes"]
        post(client, "a1", "hello @a2")
        urls = ("/v1/messages?expand=true", "/v1/inbox/a2?expand=true", "/v1/agents?expand=true")
        for url in urls:
            assert client.get(url).status_code == 200
        # The post's own files come back on the feed under the Hub's hashes: not re-read.
        wait_for(lambda: feed(client)["applied"]["changes"] >= applied + 2, within_s=2)
        time.sleep(1.0)  # twice the TTL
        hub.reset_counts()
        for _ in range(3):
            for url in urls:
                assert client.get(url).status_code == 200
        assert hub.api_requests() == 0, hub.counts()


@pytest.mark.parametrize("refusal", ["404", "405"])
def test_without_a_served_feed_listings_fall_back_to_the_ttl(
    hub: HubEmulator, tmp_path: Path, refusal: str
) -> None:
    if refusal == "404":
        hub.buckets.feed_enabled = False  # not served here: the follower gives up
    else:
        hub.inject("bucket_events", Fault.status(405))  # refused: it retries with backoff
    with serve(hub, tmp_path, LISTING_TTL_S="1") as client:
        register_agent(hub, client, "a1", "alice")
        filename = post(client, "a1", "original")
        wait_for(lambda: hub.count("bucket_events") >= 1, within_s=5)
        if refusal == "404":
            wait_for(lambda: not feed(client)["following"], within_s=5)
        assert feed(client)["live"] is False
        assert body(client, filename) == "original\n"
        hub.reset_counts()
        hub.put(CENTRAL, f"message_board/{filename}", b"edited by an admin\n")
        wait_for(lambda: body(client, filename) == "edited by an admin\n", within_s=3)
        assert hub.count("tree") >= 1  # found by re-listing after the TTL
