"""Contract tests of the `hf` adapters: the real huggingface_hub client over HTTP against
the Hub emulator on loopback (tests/support/hub_emulator)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from agenthub.bucketsync.app import create_app
from agenthub.bucketsync.board.backfill import backfill_inbox
from agenthub.bucketsync.errors import StorageUnavailable, Unauthorized
from agenthub.bucketsync.identity.hf import HfIdentity
from agenthub.bucketsync.settings import BucketSyncSettings
from agenthub.bucketsync.storage.base import Batch
from agenthub.bucketsync.storage.hf import HfBucketStore
from agenthub.clock import FrozenClock
from tests.bucketsync.conftest import make_settings
from tests.support.hub_emulator import Fault, HubEmulator, HubRequest, running_hub, xet_hash
from tests.support.hub_emulator.wire import Route

B = "acme/chal-main-bucket"
AUDIT = "acme-admin/chal-audit"


@pytest.fixture
def hub() -> Iterator[HubEmulator]:
    # The Xet bridge gets the 3 s the store's `bound_xet_session` would give hf_xet.
    with running_hub(page_size=2, xet_timeout_s=3) as emulator:
        emulator.add_bucket(B, author="acme")
        yield emulator


@pytest.fixture
def store(hub: HubEmulator) -> HfBucketStore:
    return HfBucketStore(token="hf_admin", endpoint=hub.url, deadline_s=3)


def test_info_maps_fields_and_missing_bucket_is_none(store: HfBucketStore) -> None:
    info = store.info(B)
    assert info is not None and info.id == B and not info.private
    assert info.creator is None  # the Hub does not say which user created a bucket
    assert store.info("acme/none") is None


def test_create_is_idempotent(hub: HubEmulator, store: HfBucketStore) -> None:
    assert store.create("acme/new", creator="x", private=True).private
    assert store.create("acme/new", creator="x", private=True).id == "acme/new"
    assert hub.count("bucket_create") == 2


def test_list_filters_lexical_prefix_matches_and_uses_xet_hash(
    hub: HubEmulator, store: HfBucketStore
) -> None:
    hub.put(B, "logs/a.md", b"a")
    hub.put(B, "logs.json", b"{}")
    hub.put(B, "logs2/b.md", b"b")
    entries = store.list(B, "logs/")
    assert [e.path for e in entries] == ["logs/a.md"]
    assert entries[0].content_hash == xet_hash(b"a")
    # "logs" also matches logs.json and logs2/ on the Hub: two pages of two.
    assert [r.path for r in hub.requests] == [f"/api/buckets/{B}/tree/logs"] * 2


def test_list_follows_every_page(hub: HubEmulator, store: HfBucketStore) -> None:
    for i in range(7):
        hub.put(B, f"message_board/{i}.md", b"x")
    assert len(store.list(B, "message_board/")) == 7
    assert hub.count("tree") == 4  # pages of 2


def test_list_failure_mid_pagination_is_503_not_a_short_page(
    hub: HubEmulator, store: HfBucketStore
) -> None:
    for i in range(7):
        hub.put(B, f"message_board/{i}.md", b"x")
    hub.add_policy(lambda request, route: Fault.status(502) if "cursor" in request.query else None)
    with pytest.raises(StorageUnavailable):
        store.list(B, "message_board/")


def test_listing_a_missing_bucket_is_503_not_empty(store: HfBucketStore) -> None:
    with pytest.raises(StorageUnavailable):
        store.list("acme/none", "agents/")


def test_read_existing_missing_and_in_missing_bucket(
    hub: HubEmulator, store: HfBucketStore
) -> None:
    hub.put(B, "a.md", b"hello")
    assert store.read(B, "a.md") == b"hello"
    assert store.read(B, "b.md") is None
    assert store.read("acme/none", "a.md") is None


def test_read_many_asks_paths_info_once(hub: HubEmulator, store: HfBucketStore) -> None:
    for name in ("a", "b", "c"):
        hub.put(B, f"{name}.md", name.encode())
    found = store.read_many(B, ["a.md", "b.md", "zz.md", "c.md"])
    assert found == {"a.md": b"a", "b.md": b"b", "c.md": b"c"}
    assert hub.count("paths_info") == 1


def test_write_batch_is_one_batch_in_order_with_copy_by_hash(
    hub: HubEmulator, store: HfBucketStore
) -> None:
    hub.add_bucket("acme/chal-a1", author="alice")
    hub.put("acme/chal-a1", "art.bin", b"payload")
    store.write_batch(
        B,
        Batch(
            adds=[("inbox/x/m.md", b"m"), ("message_board/m.md", b"m")],
            copies=[("acme/chal-a1", xet_hash(b"payload"), "artifacts/s_a1/art.bin")],
        ),
    )
    assert hub.count("batch") == 1
    assert hub.files(B) == {
        "inbox/x/m.md": b"m",
        "message_board/m.md": b"m",
        "artifacts/s_a1/art.bin": b"payload",
    }


def test_partial_batch_failure_is_503_and_reports_failed_paths(
    hub: HubEmulator, store: HfBucketStore
) -> None:
    hub.buckets.fail_paths = {"message_board/m.md"}
    with pytest.raises(StorageUnavailable, match=r"message_board/m\.md"):
        store.write_batch(B, Batch(adds=[("inbox/x/m.md", b"m"), ("message_board/m.md", b"m")]))
    assert "inbox/x/m.md" in hub.files(B)  # non-transactional: the rest was applied


# -- identity ----------------------------------------------------------------------------------


@pytest.fixture
def identity(hub: HubEmulator) -> HfIdentity:
    hub.accounts.tokens["tok-alice"] = {
        "name": "Alice",
        "email": "alice@acme.io",
        "orgs": [{"name": "acme", "roleInOrg": "contributor"}, {"name": "other"}],
    }
    hub.accounts.members["acme"] = [
        {"user": "Alice", "role": "contributor"},
        {"user": "boss", "role": "admin", "email": "boss@acme.io"},
        {"user": "carol", "role": "write"},
    ]
    return HfIdentity(
        admin_token="hf_admin", endpoint=hub.url, deadline_s=3, clock=FrozenClock(), roles_ttl_s=300
    )


def test_whoami_maps_user_email_and_org_roles(identity: HfIdentity) -> None:
    caller = identity.whoami("tok-alice")
    assert caller.user == "Alice" and caller.email == "alice@acme.io"
    assert caller.orgs == {"acme": "contributor", "other": None}


def test_whoami_rejected_token_is_401_and_outage_is_503(
    hub: HubEmulator, identity: HfIdentity
) -> None:
    with pytest.raises(Unauthorized):
        identity.whoami("tok-nobody")
    with hub.refusing(), pytest.raises(StorageUnavailable):
        identity.whoami("tok-alice")
    hub.inject("whoami", Fault.rate_limited(60))
    with pytest.raises(StorageUnavailable) as caught:
        identity.whoami("tok-alice")
    assert caught.value.retry_after_s == 60


def test_org_role_uses_a_cached_member_map_across_pages(
    hub: HubEmulator, identity: HfIdentity
) -> None:
    assert identity.org_role("acme", "boss") == "admin"
    assert identity.org_role("acme", "alice") == "contributor"
    assert identity.org_role("acme", "carol") == "write"  # on the second page
    assert identity.org_role("acme", "stranger") is None
    assert hub.count("org_members") == 2  # one scan of two pages, then the cache


def test_org_role_email_lookup_first_then_scan(hub: HubEmulator, identity: HfIdentity) -> None:
    assert identity.org_role("acme", "boss", "boss@acme.io") == "admin"
    assert [r.path for r in hub.requests] == ["/api/organizations/acme/members"]
    assert hub.requests[0].method == "GET" and hub.count("org_members") == 1
    assert identity.org_role("acme", "carol", "carol@acme.io") == "write"  # miss -> scan


def test_org_role_falls_back_to_the_scan_when_the_email_lookup_fails(
    hub: HubEmulator, identity: HfIdentity
) -> None:
    # agent-collabs' test_broadcast_falls_back_when_email_lookup_errors: the targeted
    # lookup is best effort, so an organizer can still broadcast while it fails.
    hub.inject("org_members", Fault.status(502), times=1)
    assert identity.org_role("acme", "boss", "boss@acme.io") == "admin"
    assert hub.count("org_members") == 3  # the failed lookup, then the scan's two pages


def test_the_email_lookup_is_cached_for_the_roles_ttl_a_failure_is_not(
    hub: HubEmulator,
) -> None:
    # A signed-in human who is no member (whoami lists no org) asks /v1/me again and
    # again: one members request per roles TTL, not one per call.
    hub.accounts.members["acme"] = [{"user": "boss", "role": "admin", "email": "boss@acme.io"}]
    clock = FrozenClock()
    identity = HfIdentity(
        admin_token="hf_admin", endpoint=hub.url, deadline_s=3, clock=clock, roles_ttl_s=300
    )
    assert identity.org_role("acme", "boss", "boss@acme.io") == "admin"
    assert identity.org_role("acme", "boss", "Boss@acme.io") == "admin"
    assert hub.count("org_members") == 1
    clock.advance(301)
    assert identity.org_role("acme", "boss", "boss@acme.io") == "admin"
    assert hub.count("org_members") == 2
    hub.inject("org_members", Fault.status(502), times=1)
    clock.advance(301)
    identity.org_role("acme", "boss", "boss@acme.io")  # failed lookup, then the scan
    before = hub.count("org_members")
    assert identity.org_role("acme", "boss", "boss@acme.io") == "admin"
    assert hub.count("org_members") == before + 1  # the failure was not kept


def test_member_lookup_failure_is_503(hub: HubEmulator, identity: HfIdentity) -> None:
    hub.inject("org_members", Fault.status(502))
    with pytest.raises(StorageUnavailable):
        identity.org_role("acme", "boss")


# -- the service on the hf adapters --------------------------------------------------------


def hub_settings(hub: HubEmulator, tmp_path: Path, **overrides: str) -> BucketSyncSettings:
    """bucket-sync on the emulator: the hf adapters, the org admin's token, 3 s Hub calls."""
    return make_settings(
        tmp_path,
        BUCKETSYNC_STORAGE="hf",
        HF_TOKEN="hf_admin",
        HF_ENDPOINT=hub.url,
        HUB_CALL_DEADLINE_S="3",
        **overrides,
    )


@pytest.fixture
def client(hub: HubEmulator, identity: HfIdentity, tmp_path: Path) -> Iterator[TestClient]:
    hub.add_bucket(AUDIT, author="acme-admin", private=True)
    settings = make_settings(
        tmp_path, BUCKETSYNC_STORAGE="hf", HF_TOKEN="hf_admin", HF_ENDPOINT=hub.url
    )
    app = create_app(
        settings,
        store=HfBucketStore(token="hf_admin", endpoint=hub.url, deadline_s=3),
        identity=identity,
        clock=FrozenClock(),
    )
    with TestClient(app) as test_client:
        yield test_client


def register_agent(
    hub: HubEmulator, client: TestClient, agent: str, user: str, token: str | None = None
) -> None:
    """`user` (a contributor of acme, with `token`) registers `agent` through its own bucket."""
    token = token or f"tok-{user}"
    hub.accounts.tokens[token] = {
        "name": user,
        "orgs": [{"name": "acme", "roleInOrg": "contributor"}],
    }
    hub.add_bucket(f"acme/chal-{agent}", author=user)
    hub.put(f"acme/chal-{agent}", ".bucket-sync-handshake", user.encode())
    response = client.post(
        "/v1/agents/register",
        json={"agent_id": agent},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert response.status_code == 201, response.text


def test_service_on_hf_promotes_with_fanout_board_last(
    hub: HubEmulator, client: TestClient
) -> None:
    register_agent(hub, client, "a1", "alice", "t1")
    register_agent(hub, client, "a2", "bob", "t2")
    hub.put("acme/chal-a1", "m.md", b"hi @a2")
    hub.reset_counts()
    response = client.post("/v1/messages", json={"source": "hf://buckets/acme/chal-a1/m.md"})
    assert response.status_code == 201, response.text
    filename = response.json()["filename"]
    central = [r for r in hub.requests if r.route == "batch" and B in r.path]
    assert central, "the post wrote the central bucket"
    assert f"inbox/a2/{filename}" in hub.files(B) and f"message_board/{filename}" in hub.files(B)
    inbox = client.get("/v1/inbox/a2?expand=true").json()
    assert [item["body"] for item in inbox["items"]] == ["hi @a2\n"]
    assert any(path.startswith("audit/") for path in hub.files(AUDIT))


def _three_agents(hub: HubEmulator, client: TestClient) -> None:
    register_agent(hub, client, "a1", "alice", "t1")
    register_agent(hub, client, "a2", "bob", "t2")
    register_agent(hub, client, "a3", "carol", "t3")


def _fail_paths_once(hub: HubEmulator, prefix: str, times: int | None) -> None:
    """Fail the `prefix…` operations of `times` central batches (None: of every one), the
    way the Hub answers a batch it applied in part."""
    left = [times]

    def policy(request: HubRequest, route: Route) -> None:
        hub.buckets.fail_paths = set()
        if route.name != "batch" or B not in request.path or left[0] == 0:
            return
        lines = [json.loads(line) for line in request.body.splitlines() if line.strip()]
        hub.buckets.fail_paths = {
            str(line["path"]) for line in lines if str(line["path"]).startswith(prefix)
        }
        if left[0] is not None:
            left[0] -= 1

    hub.add_policy(policy)


def test_bs_7_22_copy_failure_in_the_batch_is_retried_once(
    hub: HubEmulator, client: TestClient
) -> None:
    _three_agents(hub, client)
    _fail_paths_once(hub, "inbox/a3/", times=1)
    response = client.post("/v1/messages", json={"agent_id": "a1", "body": "@a2 @a3"})
    assert response.status_code == 201
    filename = response.json()["filename"]
    assert client.get("/v1/inbox/a3").json()["items"] == [filename]


def test_bs_7_22_lost_copy_is_counted_and_backfill_heals(
    hub: HubEmulator, client: TestClient
) -> None:
    _three_agents(hub, client)
    _fail_paths_once(hub, "inbox/a3/", times=None)
    response = client.post("/v1/messages", json={"agent_id": "a1", "body": "@a2 @a3"})
    assert response.status_code == 201  # the board file landed: the message is committed
    assert client.get("/v1/healthz").json()["writes"]["repairs_pending"] == 1
    assert not any(p.startswith("inbox/a3/") for p in hub.files(B))
    hub.clear_faults()
    hub.buckets.fail_paths = set()
    report = backfill_inbox(HfBucketStore(token="x", endpoint=hub.url), B, fanout_cap=10)
    assert report.copies_written == 1
    assert any(p.startswith("inbox/a3/") for p in hub.files(B))


def test_bs_7_22_failed_board_file_is_503(hub: HubEmulator, client: TestClient) -> None:
    _three_agents(hub, client)
    _fail_paths_once(hub, "message_", times=None)
    response = client.post("/v1/messages", json={"agent_id": "a1", "body": "@a2"})
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "STORAGE_UNAVAILABLE"
    hub.clear_faults()
    hub.buckets.fail_paths = set()
    assert client.get("/v1/messages").json()["count"] == 0


def test_storage_hf_selects_the_hf_adapters_with_the_env_token(tmp_path: Path) -> None:
    from agenthub.bucketsync.app.adapters import default_adapters

    settings = make_settings(
        tmp_path, BUCKETSYNC_STORAGE="hf", HF_TOKEN="hf_admin", HF_ENDPOINT="http://127.0.0.1:9"
    )
    store, identity = default_adapters(settings)
    assert isinstance(store, HfBucketStore) and isinstance(identity, HfIdentity)
    assert store._token == "hf_admin" and store._api.endpoint == "http://127.0.0.1:9"
    local_store, _ = default_adapters(make_settings(tmp_path))
    assert not isinstance(local_store, HfBucketStore)


def test_bs_1_8_agent_id_stays_bound_to_its_first_user(
    hub: HubEmulator, client: TestClient
) -> None:
    register_agent(hub, client, "a1", "alice", "t1")
    # On HF bucket control rests on the handshake; even a valid handshake for bob cannot
    # move a registered id to him.
    hub.accounts.tokens["t2"] = {
        "name": "bob",
        "orgs": [{"name": "acme", "roleInOrg": "contributor"}],
    }
    hub.put("acme/chal-a1", ".bucket-sync-handshake", b"bob")
    response = client.post(
        "/v1/agents/register",
        json={"agent_id": "a1", "force": True},
        headers={"Authorization": "Bearer t2"},
    )
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "IDENTITY_MISMATCH"


def test_hints_on_hf_name_the_hf_cli(hub: HubEmulator, client: TestClient) -> None:
    hub.accounts.tokens["t1"] = {
        "name": "alice",
        "orgs": [{"name": "acme", "roleInOrg": "contributor"}],
    }
    response = client.post(
        "/v1/agents/register", json={"agent_id": "a1"}, headers={"Authorization": "Bearer t1"}
    )
    assert response.status_code == 412
    assert response.json()["error"]["hint"] == "hf buckets create acme/chal-a1"
