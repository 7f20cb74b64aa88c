"""Feed read-ahead (`readahead`): a page built ahead is served only when nothing was
committed since it was read, so a catching-up reader gets exactly the pages it would
have been built; under `xid` nothing is read ahead."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from sqlalchemy.orm import Session

from agenthub.clock import FrozenClock
from agenthub.statehub import source
from agenthub.statehub.feed import FeedService
from agenthub.statehub.inbox import InboxService
from agenthub.statehub.position import Position
from agenthub.statehub.readahead import STALE_S, AheadPage, ReadAhead
from agenthub.statehub.schemas import MessageCreate
from agenthub.statehub.store import Database
from tests.statehub.xid import once_served

LIMIT = 3


@pytest.fixture
def ahead() -> Iterator[ReadAhead]:
    read_ahead = ReadAhead()
    yield read_ahead
    read_ahead.close()


def _broadcasts(db: Database, clock: FrozenClock, count: int) -> list[str]:
    """`count` broadcasts, one revision each; their ids."""
    inbox = InboxService(db, clock)
    data = {"from_agent": "a", "to_agent": "*", "subject": "s", "body": "b"}
    return [str(inbox.send(MessageCreate.model_validate(data)).id) for _ in range(count)]


def _timeless(body: bytes) -> dict[str, Any]:
    page: dict[str, Any] = orjson.loads(body)
    page.pop("source_time")
    return page


def _taken(monkeypatch: pytest.MonkeyPatch, ahead: ReadAhead) -> list[AheadPage | None]:
    """Every answer `ahead.take` gives, in order."""
    taken: list[AheadPage | None] = []
    take = ahead.take

    def spy(key: Any) -> AheadPage | None:
        page = take(key)
        taken.append(page)
        return page

    monkeypatch.setattr(ahead, "take", spy)
    return taken


def _second_page_after_a_commit(
    db: Database, clock: FrozenClock, feed: FeedService, ahead: ReadAhead
) -> tuple[list[str], dict[str, Any]]:
    """Six broadcasts; page one; the read-ahead of page two finishes; then the fifth
    broadcast is archived (a new revision). (The ids, page two as served.)"""
    ids = _broadcasts(db, clock, 6)
    first = orjson.loads(feed.encoded_page("v1:0", LIMIT).body)
    ahead.idle(timeout=10)
    InboxService(db, clock).archive(uuid.UUID(ids[4]))
    return ids, _timeless(feed.encoded_page(first["next_cursor"], LIMIT).body)


def test_pages_read_ahead_are_the_pages_the_reader_would_be_built(
    db: Database, clock: FrozenClock, ahead: ReadAhead, monkeypatch: pytest.MonkeyPatch
) -> None:
    _broadcasts(db, clock, 10)
    plain = FeedService(db, clock, "hub")
    feed = FeedService(db, clock, "hub", read_ahead=ahead)
    taken = _taken(monkeypatch, ahead)

    after, pages = "v1:0", 0
    while True:
        served = feed.encoded_page(after, LIMIT)
        assert _timeless(served.body) == _timeless(plain.encoded_page(after, LIMIT).body)
        page = orjson.loads(served.body)
        pages += 1
        if not page["has_more"]:
            break
        after = page["next_cursor"]

    assert pages == 4
    assert sum(page is not None for page in taken) == pages - 1  # every page but the first


def test_a_commit_after_the_read_ahead_is_served_fresh(
    db: Database, clock: FrozenClock, ahead: ReadAhead
) -> None:
    feed = FeedService(db, clock, "hub", read_ahead=ahead)

    ids, second = _second_page_after_a_commit(db, clock, feed, ahead)

    # The archived broadcast left page two's range: it comes last, at its new revision.
    assert [change["key"] for change in second["changes"]] == [ids[3], ids[5], ids[4]]
    assert second["changes"][-1]["state"]["archived_at"] is not None


def test_a_fingerprint_blind_to_commits_would_serve_the_stale_page(
    db: Database, clock: FrozenClock, ahead: ReadAhead, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The broken variant: were the fingerprint blind to commits, the page read before
    the archive would be served, the archived broadcast still unarchived in it."""
    feed = FeedService(db, clock, "hub", read_ahead=ahead)
    read_position = feed.read_position

    def blind(session: Session) -> Position:
        return dataclasses.replace(read_position(session), fingerprint="always the same")

    monkeypatch.setattr(feed, "read_position", blind)

    ids, second = _second_page_after_a_commit(db, clock, feed, ahead)

    assert [change["key"] for change in second["changes"]] == [ids[3], ids[4], ids[5]]
    assert second["changes"][1]["state"]["archived_at"] is None


def test_nothing_is_read_ahead_under_xid(
    pg_db: Database, clock: FrozenClock, ahead: ReadAhead, monkeypatch: pytest.MonkeyPatch
) -> None:
    source.prepare(pg_db, "xid")
    _broadcasts(pg_db, clock, 6)
    feed = FeedService(pg_db, clock, "hub", read_ahead=ahead)
    scheduled: list[Any] = []
    monkeypatch.setattr(ahead, "schedule", lambda key, build: scheduled.append(key))

    first = once_served(
        lambda: orjson.loads(feed.encoded_page("v1:0", LIMIT).body), lambda page: page["has_more"]
    )

    assert first["has_more"]
    assert scheduled == []


def test_two_deep_a_build_schedules_the_page_after_its_own(
    db: Database, clock: FrozenClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    _broadcasts(db, clock, 10)  # pages of 3: v1:0 -> 3 -> 6 -> 9 -> 10
    ahead = ReadAhead(depth=2)
    feed = FeedService(db, clock, "hub", read_ahead=ahead)
    built: list[int] = []
    build = feed._build_ahead

    def spy(after: int, limit: int) -> AheadPage | None:
        built.append(after)
        return build(after, limit)

    monkeypatch.setattr(feed, "_build_ahead", spy)
    try:
        first = orjson.loads(feed.encoded_page("v1:0", LIMIT).body)
        ahead.idle(timeout=10)
        cursors = [first["next_cursor"]]
        served = [_timeless(feed.encoded_page(cursors[0], LIMIT).body)]
    finally:
        ahead.close()

    assert len(built) == 2  # the second page, and the third scheduled by the second's build
    assert built[1] == int(served[0]["next_cursor"].split(":")[1])
    assert served[0] == _timeless(
        FeedService(db, clock, "hub").encoded_page(cursors[0], LIMIT).body
    )


def test_a_page_nobody_takes_gives_its_place_to_the_next_reader(
    db: Database, clock: FrozenClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    _broadcasts(db, clock, 6)
    now = [0.0]
    ahead = ReadAhead(depth=1, monotonic=lambda: now[0])
    feed = FeedService(db, clock, "hub", read_ahead=ahead)
    taken = _taken(monkeypatch, ahead)
    try:
        feed.encoded_page("v1:0", LIMIT)  # a reader that never asks again
        ahead.idle(timeout=10)
        other = orjson.loads(feed.encoded_page("v1:0", 2).body)  # another reader, pages of 2
        ahead.idle(timeout=10)
        feed.encoded_page(other["next_cursor"], 2)  # nothing was built for it: the place is held
        now[0] += STALE_S + 0.1
        again = orjson.loads(feed.encoded_page("v1:0", 2).body)  # the stale page gives way
        ahead.idle(timeout=10)
        feed.encoded_page(again["next_cursor"], 2)
    finally:
        ahead.close()

    assert [page is not None for page in taken] == [False, False, False, False, True]
