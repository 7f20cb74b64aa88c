"""Two bucket-sync hosts on one S3 bucket, nothing else shared: two real `serve` processes
with separate data directories and no Redis (so no lock they both see), against moto's S3
server serving one request at a time (each conditional put atomic, as on AWS S3:
`tests.support.s3server`).

- Identity is the users document in the bucket (`identity.stored`): a user added with
  `users add` on host A authenticates on host B, and a revoke on A holds on B.
- Verdicts committed concurrently through both hosts all land in the verification index
  (compare-and-swap, `core.shared`); the broken variant, the same edit as a plain
  read-modify-write (`Hub.swaps` off: each host's lock guards only itself), loses one.
- Two hosts launching at once stay within the job quota (a reservation swapped into the
  ledger), where the plain rewrite launches both and records one; two hosts dispatching one
  queue launch each entry once.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest

from agenthub.bucketsync.app import create_app
from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.errors import RateLimited
from agenthub.bucketsync.identity.local import LocalIdentity
from agenthub.bucketsync.identity.stored import StoredUsers
from agenthub.bucketsync.results.verification import VERIFICATION_INDEX
from agenthub.bucketsync.scoring.queue import QUEUE_PATH, ScoringQueue
from agenthub.bucketsync.scoring.quota import JobQuota, NamedQuotaLock, QuotaLedger
from agenthub.bucketsync.scoring.verdicts import VerdictBook
from agenthub.bucketsync.storage.base import Batch, Versioned
from agenthub.bucketsync.storage.s3 import S3BucketStore
from tests.bucketsync.conftest import ORG, make_settings
from tests.bucketsync.coordination.test_multiworker import promote_result
from tests.bucketsync.scoring.conftest import eventually
from tests.bucketsync.test_multiworker import HttpWorld, serve, serve_env, stop
from tests.bucketsync.test_s3_store import s3_store
from tests.support.s3server import S3Server, running_s3


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    with running_s3(serial=True) as server:
        yield server


@contextmanager
def two_hosts(s3: S3Server, bucket: str, tmp_path: Path) -> Iterator[list[dict[str, Any]]]:
    """Hosts "a" and "b": each a `serve` process on its own data directory, both on
    `bucket`; yields [{name, base, env}, …]."""
    hosts: list[dict[str, Any]] = []
    processes: list[subprocess.Popen[bytes]] = []
    try:
        for name in ("a", "b"):
            env = serve_env(tmp_path / f"data-{name}", **s3.env(bucket))
            process, base = serve(env, tmp_path / f"{name}.log")
            processes.append(process)
            hosts.append({"name": name, "base": base, "env": env})
        yield hosts
    finally:
        stop(processes)


def users_add(env: dict[str, str], name: str, role: str) -> str:
    """`agenthub bucketsync users add` as an operator runs it on that host."""
    done = subprocess.run(
        [sys.executable, "-m", "agenthub.cli", "bucketsync", "users", "add", name, "--role", role],
        env=env,
        capture_output=True,
        timeout=60,
        check=True,
    )
    return done.stdout.decode().strip()


def me(base: str, token: str) -> httpx.Response:
    return httpx.get(f"{base}/v1/me", headers={"Authorization": f"Bearer {token}"}, timeout=30)


# -- identity ---------------------------------------------------------------------------------
def test_a_user_added_on_one_host_authenticates_on_the_other(s3: S3Server, tmp_path: Path) -> None:
    bucket = s3.new_bucket()
    with two_hosts(s3, bucket, tmp_path) as (a, b):
        token = users_add(a["env"], "carol", "contributor")
        assert token.startswith("bst_")
        answer = me(b["base"], token)
        assert answer.status_code == 200, answer.text
        assert answer.json()["hf_user"] == "carol"
        # The dashboard's sign-in is the token itself (kept by the browser, sent with each
        # call): signed in on A, the same page works against B.
        page = httpx.get(
            f"{b['base']}/dashboard/api/v1/me",
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        )
        assert page.status_code == 200 and page.json()["hf_user"] == "carol", page.text
        # Neither host wrote a users.json of its own: the document is in the bucket.
        assert not (tmp_path / "data-a" / "users.json").exists()
        assert not (tmp_path / "data-b" / "users.json").exists()


def test_a_revoke_made_on_one_host_holds_on_the_other(s3: S3Server, tmp_path: Path) -> None:
    bucket = s3.new_bucket()
    with two_hosts(s3, bucket, tmp_path) as (a, b):
        admin = users_add(a["env"], "olga", "admin")
        token = users_add(b["env"], "dave", "contributor")
        assert me(a["base"], token).json()["is_member"] is True
        revoked = httpx.post(
            f"{a['base']}/dashboard/moderation/revoke",
            json={"user": "dave"},
            headers={"Authorization": f"Bearer {admin}"},
            timeout=30,
        )
        assert revoked.status_code == 200, revoked.text
        # Host B read the document before the revoke; its copy is kept at most 5 s.
        eventually(lambda: me(b["base"], token).json()["is_member"] is False, timeout=15)


# -- concurrent verdicts ----------------------------------------------------------------------
CENTRAL = make_settings(Path("unused")).central_bucket


def stored_index(store: S3BucketStore) -> dict[str, str]:
    data = store.read(CENTRAL, VERIFICATION_INDEX)
    return dict(json.loads(data)) if data else {}


def test_two_hosts_commit_concurrent_verdicts_without_losing_one(
    s3: S3Server, tmp_path: Path
) -> None:
    bucket = s3.new_bucket()
    identity = LocalIdentity(StoredUsers(s3_store(s3, bucket)), org=ORG)
    with two_hosts(s3, bucket, tmp_path) as (a, b):
        worlds = [HttpWorld(host["base"], identity) for host in (a, b)]
        first, second = worlds
        first.user("olga", role="admin")
        for n in range(4):
            first.agent(f"agent-{n}", f"user-{n}")
        second.tokens, second._owner = first.tokens, first._owner
        # Promoted through both hosts, at once: each promotion enters its result as pending.
        filenames: list[str] = [""] * 8

        def promote(n: int) -> None:
            filenames[n] = promote_result(worlds[n % 2], f"agent-{n % 4}", (n + 1) / 10)

        run_all([partial(promote, n) for n in range(8)])
        assert stored_index(s3_store(s3, bucket)) == {name: "pending" for name in filenames}
        # Eight verdicts at once, alternating hosts.
        verdicts = {name: ("valid" if n % 3 else "invalid") for n, name in enumerate(filenames)}

        def judge(n: int) -> None:
            response = worlds[n % 2].client.post(
                "/dashboard/moderation/verdict",
                json={
                    "filename": filenames[n],
                    "verdict": verdicts[filenames[n]],
                    "expected": "pending",
                },
                headers=first.auth("olga"),
            )
            assert response.status_code == 200, response.text

        run_all([partial(judge, n) for n in range(8)])
        assert stored_index(s3_store(s3, bucket)) == verdicts


def run_all(calls: list[Callable[[], object]]) -> None:
    """Run `calls` on threads at once; re-raise the first failure."""
    errors: list[BaseException] = []

    def guarded(call: Callable[[], object]) -> None:
        try:
            call()
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(call,)) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


class BothReadFirst:
    """The S3 store, except that the first read of `path` (the verification index unless
    told) by each of two threads waits until both have read it: the interleaving in which
    two hosts' edits overlap, made certain instead of likely."""

    def __init__(self, inner: S3BucketStore, path: str = VERIFICATION_INDEX) -> None:
        self._inner = inner
        self._path = path
        self.armed = True  # False: reads pass through (setting up)
        self._barrier = threading.Barrier(2, timeout=20)
        self._waited = threading.local()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def _meet(self, path: str) -> None:
        if self.armed and path == self._path and not getattr(self._waited, "done", False):
            self._waited.done = True
            self._barrier.wait()

    def read(self, bucket: str, path: str) -> bytes | None:
        data = self._inner.read(bucket, path)
        self._meet(path)
        return data

    def read_versioned(self, bucket: str, path: str) -> Versioned | None:
        found = self._inner.read_versioned(bucket, path)
        self._meet(path)
        return found


def two_hubs(
    store: BothReadFirst, bucket: str, s3: S3Server, tmp_path: Path, *, swaps: bool
) -> list[Hub]:
    """Two hosts' Hubs (own data directories, so own locks) on one S3 bucket."""
    hubs: list[Hub] = []
    for name in ("a", "b"):
        settings = make_settings(tmp_path / name, **s3.env(bucket), JOBS_ENABLED="true")
        identity = LocalIdentity(tmp_path / name / "users.json", org=ORG)
        hub = create_app(settings, store=store, identity=identity).state.hub
        hub.swaps = swaps
        hubs.append(hub)
    hubs[0].store.create(hubs[0].central, creator="bucket-sync")
    hubs[0].store.create(hubs[0].settings.audit_bucket, creator="bucket-sync", private=True)
    return hubs


def overlapping_verdicts(s3: S3Server, tmp_path: Path, *, swaps: bool) -> dict[str, str]:
    """Two hosts commit a verdict each, their reads of the index overlapping; the index as
    stored after both."""
    bucket = s3.new_bucket()
    hubs = two_hubs(BothReadFirst(s3_store(s3, bucket)), bucket, s3, tmp_path, swaps=swaps)
    results = ["20261206-000000-000_agent-1.md", "20261206-000001-000_agent-2.md"]
    s3_store(s3, bucket).write_batch(
        CENTRAL,
        Batch(adds=[(VERIFICATION_INDEX, json.dumps(dict.fromkeys(results, "pending")).encode())]),
    )
    ledgers = [{"state": "decided", "verdict": v, "announced": True} for v in ("valid", "invalid")]
    run_all([partial(VerdictBook(hubs[n]).commit, results[n], ledgers[n]) for n in range(2)])
    return stored_index(s3_store(s3, bucket))


def test_overlapping_verdicts_of_two_hosts_both_land_by_compare_and_swap(
    s3: S3Server, tmp_path: Path
) -> None:
    index = overlapping_verdicts(s3, tmp_path, swaps=True)
    assert sorted(index.values()) == ["invalid", "valid"]


def test_broken_variant_a_plain_read_modify_write_loses_one_of_them(
    s3: S3Server, tmp_path: Path
) -> None:
    # Each host's named lock is an flock in its own data directory: it guards nothing
    # against the other host, so both read the index, both write, and the last one wins.
    index = overlapping_verdicts(s3, tmp_path, swaps=False)
    assert sorted(index.values()) in (["invalid", "pending"], ["pending", "valid"])


# -- the quota ledger and the queue -----------------------------------------------------------
def overlapping_launches(s3: S3Server, tmp_path: Path, *, swaps: bool) -> tuple[int, int]:
    """Two hosts launch a job each for one agent whose cap is 1, their reads of the ledger
    overlapping; (launches started, rows in the ledger)."""
    bucket = s3.new_bucket()
    path = make_settings(tmp_path).job_quota_ledger_path
    hubs = two_hubs(BothReadFirst(s3_store(s3, bucket), path), bucket, s3, tmp_path, swaps=swaps)
    started: list[str] = []
    refused: list[RateLimited] = []

    def launch(hub: Hub) -> None:
        quota = JobQuota(
            QuotaLedger(hub.store, hub.settings.audit_bucket, path),
            NamedQuotaLock(lambda: hub.locks),
            hub.clock,
            per_agent=1,
            per_user=10,
            swaps=hub.swaps,
        )

        def start() -> tuple[str, None]:
            started.append(hub.settings.data_dir.name)
            return f"job-{hub.settings.data_dir.name}", None

        try:
            quota.launch("agent-1", "alice", start)
        except RateLimited as exc:
            refused.append(exc)

    run_all([partial(launch, hub) for hub in hubs])
    ledger = s3_store(s3, bucket).read(hubs[0].settings.audit_bucket, path) or b""
    return len(started), len(ledger.splitlines())


def test_two_hosts_launching_at_once_stay_within_the_quota(s3: S3Server, tmp_path: Path) -> None:
    assert overlapping_launches(s3, tmp_path, swaps=True) == (1, 1)


def test_broken_variant_a_plain_ledger_rewrite_lets_both_launch(
    s3: S3Server, tmp_path: Path
) -> None:
    started, rows = overlapping_launches(s3, tmp_path, swaps=False)
    assert started == 2  # over the cap of 1
    assert rows == 1  # and the ledger kept only one of them


def test_two_hosts_dispatching_one_queue_launch_each_entry_once(
    s3: S3Server, tmp_path: Path
) -> None:
    bucket = s3.new_bucket()
    store = BothReadFirst(s3_store(s3, bucket), QUEUE_PATH)
    store.armed = False
    hubs = two_hubs(store, bucket, s3, tmp_path, swaps=True)
    queues = [ScoringQueue(hub, concurrency=4, heartbeat_s=1.0) for hub in hubs]
    for key in ("r1.md", "r2.md", "r3.md"):
        assert ScoringQueue(hubs[0], concurrency=4, heartbeat_s=1.0).enqueue(key, result=key)
    store.armed = True
    launched: list[str] = []
    lock = threading.Lock()

    def launch(entry: dict[str, Any]) -> dict[str, Any]:
        with lock:
            launched.append(str(entry["key"]))
        return {"job_id": f"job-{entry['key']}"}

    run_all([partial(queue.dispatch, launch) for queue in queues])
    store.armed = False
    assert sorted(launched) == ["r1.md", "r2.md", "r3.md"]
    running = queues[0].view()["running"]
    assert sorted(e["job_id"] for e in running) == ["job-r1.md", "job-r2.md", "job-r3.md"]
