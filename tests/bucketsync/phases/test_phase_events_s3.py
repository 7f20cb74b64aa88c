"""Phase events on two hosts sharing one S3 bucket and no lock (moto's S3 server, one
request at a time, each conditional put atomic as on AWS): a boundary both hosts pass at
once is announced by one event, and a claim whose event was never written (the host died
between the two steps) is written once by the next hosts.

The interleavings are made certain, not likely: both hosts read the ledger (or the claimed
event) before either writes (`BothReadFirst`). The broken variant, the same code with each
host's named lock as its only guard (`Hub.swaps` off, what `observe` did before the
ledger), announces the boundary twice.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from agenthub.bucketsync.app import create_app
from agenthub.bucketsync.core import frontmatter
from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.errors import StorageUnavailable
from agenthub.bucketsync.identity.local import LocalIdentity
from agenthub.bucketsync.landscape import events
from agenthub.bucketsync.phases import announce
from agenthub.bucketsync.storage.base import BucketStore
from agenthub.bucketsync.storage.s3 import S3BucketStore
from agenthub.clock import FrozenClock
from tests.bucketsync.conftest import ORG
from tests.bucketsync.phases.conftest import DEV_START, phase_settings
from tests.bucketsync.test_s3_hosts import BothReadFirst, run_all
from tests.bucketsync.test_s3_store import s3_store
from tests.support.s3server import S3Server, running_s3


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    with running_s3(serial=True) as server:
        yield server


class EventWritesFail:
    """The S3 store, except that writing an event fails: a host that dies after its claim."""

    def __init__(self, inner: S3BucketStore) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def write_if(self, bucket: str, path: str, data: bytes, *, version: str | None) -> str | None:
        if path.startswith(events.EVENTS):
            raise StorageUnavailable("injected: the host died between claim and event")
        return self._inner.write_if(bucket, path, data, version=version)


def host(
    name: str, store: Any, s3: S3Server, bucket: str, tmp_path: Path, *, swaps: bool = True
) -> Hub:
    """One host's Hub on `bucket`: its own data directory (so its own locks) and its own
    clock, a few milliseconds apart from the others' as real hosts' clocks are."""
    settings = phase_settings(tmp_path / name, **s3.env(bucket))
    clock = FrozenClock(DEV_START + timedelta(seconds=1, milliseconds=ord(name[0]) - ord("a")))
    identity = LocalIdentity(tmp_path / name / "users.json", org=ORG)
    hub: Hub = create_app(settings, store=store, identity=identity, clock=clock).state.hub
    hub.swaps = swaps
    for bucket_id, private in ((hub.central, False), (settings.audit_bucket, True)):
        if store.info(bucket_id) is None:
            store.create(bucket_id, creator="bucket-sync", private=private)
    return hub


def stored_events(store: BucketStore, hub: Hub) -> dict[str, dict[str, Any]]:
    """Every event file in the bucket, as stored: path -> frontmatter."""
    found = {}
    for entry in store.list(hub.central, events.EVENTS):
        data = store.read(hub.central, entry.path)
        if events.is_event_path(entry.path) and data is not None:
            found[entry.path] = frontmatter.parse_lenient(data).frontmatter
    return found


def changes(fm: dict[str, Any]) -> list[str]:
    return [f"{c['phase']}.{c['change']}" for c in fm["phase"]["changes"]]


def announced_together(
    s3: S3Server, tmp_path: Path, *, swaps: bool
) -> tuple[list[str | None], dict[str, dict[str, Any]]]:
    """Hosts a and b pass `dev.opened` at once, both reading the ledger before either
    writes it: what each `observe` returned, and the events stored after both."""
    bucket = s3.new_bucket()
    store = BothReadFirst(s3_store(s3, bucket), announce.LEDGER)
    hubs = [host(name, store, s3, bucket, tmp_path, swaps=swaps) for name in ("a", "b")]
    returned: list[str | None] = [None, None]

    def observe(n: int) -> None:
        returned[n] = announce.observe(hubs[n])

    run_all([partial(observe, n) for n in range(2)])
    return returned, stored_events(s3_store(s3, bucket), hubs[0])


def test_two_hosts_passing_a_boundary_at_once_announce_it_once(
    s3: S3Server, tmp_path: Path
) -> None:
    returned, stored = announced_together(s3, tmp_path, swaps=True)

    (path,) = stored
    assert changes(stored[path]) == ["dev.opened"]
    assert sorted(returned, key=lambda p: p is None) == [path, None]  # the other saw it


def test_broken_variant_each_hosts_lock_alone_announces_it_twice(
    s3: S3Server, tmp_path: Path
) -> None:
    # Each host's named lock is an flock in its own data directory: both read no claim,
    # both claim, and both write an event of their own.
    returned, stored = announced_together(s3, tmp_path, swaps=False)

    assert [changes(fm) for fm in stored.values()] == [["dev.opened"], ["dev.opened"]]
    assert sorted(stored) == sorted(path for path in returned if path is not None)


def test_a_claim_whose_host_died_before_its_event_is_written_once_by_the_next_hosts(
    s3: S3Server, tmp_path: Path
) -> None:
    bucket = s3.new_bucket()
    dying = host("a", EventWritesFail(s3_store(s3, bucket)), s3, bucket, tmp_path)
    with pytest.raises(StorageUnavailable):
        announce.observe(dying)
    ledger = s3_store(s3, bucket).read(dying.settings.audit_bucket, announce.LEDGER)
    claimed = announce.ledger_of(ledger)["dev.opened"]
    assert stored_events(s3_store(s3, bucket), dying) == {}  # claimed, not announced
    # Two hosts find the claim at once, both reading the missing event before either
    # writes it.
    store = BothReadFirst(s3_store(s3, bucket), claimed)
    hubs = [host(name, store, s3, bucket, tmp_path) for name in ("b", "c")]

    run_all([partial(announce.observe, hub) for hub in hubs])

    stored = stored_events(s3_store(s3, bucket), dying)
    assert list(stored) == [claimed]  # under the claimed stamp, once
    assert changes(stored[claimed]) == ["dev.opened"]
    assert not announce.due(hubs[0]) and not announce.due(hubs[1])
