"""Streams never skip an item (issue 31): derived read-model values are tagged with the
listing they were built from, and a multi-folder page stops below a stamp issued for a
write not yet visible. Each guarantee is shown with the broken variant failing."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

from agenthub.bucketsync.board import read as board
from agenthub.bucketsync.core import listing, naming
from agenthub.bucketsync.core.readmodel import ReadModel
from agenthub.bucketsync.live import updates
from agenthub.bucketsync.storage.base import Batch, FileEntry
from tests.bucketsync.conftest import World

T = TypeVar("T")
INBOX = naming.INBOX


def entry(path: str, data: bytes) -> FileEntry:
    return FileEntry(path=path, size=len(data), content_hash=hashlib.sha256(data).hexdigest())


def old_derived(model: ReadModel, folder: str, key: str, build: Callable[[Any], T]) -> T:
    """`ReadModel.derived` as it was: the version read AFTER the build tags the value."""
    entries = model.entries(folder)
    state = model._folder(folder)
    cached = state.derived.get(key)
    if cached is not None and cached[0] == state.version:
        return cached[1]  # type: ignore[no-any-return]
    value = build(entries)
    state.derived[key] = (state.version, value)
    return value


def race_a_write_into_the_build(
    world: World, derived: Callable[[ReadModel, str, str, Callable[[Any], Any]], Any]
) -> dict[str, dict[str, str]]:
    """The inbox index is built from a listing; a copy lands (write-through) while it is
    being built; then the index is asked for again."""
    model = ReadModel(
        world.hub.store,
        world.hub.central,
        world.hub.clock,
        ttl_s=3600,
        content_cache_max_bytes=1 << 20,
    )
    first = "20260301-120000-000_agent-2.md"
    late = "20260301-120000-001_agent-3.md"
    world.hub.store.write_batch(world.hub.central, Batch(adds=[(f"{INBOX}agent-1/{first}", b"a")]))

    def build(entries: Any) -> dict[str, dict[str, str]]:
        index = board._inbox_index(entries)
        path = f"{INBOX}agent-1/{late}"
        model.write_through(INBOX, entry(path, b"b"), b"b")  # lands mid-build
        return index

    derived(model, INBOX, "by_handle", build)
    return derived(model, INBOX, "by_handle", board._inbox_index)  # type: ignore[no-any-return]


def test_a_write_landing_mid_build_is_in_the_next_inbox_index(world: World) -> None:
    index = race_a_write_into_the_build(world, ReadModel.derived)
    assert sorted(index["agent-1"]) == [
        "20260301-120000-000_agent-2.md",
        "20260301-120000-001_agent-3.md",
    ]


def test_broken_variant_tagging_after_the_build_serves_the_stale_index(world: World) -> None:
    index = race_a_write_into_the_build(world, old_derived)
    assert sorted(index["agent-1"]) == ["20260301-120000-000_agent-2.md"]  # the copy is lost


# -- the skip interleaving ----------------------------------------------------------------
def organizer_broadcast(world: World, body: str) -> str:
    if "boss" not in world.tokens:
        world.user("boss", role="admin")
    answer = world.client.post(
        "/v1/messages",
        json={"agent_id": "human-boss", "body": body, "broadcast": True},
        headers=world.auth("boss"),
    )
    assert answer.status_code == 201, answer.text
    return str(answer.json()["filename"])


def slow_mention(world: World) -> tuple[str, Callable[[], None]]:
    """A mention of agent-1 by agent-2 whose stamp is issued now and whose files land
    only when the returned function is called (a slow Hub commit)."""
    stamp = world.hub.stamps.issue("agent-2")
    filename = naming.message_filename(stamp, "agent-2")
    data = b"---\nagent: agent-2\nvia: raw\n---\nslow hello @agent-1\n"

    def land() -> None:
        world.hub.write_central(
            [
                (naming.inbox_path("agent-1", filename), data),
                (f"{naming.MESSAGE_BOARD}{filename}", data),
            ]
        )

    return filename, land


def pages(world: World, after: str | None) -> tuple[list[str], str | None]:
    url = "/v1/updates?as=agent-1&order=asc" + (f"&after={after}" if after else "")
    page = world.client.get(url).json()
    return page["items"], page["cursor"] or after


def test_a_page_stops_below_a_stamp_not_yet_visible_and_the_next_delivers_both(
    world: World,
) -> None:
    for handle in ("agent-1", "agent-2"):
        world.agent(handle)
    mention, land = slow_mention(world)
    broadcast = organizer_broadcast(world, "later, in another folder")
    assert mention < broadcast

    items, cursor = pages(world, None)
    assert items == []  # the broadcast waits: something before it is not visible yet
    land()
    items, cursor = pages(world, cursor)
    assert items == [mention, broadcast]


def test_broken_variant_without_the_watermark_skips_the_mention(world: World) -> None:
    for handle in ("agent-1", "agent-2"):
        world.agent(handle)
    mention, land = slow_mention(world)
    broadcast = organizer_broadcast(world, "later, in another folder")

    def unbounded_page(after: str | None) -> dict[str, Any]:
        stream = updates.stream(world.hub, "agent-1")
        return listing.page(
            stream.listed,
            listing.ListQuery(order="asc", after=after, limit=None),
            load=lambda paths: updates.load(world.hub, paths),
            render=lambda key, _record: {"key": key},
        )

    first = unbounded_page(None)
    assert first["items"] == [broadcast]
    land()
    second = unbounded_page(first["cursor"])
    assert second["items"] == []  # the mention sorts below the cursor: skipped for good
    assert mention < first["cursor"]


# -- the digest's "since" views ------------------------------------------------------------
def digest_since(world: World, after: str | None) -> tuple[list[str], str | None]:
    """The filenames a budgeted digest for agent-1 delivers after `after`, and its cursor."""
    params = {"as": "agent-1", "budget_tokens": "4000"} | ({"after": after} if after else {})
    body = world.client.get("/v1/digest", params=params).json()
    names = sorted(item["filename"] for items in body["sections"].values() for item in items)
    return names, body["cursor"] or after


def test_the_digest_cursor_stops_below_a_stamp_not_yet_visible(world: World) -> None:
    for handle in ("agent-1", "agent-2"):
        world.agent(handle)
    _items, cursor = digest_since(world, None)
    mention, land = slow_mention(world)
    broadcast = organizer_broadcast(world, "later, in another folder")

    first, cursor = digest_since(world, cursor)
    assert broadcast not in first and (cursor is None or cursor < mention)
    land()
    second, _cursor = digest_since(world, cursor)
    assert mention in second and broadcast in second


def test_broken_variant_a_digest_without_the_watermark_skips_the_mention(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    for handle in ("agent-1", "agent-2"):
        world.agent(handle)
    _items, cursor = digest_since(world, None)
    mention, land = slow_mention(world)
    organizer_broadcast(world, "later, in another folder")
    monkeypatch.setattr(world.hub.stamps, "watermark", lambda: "~")  # above every stamp

    _first, cursor = digest_since(world, cursor)
    land()
    second, _cursor = digest_since(world, cursor)

    assert mention not in second  # the cursor passed it before it was visible: lost


def test_the_watermark_switched_off_holds_nothing(world: World) -> None:
    """`BUCKETSYNC_STREAM_WATERMARK=false` (a bench's baseline): a pending stamp holds
    no item back, which is how a stream skips."""
    stamps = world.hub.stamps
    pending = stamps.issue("agent-2")
    assert stamps.watermark() <= pending
    stamps.bounded = False
    assert stamps.watermark() > naming.message_filename(pending, "zzz")
