"""An organizer's out-of-band edits (seed §4 harness, §7 the TTL, §9 human verdicts) on a
real server on loopback: local buckets follow the Hub's permissions (an org admin writes
any bucket of the org, central and audit included; a contributor only the buckets they
created), the read model picks an edit up within LISTING_TTL_S, a promoted result waits as
`pending` in the index, and a registration written out of band is served at once."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from fastapi.testclient import TestClient

from agenthub.bucketsync.app import create_app
from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.core.locks import Lease, Unfenced
from agenthub.bucketsync.identity.local import LocalIdentity
from agenthub.bucketsync.results.verification import mark_pending
from agenthub.bucketsync.settings import BucketSyncSettings, SettingsError
from agenthub.bucketsync.storage.base import Batch
from agenthub.bucketsync.storage.local import LocalBucketStore
from agenthub.clock import FrozenClock
from tests.bucketsync.conftest import ORG, SLUG, World, make_settings
from tests.support.servers import live_server

TTL_S = 2.0
INDEX = "results/verification_status.json"


@dataclass
class Site:
    world: World
    base: str
    clock: FrozenClock
    settings: BucketSyncSettings

    @property
    def hub(self) -> Hub:
        return self.world.hub

    @property
    def client(self) -> httpx.Client:
        return self.world.client  # type: ignore[return-value]

    def after_ttl(self) -> None:
        self.clock.advance(TTL_S + 0.1)

    def cli(self, user: str, *args: str) -> subprocess.CompletedProcess[str]:
        """`agenthub buckets ARGS` as `user`, in its own process, against this server."""
        env = {
            **os.environ,
            "BUCKETSYNC_URL": self.base,
            "BUCKETSYNC_TOKEN": self.world.tokens[user],
            "PYTHONPATH": os.pathsep.join(filter(None, ["src", os.environ.get("PYTHONPATH")])),
        }
        return subprocess.run(
            [sys.executable, "-m", "agenthub.cli", "buckets", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )


def serve(tmp_path: Path, **overrides: Any) -> Iterator[Site]:
    settings = make_settings(tmp_path / "data", LISTING_TTL_S=str(TTL_S), **overrides)
    clock = FrozenClock(datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC))
    identity = LocalIdentity(settings.data_dir / "users.json", org=ORG)
    store = LocalBucketStore(settings.data_dir, clock=clock)
    app = create_app(settings, store=store, identity=identity, clock=clock)
    with live_server(app) as base, httpx.Client(base_url=base, timeout=30) as client:
        world = World(client, app.state.hub, identity)  # type: ignore[arg-type]
        world.user("organizer", role="admin")
        world.user("alice")
        yield Site(world, base, clock, settings)


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    yield from serve(tmp_path)


def result(site: Site, agent: str, score: float) -> str:
    fm = {"score": score, "method": "m", "status": "agent-run", "description": "d"}
    path = f"results/r-{score}.md"
    text = "---\n" + yaml.safe_dump(fm) + "---\nran it\n"
    assert site.world.put(agent, path, text).status_code == 201
    response = site.client.post("/v1/results", json={"source": site.world.uri(agent, path)})
    assert response.status_code == 201, response.text
    return str(response.json()["filename"])


def put(site: Site, user: str, bucket: str, path: str, data: bytes) -> httpx.Response:
    return site.client.put(
        f"/local/buckets/{bucket}/files/{path}", content=data, headers=site.world.auth(user)
    )


def stored_index(site: Site) -> dict[str, str]:
    return dict(json.loads(site.hub.store.read(site.hub.central, INDEX) or b"{}"))


# -- who writes the central bucket -------------------------------------------------------------


def test_an_org_admin_uploads_a_harness_into_the_central_bucket_with_buckets_cp(
    site: Site, tmp_path: Path
) -> None:
    run = tmp_path / "run.py"
    run.write_text("print('harness')\n")
    target = f"hf://buckets/{site.hub.central}/{site.settings.harness_prefix}run.py"
    done = site.cli("organizer", "cp", str(run), target)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == target
    stored = site.hub.store.read(site.hub.central, f"{site.settings.harness_prefix}run.py")
    assert stored == b"print('harness')\n"


def test_a_contributors_buckets_cp_into_the_central_bucket_is_refused_with_a_hint(
    site: Site, tmp_path: Path
) -> None:
    run = tmp_path / "run.py"
    run.write_text("print('mine now')\n")
    done = site.cli("alice", "cp", str(run), f"hf://buckets/{site.hub.central}/harness/run.py")
    assert done.returncode == 1
    assert "error: FORBIDDEN: only admins of acme write" in done.stderr
    assert "hint: write your scratch bucket and promote from it" in done.stderr
    assert site.hub.store.read(site.hub.central, "harness/run.py") is None


@pytest.mark.parametrize(
    "path",
    [
        "README.md",
        INDEX,
        "harness/run.py",
        "agents/alice.md",
        "message_board/20990101-000000-000_alice.md",
        "inbox/bob/x.md",
        "audit/202603.jsonl",
    ],
)
def test_a_contributor_writes_no_central_file(site: Site, path: str) -> None:
    response = put(site, "alice", site.hub.central, path, b"forged")
    assert response.status_code == 403
    error = response.json()["error"]
    assert error["code"] == "FORBIDDEN" and "promote" in error["hint"]
    assert site.hub.store.read(site.hub.central, path) is None


@pytest.mark.parametrize(
    "path", ["README.md", "LEADERBOARD.md", "inbox/bob/x.md", "audit/x.jsonl", "notes.md"]
)
def test_an_org_admin_writes_any_central_file_even_where_promotions_may_not(
    site: Site, path: str
) -> None:
    response = put(site, "organizer", site.hub.central, path, b"# by hand\n")
    assert response.status_code == 201, response.text
    assert site.hub.store.read(site.hub.central, path) == b"# by hand\n"


def test_the_promotion_path_still_refuses_those_targets(site: Site) -> None:
    site.world.agent("agent-1", "alice")
    assert site.world.put("agent-1", "README.md", "# mine\n").status_code == 201
    response = site.client.post(
        "/v1/shared-resources:sync",
        json={"source": site.world.uri("agent-1", "README.md"), "dest_path": "README.md"},
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "INVALID_PATH"


def test_an_admin_of_the_audit_org_writes_the_private_eval_set(tmp_path: Path) -> None:
    # Single-org mode: the audit bucket is in ORG, so ORG's admins write it (seed §8).
    for site in serve(tmp_path, AUDIT_BUCKET=f"{ORG}/{SLUG}-audit"):
        audit = site.settings.audit_bucket
        path = f"{site.settings.private_dataset_prefix}eval.json"
        assert put(site, "organizer", audit, path, b"[2, 3]").status_code == 201
        assert put(site, "alice", audit, path, b"[]").status_code == 403
        assert site.hub.store.read(audit, path) == b"[2, 3]"


def test_nobody_writes_a_bucket_outside_their_namespaces(site: Site) -> None:
    # Two-org mode: the audit bucket is in acme-admin, where nobody here is a member.
    audit = site.settings.audit_bucket
    assert audit.startswith("acme-admin/")
    response = put(site, "organizer", audit, "private/eval.json", b"[]")
    assert response.status_code == 403


def test_an_org_admin_may_create_the_central_bucket_and_a_contributor_may_not(
    site: Site,
) -> None:
    url = f"/local/buckets/{site.hub.central}"
    refused = site.client.post(url, headers=site.world.auth("alice"))
    assert refused.status_code == 403 and "only an admin" in refused.json()["error"]["message"]
    again = site.client.post(url, headers=site.world.auth("organizer"))
    assert again.status_code == 200 and again.json()["created"] is False


def test_the_server_starts_on_a_central_bucket_its_org_admin_created(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "d")
    identity = LocalIdentity(settings.data_dir / "users.json", org=ORG)
    identity.add_user("organizer", role="admin")
    identity.add_user("alice", role="contributor")
    store = LocalBucketStore(settings.data_dir)
    store.create(settings.central_bucket, creator="organizer")
    with live_server(create_app(settings, store=store, identity=identity)) as base:
        assert httpx.get(f"{base}/v1/healthz").status_code == 200
    # A contributor's would let them write the record as its creator: refused.
    other = make_settings(tmp_path / "e")
    LocalBucketStore(other.data_dir).create(other.central_bucket, creator="alice")
    (other.data_dir / "users.json").write_bytes((settings.data_dir / "users.json").read_bytes())
    other_identity = LocalIdentity(other.data_dir / "users.json", org=ORG)
    with (
        pytest.raises(SettingsError, match="alice"),
        TestClient(create_app(other, identity=other_identity)),
    ):
        pass


# -- the read model picks the edits up within the TTL -------------------------------------------


def test_a_human_verdict_shows_on_results_the_leaderboard_and_the_dashboard_after_the_ttl(
    site: Site,
) -> None:
    site.world.agent("agent-1", "alice")
    first = result(site, "agent-1", 0.9)
    site.world.user("bob")
    site.world.agent("agent-2", "bob")
    second = result(site, "agent-2", 0.5)
    verdicts = json.dumps({first: "invalid", second: "valid"}).encode()
    assert put(site, "organizer", site.hub.central, INDEX, verdicts).status_code == 201
    # Within the TTL the cached index still answers (seed §7) ...
    assert site.client.get(f"/v1/results/{first}").json()["verification"] == "pending"
    site.after_ttl()
    # ... after it, every read shows the organizer's verdicts.
    assert site.client.get(f"/v1/results/{first}").json()["verification"] == "invalid"
    assert site.client.get("/v1/results", params={"verification": "valid"}).json()["items"] == [
        second
    ]
    rows = site.client.get("/v1/leaderboard").json()["rows"]
    assert [(r["agent"], r["verification"]) for r in rows] == [("agent-2", "valid")]
    dashboard = site.client.get("/dashboard/api/v1/leaderboard").json()["rows"]
    assert [(r["agent"], r["verification"]) for r in dashboard] == [("agent-2", "valid")]


def test_an_organizers_readme_is_served_after_the_ttl_from_another_process(site: Site) -> None:
    site.world.agent("agent-1", "alice")
    first = result(site, "agent-1", 0.9)
    assert site.client.get(f"/v1/results/{first}").json()["verification"] == "pending"
    # Another process writes the store directly (as a second server or a script would).
    script = (
        "import json,sys\n"
        "from agenthub.bucketsync.storage.base import Batch\n"
        "from agenthub.bucketsync.storage.local import LocalBucketStore\n"
        "LocalBucketStore(sys.argv[1]).write_batch(sys.argv[2], Batch(adds=[(sys.argv[3], "
        "json.dumps({sys.argv[4]: 'valid'}).encode())]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(site.settings.data_dir), site.hub.central, INDEX, first],
        env={**os.environ, "PYTHONPATH": "src"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert site.client.get(f"/v1/results/{first}").json()["verification"] == "pending"
    site.after_ttl()
    assert site.client.get(f"/v1/results/{first}").json()["verification"] == "valid"
    # ... and again: an edit after the first pickup is picked up too (nothing sticks).
    assert put(site, "organizer", site.hub.central, INDEX, b'{"%s": "invalid"}' % first.encode())
    site.after_ttl()
    assert site.client.get(f"/v1/results/{first}").json()["verification"] == "invalid"


# -- a promoted result waits as pending --------------------------------------------------------


def test_a_promoted_result_is_entered_as_pending_beside_the_human_verdicts(site: Site) -> None:
    site.world.agent("agent-1", "alice")
    first = result(site, "agent-1", 0.9)
    assert stored_index(site) == {first: "pending"}
    verdicts = json.dumps({first: "valid", "elsewhere.md": "invalid"}).encode()
    assert put(site, "organizer", site.hub.central, INDEX, verdicts).status_code == 201
    second = result(site, "agent-1", 0.95)
    assert stored_index(site) == {first: "valid", "elsewhere.md": "invalid", second: "pending"}
    # The service's own write is read back at once (write-through), the human's kept.
    assert site.client.get(f"/v1/results/{first}").json()["verification"] == "valid"


def test_an_unreadable_index_is_never_rewritten_and_the_promotion_stands(site: Site) -> None:
    site.world.agent("agent-1", "alice")
    assert put(site, "organizer", site.hub.central, INDEX, b"{not json").status_code == 201
    filename = result(site, "agent-1", 0.9)
    assert site.hub.store.read(site.hub.central, INDEX) == b"{not json"
    assert site.client.get(f"/v1/results/{filename}").json()["verification"] == "pending"


def test_concurrent_promotions_each_enter_their_result(site: Site) -> None:
    agents = [f"agent-{n}" for n in range(6)]
    for n, agent in enumerate(agents):
        site.world.user(f"user-{n}")
        site.world.agent(agent, f"user-{n}")
    found: list[str] = []
    start = threading.Barrier(len(agents))

    def promote(agent: str, score: float) -> None:
        start.wait()
        found.append(result(site, agent, score))

    threads = [
        threading.Thread(target=promote, args=(agent, 0.5 + n / 100))
        for n, agent in enumerate(agents)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(stored_index(site)) == sorted(found) and len(found) == len(agents)


class RendezvousStore:
    """The real store, except that a read of the index waits (up to 1 s) for a second
    reader: two read-modify-writes that are not serialized both read the old index. (Where
    they are serialized the first reader waits the whole `timeout` for the second.)"""

    def __init__(self, store: Any, *, timeout: float = 1.0) -> None:
        self._store = store
        self._meet = threading.Barrier(2, timeout=timeout)

    def read(self, bucket: str, path: str) -> bytes | None:
        if path == INDEX:
            with contextlib.suppress(threading.BrokenBarrierError):
                self._meet.wait()
        return self._store.read(bucket, path)  # type: ignore[no-any-return]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


class NoLocks:
    @contextlib.contextmanager
    def hold(self, name: str, *, wait_s: float = 30.0) -> Iterator[Lease]:
        yield Unfenced(name)


def enter_two(hub: Hub) -> dict[str, str]:
    threads = [threading.Thread(target=mark_pending, args=(hub, f"{n}.md")) for n in (1, 2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return dict(json.loads(hub.store.read(hub.central, INDEX) or b"{}"))


def test_two_entries_made_at_once_are_both_kept(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(site.hub, "store", RendezvousStore(site.hub.store))
    assert enter_two(site.hub) == {"1.md": "pending", "2.md": "pending"}


def test_without_the_index_lock_one_of_two_entries_is_lost(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Long enough for both threads to reach the read on a loaded machine (1 s was not).
    monkeypatch.setattr(site.hub, "store", RendezvousStore(site.hub.store, timeout=20.0))
    monkeypatch.setattr(site.hub, "locks", NoLocks())
    assert len(enter_two(site.hub)) == 1  # the broken variant: why INDEX_LOCK is held


# -- an out-of-band registration --------------------------------------------------------------


def test_a_registration_written_out_of_band_is_served_at_once(site: Site) -> None:
    assert site.client.get("/v1/agents").status_code == 200  # the listing is now cached
    registration = {
        "agent_name": "bob-agent",
        "hf_user": "bob",
        "agent_bucket": f"{ORG}/{SLUG}-bob-agent",
        "joined": "2026-03-01T11:00:00.000Z",
    }
    text = "---\n" + yaml.safe_dump(registration) + "---\nforced by hand\n"
    done = put(site, "organizer", site.hub.central, "agents/bob-agent.md", text.encode())
    assert done.status_code == 201
    # No TTL passes: the miss reads the stored file.
    agent = site.client.get("/v1/agents/bob-agent")
    assert agent.status_code == 200, agent.text
    assert agent.json()["hf_user"] == "bob" and agent.json()["bio"] == "forced by hand"
    posted = site.client.post("/v1/messages", json={"agent_id": "bob-agent", "body": "hi"})
    assert posted.status_code == 201, posted.text
    assert site.client.get("/v1/inbox/bob-agent").status_code == 200
    missing = site.client.get("/v1/agents/nobody")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "NOT_REGISTERED"


def test_an_out_of_band_registration_binds_its_id_at_once(site: Site) -> None:
    registration = {"agent_name": "taken", "hf_user": "bob", "joined": "2026-03-01T11:00:00Z"}
    text = "---\n" + yaml.safe_dump(registration) + "---\n"
    assert put(site, "organizer", site.hub.central, "agents/taken.md", text.encode())
    site.world.create_bucket("taken", "alice")
    bucket = site.world.bucket("taken")
    assert put(site, "alice", bucket, ".bucket-sync-handshake", b"alice").status_code == 201
    response = site.world.register("taken", "alice")
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "IDENTITY_MISMATCH"


def test_a_store_batch_written_beside_the_server_counts_as_out_of_band(site: Site) -> None:
    # The same process's store, not the bucket API: also picked up only through the TTL.
    site.world.agent("agent-1", "alice")
    first = result(site, "agent-1", 0.9)
    site.hub.store.write_batch(
        site.hub.central, Batch(adds=[(INDEX, json.dumps({first: "invalid"}).encode())])
    )
    site.after_ttl()
    assert site.client.get("/v1/leaderboard").json()["rows"] == []
