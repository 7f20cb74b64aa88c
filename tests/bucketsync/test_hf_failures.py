"""Every Hub failure is a clean retry: the hf adapters (and the service on them) against
the Hub emulator in each fault mode answer `StorageUnavailable` / 503 with `Retry-After`
within their deadline, never a vendor exception, and a write says truthfully whether it
may have been applied."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from huggingface_hub import HfApi

from agenthub.bucketsync.app import create_app
from agenthub.bucketsync.errors import StorageUnavailable
from agenthub.bucketsync.storage.base import Batch
from agenthub.bucketsync.storage.hf import HfBucketStore
from tests.bucketsync.test_hf_adapters import (
    AUDIT,
    B,
    client,
    hub,
    hub_settings,
    identity,
    register_agent,
    store,
)
from tests.support.hub_emulator import Fault, HubEmulator
from tests.support.servers import live_server

__all__ = ["client", "hub", "identity", "store"]

# -- every Hub failure is a clean retry -------------------------------------------------------

FAULTS = {
    "503": Fault.status(503),
    "500": Fault.status(500),
    "reset": Fault.reset(),
    "hang": Fault.hang(),
    "slow": Fault.slow(10),
}


def _calls(store: HfBucketStore) -> dict[str, object]:
    return {
        "info": lambda: store.info(B),
        "list": lambda: store.list(B, "x/"),
        "read": lambda: store.read(B, "a.md"),
        "read_many": lambda: store.read_many(B, ["a.md", "b.md"]),
        "write": lambda: store.write_batch(B, Batch(adds=[("x/a.md", b"x")])),
        "create": lambda: store.create("acme/other", creator="x"),
    }


@pytest.mark.parametrize("fault", list(FAULTS))
@pytest.mark.parametrize("call", ["info", "list", "read", "read_many", "write", "create"])
def test_every_fault_is_storage_unavailable_within_the_deadline(
    hub: HubEmulator, store: HfBucketStore, fault: str, call: str
) -> None:
    hub.put(B, "a.md", b"hello")
    hub.inject("*", FAULTS[fault])
    started = time.monotonic()
    with pytest.raises(StorageUnavailable):
        _calls(store)[call]()  # type: ignore[operator]
    assert time.monotonic() - started < 3 + 1  # the store's deadline is 3 s


@pytest.mark.parametrize("call", ["info", "list", "read", "write"])
def test_a_refusing_hub_is_storage_unavailable_at_once(
    hub: HubEmulator, store: HfBucketStore, call: str
) -> None:
    hub.put(B, "a.md", b"hello")
    with hub.refusing():
        started = time.monotonic()
        # Refused at connect, or a kept-alive connection dropped as the listener closed.
        with pytest.raises(StorageUnavailable, match=r"Connect|disconnected"):
            _calls(store)[call]()  # type: ignore[operator]
    assert time.monotonic() - started < 1


def test_a_refusing_xet_host_fails_the_write_as_not_applied(
    hub: HubEmulator, store: HfBucketStore
) -> None:
    with hub.refusing("cas"), pytest.raises(StorageUnavailable) as caught:
        store.write_batch(B, Batch(adds=[("x/a.md", b"x")]))
    assert "nothing was applied" in caught.value.message
    assert hub.count("batch") == 0 and "x/a.md" not in hub.files(B)


def test_a_429_is_answered_at_once_with_its_retry_after(
    hub: HubEmulator, store: HfBucketStore
) -> None:
    hub.inject("batch", Fault.rate_limited(retry_after=300))
    started = time.monotonic()
    with pytest.raises(StorageUnavailable) as caught:
        store.write_batch(B, Batch(adds=[("x/a.md", b"x")]))
    assert time.monotonic() - started < 1  # huggingface_hub alone sleeps 301 s here
    assert caught.value.retry_after_s == 300
    assert hub.count("batch") == 1  # asked once, not retried


def test_a_write_reset_after_it_landed_says_it_may_have_been_applied(
    hub: HubEmulator, store: HfBucketStore
) -> None:
    hub.inject("batch", Fault.reset(after_apply=True))
    with pytest.raises(StorageUnavailable) as caught:
        store.write_batch(B, Batch(adds=[("x/a.md", b"x")]))
    assert "may have been applied" in caught.value.message
    assert caught.value.hint == "retry with the same Idempotency-Key"
    assert hub.files(B)["x/a.md"] == b"x"  # it had landed


@pytest.mark.parametrize(
    ("fault", "told"),
    [
        (Fault.status(403), "nothing was applied"),
        (Fault.rate_limited(30), "nothing was applied"),
        (Fault.status(502), "may have been applied"),
        (Fault.hang(), "may have been applied"),
    ],
)
def test_a_failed_write_says_what_its_answer_means(
    hub: HubEmulator, store: HfBucketStore, fault: Fault, told: str
) -> None:
    hub.inject("batch", fault)
    with pytest.raises(StorageUnavailable) as caught:
        store.write_batch(B, Batch(adds=[("x/a.md", b"x")]))
    assert told in caught.value.message


def test_a_write_refused_before_sending_says_nothing_was_applied(
    hub: HubEmulator, store: HfBucketStore
) -> None:
    with hub.refusing(), pytest.raises(StorageUnavailable) as caught:
        store.write_batch(B, Batch(adds=[("x/a.md", b"x")]))
    assert "nothing was applied" in caught.value.message


def test_huggingface_hub_alone_sleeps_out_a_429_where_the_store_answers_at_once(
    hub: HubEmulator, store: HfBucketStore
) -> None:
    """The broken variant: the same client without `HubCalls` sleeps the Retry-After."""
    hub.put(B, "a.md", b"hello")
    hub.inject("paths_info", Fault.rate_limited(retry_after=2), times=1)
    started = time.monotonic()
    assert [f.path for f in HfApi(endpoint=hub.url).get_bucket_paths_info(B, ["a.md"])]
    assert time.monotonic() - started >= 3  # Retry-After + 1, slept in the caller's thread
    hub.inject("paths_info", Fault.rate_limited(retry_after=2), times=1)
    started = time.monotonic()
    with pytest.raises(StorageUnavailable):
        store.read_many(B, ["a.md"])
    assert time.monotonic() - started < 1


def test_real_hf_xet_against_a_refusing_storage_host_is_503_within_the_deadline() -> None:
    """No bridge here: hf_xet itself talks to the emulator's (refusing) CAS listener, with
    the session `bound_xet_session` configured (one attempt, deadline-long timeouts)."""
    hub = HubEmulator()
    try:
        hub.add_bucket(B)
        store = HfBucketStore(token="hf_admin", endpoint=hub.url, deadline_s=3)
        started = time.monotonic()
        with hub.refusing("cas"), pytest.raises(StorageUnavailable) as caught:
            store.write_batch(B, Batch(adds=[("a.md", b"hello")]))
        assert time.monotonic() - started < 3 + 3
        assert "nothing was applied" in caught.value.message
        assert hub.count("xet_token") == 1 and hub.count("batch") == 0
    finally:
        hub.stop()


# -- the service ---------------------------------------------------------------------------


def test_service_on_hf_storage_outage_is_503(hub: HubEmulator, client: TestClient) -> None:
    with hub.refusing():
        response = client.get("/v1/messages")
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "STORAGE_UNAVAILABLE"
    assert response.headers["Retry-After"] == "5"


def test_a_hub_429_reaches_the_client_as_503_with_its_retry_after(
    hub: HubEmulator, client: TestClient
) -> None:
    register_agent(hub, client, "a1", "alice", "t1")
    hub.inject("*", Fault.rate_limited(retry_after=300))
    started = time.monotonic()
    response = client.post("/v1/messages", json={"agent_id": "a1", "body": "hello"})
    assert time.monotonic() - started < 2
    assert response.status_code == 503
    assert response.headers["Retry-After"] == "300"
    assert response.json()["error"]["code"] == "STORAGE_UNAVAILABLE"


def test_a_served_bucket_sync_on_the_emulator_posts_then_answers_503_when_refused(
    hub: HubEmulator, tmp_path: Path
) -> None:
    hub.add_bucket(AUDIT, author="acme-admin", private=True)
    hub.add_bucket("acme/chal-a1", author="alice")
    hub.put("acme/chal-a1", ".bucket-sync-handshake", b"alice")
    hub.accounts.add_user("tok-alice", "alice", acme="contributor")
    settings = hub_settings(hub, tmp_path)
    with live_server(create_app(settings)) as url, httpx.Client(base_url=url) as http:
        bearer = {"Authorization": "Bearer tok-alice"}
        registered = http.post("/v1/agents/register", json={"agent_id": "a1"}, headers=bearer)
        assert registered.status_code == 201, registered.text
        posted = http.post("/v1/messages", json={"agent_id": "a1", "body": "hello"})
        assert posted.status_code == 201, posted.text
        assert f"message_board/{posted.json()['filename']}" in hub.files(B)
        with hub.refusing():
            started = time.monotonic()
            refused = http.post("/v1/messages", json={"agent_id": "a1", "body": "again"})
        assert time.monotonic() - started < 5
        assert refused.status_code == 503, refused.text
        assert refused.headers["Retry-After"] == "5"
        assert refused.json()["error"]["code"] == "STORAGE_UNAVAILABLE"


def test_a_hub_call_under_a_lease_ends_with_the_lease(
    hub: HubEmulator, store: HfBucketStore
) -> None:
    from agenthub.bucketsync.deadlines import within

    hub.inject("*", Fault.hang())
    started = time.monotonic()
    with within(0.5), pytest.raises(StorageUnavailable):
        store.info(B)  # the store's own deadline is 3 s
    assert time.monotonic() - started < 1.5
    hub.clear_faults()
    with within(0.0), pytest.raises(StorageUnavailable, match="lease"):
        store.info(B)
    assert hub.count("bucket_info") == 1  # the second call was never sent


def test_a_leased_lock_bounds_the_hub_calls_made_while_it_is_held(
    hub: HubEmulator, store: HfBucketStore
) -> None:
    from agenthub.bucketsync.core.locks import Leased, LocalLocks

    locks = Leased(LocalLocks(), lease_s=1.5, margin_s=1.0)  # 0.5 s for Hub calls
    hub.inject("*", Fault.hang())
    started = time.monotonic()
    with locks.hold("quota"), pytest.raises(StorageUnavailable):
        store.info(B)
    assert time.monotonic() - started < 1.5


def test_an_unexpected_failure_during_a_write_does_not_claim_it_was_not_applied(
    hub: HubEmulator, client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    register_agent(hub, client, "a1", "alice", "t1")
    store = client.app.state.hub.store  # type: ignore[attr-defined]
    landed = store.write_batch

    def lands_then_breaks(bucket: str, batch: Batch) -> None:
        landed(bucket, batch)
        raise RuntimeError("a bug after the write")

    monkeypatch.setattr(store, "write_batch", lands_then_breaks)
    unsafe = TestClient(client.app, raise_server_exceptions=False)
    hub.reset_counts()
    response = unsafe.post("/v1/messages", json={"agent_id": "a1", "body": "hello"})
    assert response.status_code == 500
    error = response.json()["error"]
    assert "not applied" not in error["message"] and "may have been applied" in error["message"]
    assert error["hint"] == "retry with the same Idempotency-Key"
    assert hub.count("batch") >= 1  # a write had landed before the failure
