"""Contract tests of the `hf` adapters against the recording huggingface_hub fake."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from agenthub.bucketsync.app import create_app
from agenthub.bucketsync.board.backfill import backfill_inbox
from agenthub.bucketsync.errors import StorageUnavailable, Unauthorized
from agenthub.bucketsync.identity.hf import HfIdentity
from agenthub.bucketsync.storage.base import Batch
from agenthub.bucketsync.storage.hf import HfBucketStore
from agenthub.clock import FrozenClock
from tests.bucketsync.conftest import make_settings
from tests.bucketsync.hf_fake import FakeHub, xet_hash

B = "acme/chal-main-bucket"


@pytest.fixture
def hub() -> FakeHub:
    fake = FakeHub(page_size=2)
    fake.add_bucket(B, author="acme")
    return fake


@pytest.fixture
def store(hub: FakeHub) -> HfBucketStore:
    return HfBucketStore(token="hf_admin", api=hub)


def test_info_maps_fields_and_missing_bucket_is_none(store: HfBucketStore) -> None:
    info = store.info(B)
    assert info is not None and info.id == B and not info.private
    assert info.creator is None  # the Hub does not say which user created a bucket
    assert store.info("acme/none") is None


def test_list_filters_lexical_prefix_matches_and_uses_xet_hash(
    hub: FakeHub, store: HfBucketStore
) -> None:
    hub.put(B, "logs/a.md", b"a")
    hub.put(B, "logs.json", b"{}")
    hub.put(B, "logs2/b.md", b"b")
    entries = store.list(B, "logs/")
    assert [e.path for e in entries] == ["logs/a.md"]
    assert entries[0].content_hash == xet_hash(b"a")
    assert ("list_bucket_tree", (B, "logs", True)) in hub.calls


def test_list_follows_every_page(hub: FakeHub, store: HfBucketStore) -> None:
    for i in range(7):
        hub.put(B, f"message_board/{i}.md", b"x")
    assert len(store.list(B, "message_board/")) == 7
    assert [c for c in hub.calls if c[0] == "tree_page"] == [("tree_page", i) for i in range(4)]


def test_list_failure_mid_pagination_is_503_not_a_short_page(
    hub: FakeHub, store: HfBucketStore
) -> None:
    for i in range(7):
        hub.put(B, f"message_board/{i}.md", b"x")
    hub.fail_listing_after_pages = 2
    with pytest.raises(StorageUnavailable):
        store.list(B, "message_board/")


def test_listing_a_missing_bucket_is_503_not_empty(store: HfBucketStore) -> None:
    with pytest.raises(StorageUnavailable):
        store.list("acme/none", "agents/")


def test_read_existing_missing_and_in_missing_bucket(hub: FakeHub, store: HfBucketStore) -> None:
    hub.put(B, "a.md", b"hello")
    assert store.read(B, "a.md") == b"hello"
    assert store.read(B, "b.md") is None
    assert store.read("acme/none", "a.md") is None


def test_read_many_is_one_download_call(hub: FakeHub, store: HfBucketStore) -> None:
    for name in ("a", "b", "c"):
        hub.put(B, f"{name}.md", name.encode())
    found = store.read_many(B, ["a.md", "b.md", "zz.md", "c.md"])
    assert found == {"a.md": b"a", "b.md": b"b", "c.md": b"c"}
    assert len([c for c in hub.calls if c[0] == "download_bucket_files"]) == 1


def test_hub_outage_is_503(hub: FakeHub, store: HfBucketStore) -> None:
    hub.down = True
    for call in (
        lambda: store.info(B),
        lambda: store.read(B, "a"),
        lambda: store.write_batch(B, Batch(adds=[("a", b"x")])),
    ):
        with pytest.raises(StorageUnavailable):
            call()


def test_write_batch_is_one_call_in_order_with_copy_by_hash(
    hub: FakeHub, store: HfBucketStore
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
    batches = [c[1] for c in hub.calls if c[0] == "batch_bucket_files"]
    assert batches == [
        {
            "bucket": B,
            "add": ["inbox/x/m.md", "message_board/m.md"],
            "copy": [("bucket", "acme/chal-a1", xet_hash(b"payload"), "artifacts/s_a1/art.bin")],
            "delete": [],
        }
    ]
    assert hub.files(B)["artifacts/s_a1/art.bin"] == b"payload"


def test_partial_batch_failure_is_503_and_reports_failed_paths(
    hub: FakeHub, store: HfBucketStore
) -> None:
    hub.fail_paths = {"message_board/m.md"}
    with pytest.raises(StorageUnavailable, match=r"message_board/m\.md"):
        store.write_batch(B, Batch(adds=[("inbox/x/m.md", b"m"), ("message_board/m.md", b"m")]))
    assert "inbox/x/m.md" in hub.files(B)  # non-transactional: the rest was applied


# -- identity ------------------------------------------------------------------------------


@pytest.fixture
def identity(hub: FakeHub) -> HfIdentity:
    hub.tokens["tok-alice"] = {
        "name": "Alice",
        "email": "alice@acme.io",
        "orgs": [{"name": "acme", "roleInOrg": "contributor"}, {"name": "other"}],
    }
    hub.members["acme"] = [
        {"user": "Alice", "role": "contributor"},
        {"user": "boss", "role": "admin"},
    ]
    return HfIdentity(
        admin_token="hf_admin",
        api=hub,
        email_lookup=lambda *a: [],
        clock=FrozenClock(),
        roles_ttl_s=300,
    )


def test_whoami_maps_user_email_and_org_roles(identity: HfIdentity) -> None:
    caller = identity.whoami("tok-alice")
    assert caller.user == "Alice" and caller.email == "alice@acme.io"
    assert caller.orgs == {"acme": "contributor", "other": None}


def test_whoami_rejected_token_is_401_and_outage_is_503(hub: FakeHub, identity: HfIdentity) -> None:
    with pytest.raises(Unauthorized):
        identity.whoami("tok-nobody")
    hub.down = True
    with pytest.raises(StorageUnavailable):
        identity.whoami("tok-alice")


def test_org_role_uses_a_cached_member_map(hub: FakeHub, identity: HfIdentity) -> None:
    assert identity.org_role("acme", "boss") == "admin"
    assert identity.org_role("acme", "alice") == "contributor"
    assert identity.org_role("acme", "stranger") is None
    assert len([c for c in hub.calls if c[0] == "list_organization_members"]) == 1


def test_org_role_email_lookup_first_then_scan(hub: FakeHub) -> None:
    lookups: list[tuple[str, str]] = []

    def by_email(org: str, email: str, token: str | None) -> list[dict[str, str]]:
        lookups.append((org, email))
        return [{"user": "boss", "role": "admin"}] if email == "boss@acme.io" else []

    identity = HfIdentity(admin_token="t", api=hub, email_lookup=by_email, clock=FrozenClock())
    hub.members["acme"] = [{"user": "carol", "role": "write"}]
    assert identity.org_role("acme", "boss", "boss@acme.io") == "admin"
    assert not [c for c in hub.calls if c[0] == "list_organization_members"]
    assert identity.org_role("acme", "carol", "carol@acme.io") == "write"  # miss -> scan


def test_member_lookup_failure_is_503(hub: FakeHub, identity: HfIdentity) -> None:
    hub.down = True
    with pytest.raises(StorageUnavailable):
        identity.org_role("acme", "boss")


# -- the service on the hf adapters --------------------------------------------------------


@pytest.fixture
def client(hub: FakeHub, identity: HfIdentity, tmp_path: Path) -> Iterator[TestClient]:
    hub.add_bucket("acme-admin/chal-audit", author="acme-admin", private=True)
    settings = make_settings(tmp_path, BUCKETSYNC_STORAGE="hf", HF_TOKEN="hf_admin")
    app = create_app(
        settings,
        store=HfBucketStore(token="hf_admin", api=hub),
        identity=identity,
        clock=FrozenClock(),
    )
    with TestClient(app) as test_client:
        yield test_client


def _register(hub: FakeHub, client: TestClient, agent: str, user: str, token: str) -> None:
    hub.tokens[token] = {"name": user, "orgs": [{"name": "acme", "roleInOrg": "contributor"}]}
    hub.add_bucket(f"acme/chal-{agent}", author=user)
    hub.put(f"acme/chal-{agent}", ".bucket-sync-handshake", user.encode())
    response = client.post(
        "/v1/agents/register",
        json={"agent_id": agent},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert response.status_code == 201, response.text


def test_service_on_hf_promotes_with_fanout_board_last(hub: FakeHub, client: TestClient) -> None:
    _register(hub, client, "a1", "alice", "t1")
    _register(hub, client, "a2", "bob", "t2")
    hub.put("acme/chal-a1", "m.md", b"hi @a2")
    response = client.post("/v1/messages", json={"source": "hf://buckets/acme/chal-a1/m.md"})
    assert response.status_code == 201, response.text
    filename = response.json()["filename"]
    batch = [c[1] for c in hub.calls if c[0] == "batch_bucket_files" and c[1]["bucket"] == B][-1]
    assert batch["add"] == [f"inbox/a2/{filename}", f"message_board/{filename}"]
    inbox = client.get("/v1/inbox/a2?expand=true").json()
    assert [item["body"] for item in inbox["items"]] == ["hi @a2\n"]
    assert any(path.startswith("audit/") for path in hub.files("acme-admin/chal-audit"))


def _three_agents(hub: FakeHub, client: TestClient) -> None:
    _register(hub, client, "a1", "alice", "t1")
    _register(hub, client, "a2", "bob", "t2")
    _register(hub, client, "a3", "carol", "t3")


def test_bs_7_22_copy_failure_in_the_batch_is_retried_once(
    hub: FakeHub, client: TestClient
) -> None:
    _three_agents(hub, client)
    original = hub.batch_bucket_files
    attempts: list[list[str]] = []

    def flaky_once(bucket_id: str, **kwargs):  # type: ignore[no-untyped-def]
        paths = [path for _, path in kwargs.get("add") or []]
        if bucket_id == B:
            attempts.append(paths)
        first = len(attempts) == 1 and bucket_id == B
        hub.fail_paths = {p for p in paths if p.startswith("inbox/a3/")} if first else set()
        try:
            return original(bucket_id, **kwargs)
        finally:
            hub.fail_paths = set()

    hub.batch_bucket_files = flaky_once  # type: ignore[method-assign]
    response = client.post("/v1/messages", json={"agent_id": "a1", "body": "@a2 @a3"})
    hub.batch_bucket_files = original  # type: ignore[method-assign]
    assert response.status_code == 201
    filename = response.json()["filename"]
    assert attempts[-1] == [f"inbox/a3/{filename}"]
    assert client.get("/v1/inbox/a3").json()["items"] == [filename]


def test_bs_7_22_lost_copy_is_counted_and_backfill_heals(hub: FakeHub, client: TestClient) -> None:
    _three_agents(hub, client)
    original = hub.batch_bucket_files

    def always_fail_a3(bucket_id: str, **kwargs):  # type: ignore[no-untyped-def]
        hub.fail_paths = {p for _, p in kwargs.get("add") or [] if p.startswith("inbox/a3/")}
        try:
            return original(bucket_id, **kwargs)
        finally:
            hub.fail_paths = set()

    hub.batch_bucket_files = always_fail_a3  # type: ignore[method-assign]
    response = client.post("/v1/messages", json={"agent_id": "a1", "body": "@a2 @a3"})
    hub.batch_bucket_files = original  # type: ignore[method-assign]
    assert response.status_code == 201  # the board file landed: the message is committed
    assert client.get("/v1/healthz").json()["writes"]["repairs_pending"] == 1
    assert not any(p.startswith("inbox/a3/") for p in hub.files(B))
    report = backfill_inbox(HfBucketStore(token="x", api=hub), B, fanout_cap=10)
    assert report.copies_written == 1
    assert any(p.startswith("inbox/a3/") for p in hub.files(B))


def test_bs_7_22_failed_board_file_is_503(hub: FakeHub, client: TestClient) -> None:
    _three_agents(hub, client)
    original = hub.batch_bucket_files

    def fail_board(bucket_id: str, **kwargs):  # type: ignore[no-untyped-def]
        hub.fail_paths = {p for _, p in kwargs.get("add") or [] if p.startswith("message_")}
        try:
            return original(bucket_id, **kwargs)
        finally:
            hub.fail_paths = set()

    hub.batch_bucket_files = fail_board  # type: ignore[method-assign]
    response = client.post("/v1/messages", json={"agent_id": "a1", "body": "@a2"})
    hub.batch_bucket_files = original  # type: ignore[method-assign]
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "STORAGE_UNAVAILABLE"
    assert client.get("/v1/messages").json()["count"] == 0


def test_service_on_hf_storage_outage_is_503(hub: FakeHub, client: TestClient) -> None:
    hub.down = True
    response = client.get("/v1/messages")
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "STORAGE_UNAVAILABLE"


def test_storage_hf_selects_the_hf_adapters_with_the_env_token(tmp_path: Path) -> None:
    from agenthub.bucketsync.app import default_adapters

    settings = make_settings(tmp_path, BUCKETSYNC_STORAGE="hf", HF_TOKEN="hf_admin")
    store, identity = default_adapters(settings)
    assert isinstance(store, HfBucketStore) and isinstance(identity, HfIdentity)
    assert store._token == "hf_admin"
    local_store, _ = default_adapters(make_settings(tmp_path))
    assert not isinstance(local_store, HfBucketStore)


def test_bs_1_8_agent_id_stays_bound_to_its_first_user(hub: FakeHub, client: TestClient) -> None:
    _register(hub, client, "a1", "alice", "t1")
    # On HF bucket control rests on the handshake; even a valid handshake for bob cannot
    # move a registered id to him.
    hub.tokens["t2"] = {"name": "bob", "orgs": [{"name": "acme", "roleInOrg": "contributor"}]}
    hub.put("acme/chal-a1", ".bucket-sync-handshake", b"bob")
    response = client.post(
        "/v1/agents/register",
        json={"agent_id": "a1", "force": True},
        headers={"Authorization": "Bearer t2"},
    )
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "IDENTITY_MISMATCH"


def test_hints_on_hf_name_the_hf_cli(hub: FakeHub, client: TestClient) -> None:
    hub.tokens["t1"] = {"name": "alice", "orgs": [{"name": "acme", "roleInOrg": "contributor"}]}
    response = client.post(
        "/v1/agents/register", json={"agent_id": "a1"}, headers={"Authorization": "Bearer t1"}
    )
    assert response.status_code == 412
    assert response.json()["error"]["hint"] == "hf buckets create acme/chal-a1"
