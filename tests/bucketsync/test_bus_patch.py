"""Another worker's write reaches this worker's read model over the Redis bus with what it
changed, and is patched in instead of re-listing the folder (issue 29: on the Hub each
listing is an API request, so W workers paid up to W-1 listings per write). Two apps on
one Redis bus and one Hub emulator; the Hub's `tree` requests are the listings."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.scaleout import buschanges
from agenthub.bucketsync.storage.base import Batch, FileChange
from agenthub.clock import FrozenClock
from tests.support.hub_emulator import HubEmulator, running_hub
from tests.support.hub_workload import Workload
from tests.support.hub_workload import bus_settled as settle
from tests.support.redisdb import drop_prefix, require_redis, unique_prefix

pytestmark = pytest.mark.redis

BOARD = "message_board/"


@pytest.fixture(params=["feed", "no-feed"])
def workers(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[Workload, Workload]]:
    """Two workers, following the Hub's change feed or not (without it, only the bus tells
    a worker of another's write; the frozen clock keeps every listing within its TTL)."""
    url = require_redis()
    prefix = unique_prefix()
    bus: dict[str, Any] = {
        "BUCKETSYNC_BUS_URL": url,
        "BUCKETSYNC_BUS_PREFIX": prefix,
        "HUB_FEED": str(request.param == "feed").lower(),
    }
    try:
        with (
            running_hub() as hub,
            Workload.start(hub, tmp_path, clock=FrozenClock(), **bus) as a,
            Workload.start(hub, tmp_path, clock=FrozenClock(), create_buckets=False, **bus) as b,
        ):
            for agent in ("a1", "a2"):
                a.prepare(agent)
                assert a.register(agent).status_code == 201
            yield a, b
    finally:
        drop_prefix(url, prefix)


def hub_of(worker: Workload) -> Hub:
    hub: Hub = worker.client.app.state.hub  # type: ignore[attr-defined]
    return hub


def listings(hub: HubEmulator) -> int:
    return hub.counts(kind="api")["tree"]


def warm(b: Workload) -> None:
    assert b.board().status_code == 200
    assert b.inbox("a2").json()["count"] == 0


@pytest.mark.parametrize("entries", [True, False], ids=["entries", "folders-only"])
def test_a_post_on_one_worker_is_read_on_another_without_a_listing(
    workers: tuple[Workload, Workload], entries: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = workers
    warm(b)
    if not entries:  # an older worker: its events name the folders only
        monkeypatch.setattr(buschanges, "encode", lambda changes: None)
    settle(a, b)
    answer = a.post("a1", "a2")
    assert answer.status_code == 201, answer.text
    filename = answer.json()["path"].rsplit("/", 1)[-1]
    settle(a, b)
    before = listings(a.hub)
    board, inbox = b.board(), b.inbox("a2")
    # `count`: the inbox's copies (whether `items` shows it yet is the stream's watermark).
    assert filename in board.json()["items"] and inbox.json()["count"] == 1
    cost = listings(a.hub) - before
    if entries:
        assert cost == 0, a.hub.counts(kind="api")
        assert hub_of(b).read_model.bus_counts["patched"] >= 2
    else:
        assert cost >= 2  # the board and the inbox listed again


def test_an_update_and_a_delete_propagate(workers: tuple[Workload, Workload]) -> None:
    a, b = workers
    hub_a, hub_b = hub_of(a), hub_of(b)
    path = f"{BOARD}zz-shared.md"
    # B wrote this path itself moments ago (its write-through overlay holds it until the
    # feed confirms it), then A replaces it with bytes of the same size: B must serve A's,
    # not take them for its own write's echo (`feedpatch._echo`).
    hub_b.write_central([(path, b"old text from b\n")])
    settle(b, a)
    assert hub_b.read_model.record(path, BOARD).body == "old text from b\n"  # type: ignore[union-attr]
    settle(a, b)
    before = listings(a.hub)
    hub_a.write_central([(path, b"new text from a\n")])
    settle(a, b)
    record = hub_b.read_model.record(path, BOARD)
    assert record is not None and record.body == "new text from a\n"
    hub_a.store.write_batch(hub_a.central, Batch(deletes=[path]))
    hub_a.read_model.delete_through(BOARD, path)
    hub_a.announce_folders({BOARD}, [FileChange(path, deleted=True)])
    settle(a, b)
    assert hub_b.read_model.record(path, BOARD) is None
    assert path not in hub_b.read_model.entries(BOARD)
    assert listings(a.hub) == before


def test_an_over_cap_batch_falls_back_to_a_listing(
    workers: tuple[Workload, Workload], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = workers
    hub_a, hub_b = hub_of(a), hub_of(b)
    hub_b.read_model.entries(BOARD)
    monkeypatch.setattr(buschanges, "MAX_CHANGES", 3)
    paths = [f"{BOARD}zz-batch-{n}.md" for n in range(4)]
    hub_a.write_central([(path, f"file {path}\n".encode()) for path in paths])
    settle(a, b)
    before = listings(a.hub)
    records = hub_b.read_model.records(paths, BOARD)
    assert {path: r.body for path, r in records.items()} == {p: f"file {p}\n" for p in paths}
    assert listings(a.hub) - before == 1
    assert hub_b.read_model.bus_counts["invalidated"] >= 1


def test_the_wire_form_is_optional_both_ways() -> None:
    changes = [FileChange("inbox/x.md", size=3, content_hash="h"), FileChange("a/y", deleted=True)]
    assert buschanges.decode(buschanges.encode(changes)) == changes
    assert buschanges.encode([FileChange("inbox/x.md", size=3)]) is None  # no hash: list
    assert buschanges.decode(None) is None  # an older worker's event
    malformed: list[object] = [[{"path": 1}], [{"path": "x", "size": "3", "hash": "h"}], ["x"], {}]
    for wire in malformed:
        assert buschanges.decode(wire) is None
