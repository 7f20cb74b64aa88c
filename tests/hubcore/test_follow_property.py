"""Convergence, property-based: whatever State Hub does and however the follower is
killed, restarted, replayed or fed pages out of order, the projection ends equal to
State Hub's snapshot, a refused page changes nothing, and no tombstoned id keeps a body.

Runs `AGENTHUB_FOLLOW_EXAMPLES` examples per database (default 100); locally, e.g.
`AGENTHUB_FOLLOW_EXAMPLES=2000 pytest tests/hubcore/test_follow_property.py`.
"""

from __future__ import annotations

import asyncio
import functools
import os
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import delete, text, update

from agenthub.clock import SystemClock
from agenthub.db import make_engine
from agenthub.hubcore.apply import ApplyResult
from agenthub.hubcore.errors import FeedRefused
from agenthub.hubcore.feedclient import InProcessFeedSource
from agenthub.hubcore.follower import Follower, FollowOptions
from agenthub.hubcore.models import SourceCursor
from agenthub.hubcore.repository import PROJECTION_TABLES
from agenthub.hubcore.store import Database
from agenthub.statehub import source as statehub_source
from agenthub.statehub.feed import FeedService
from agenthub.statehub.inbox import InboxService
from agenthub.statehub.models import AgentMessage, MessageReceipt
from agenthub.statehub.schemas import MessageCreate, ReplyCreate
from agenthub.statehub.snapshot import PagedSnapshots
from agenthub.statehub.snapshot import image as snapshot_image
from agenthub.statehub.store import Database as StateHubDatabase
from tests.hubcore.follow_support import Image, hubcore_image

EXAMPLES = int(os.environ.get("AGENTHUB_FOLLOW_EXAMPLES", "100"))
AGENTS = ("operator", "bob", "eve")
WRITES = ("send", "broadcast", "reply", "read", "read_broadcast", "ack", "archive",
          "supersede", "noop", "delete", "delete_receipt")  # fmt: skip
FOLLOWS = ("follow", "crash_apply", "crash_swap", "replay", "reorder", "force_409")
# Following and replaying are drawn more often than the rarer faults.
DRAWN = WRITES + FOLLOWS + ("follow", "follow", "replay", "replay")
Op = tuple[str, int, int]
ops = st.lists(
    st.tuples(st.sampled_from(DRAWN), st.integers(0, 10_000), st.integers(1, 6)),
    max_size=30,
)


class Crash(Exception):
    """The follower process dying at the injected point."""


class World:
    """One State Hub (in process) and one hub-core database, emptied per example."""

    def __init__(self, statehub_url: str, hubcore_url: str) -> None:
        self.source_engine = make_engine(statehub_url)
        self.sh = StateHubDatabase(self.source_engine)
        statehub_source.prepare(self.sh, "lock")
        self.clock = SystemClock()
        self.inbox = InboxService(self.sh, self.clock)
        self.feed = FeedService(self.sh, self.clock, "hub-prop")
        self.paged = PagedSnapshots(self.feed)
        self.hc_engine = make_engine(hubcore_url)
        self.hc = Database(self.hc_engine)

    def reset(self) -> None:
        with self.sh.write() as session:
            session.execute(delete(MessageReceipt))
            session.execute(delete(AgentMessage))
            session.execute(text("DELETE FROM message_tombstones"))
            session.execute(text("DELETE FROM receipt_tombstones"))
        with self.hc.write() as session:
            for table in PROJECTION_TABLES:
                session.execute(text(f"DELETE FROM {table}"))
        self.ids: list[uuid.UUID] = []
        self.broadcasts: list[uuid.UUID] = []
        self.history: list[tuple[dict[str, Any], str]] = []

    def close(self) -> None:
        self.paged.close_all()
        self.source_engine.dispose()
        self.hc_engine.dispose()

    # -- State Hub side -----------------------------------------------------------------

    def _live(self, pick: int, pool: list[uuid.UUID]) -> uuid.UUID | None:
        return pool[pick % len(pool)] if pool else None

    def write(self, op: str, pick: int, n: int) -> None:
        target = self._live(pick, self.ids)
        broadcast = self._live(pick, self.broadcasts)
        agent = AGENTS[n % len(AGENTS)]
        try:
            if op == "send":
                self._new(
                    MessageCreate(from_agent="alice", to_agent=agent, subject="s", body=f"b{pick}")
                )
            elif op == "broadcast":
                self._new(MessageCreate(from_agent="ops", to_agent="*", subject="n", body="all"))
            elif op == "supersede" and broadcast is not None:
                self._new(
                    MessageCreate(
                        from_agent="ops",
                        to_agent="*",
                        subject="n2",
                        body="v2",
                        supersedes_id=broadcast,
                    )
                )
            elif op == "reply" and target is not None:
                self.ids.append(
                    self.inbox.reply(target, ReplyCreate(from_agent=agent, body="re")).id
                )
            elif op == "read" and target is not None:
                self.inbox.mark_read(target, None)
            elif op == "read_broadcast" and broadcast is not None:
                self.inbox.mark_read(broadcast, agent)
            elif op == "ack" and broadcast is not None:
                self.inbox.acknowledge(broadcast, agent)
            elif op in ("archive", "noop") and target is not None:
                self.inbox.archive(target)
                if op == "noop":  # re-archiving and re-reading make no revision
                    self.inbox.archive(target)
                    self.inbox.mark_read(target, None)
            elif op == "delete" and target is not None:
                with self.sh.write() as session:
                    session.execute(delete(AgentMessage).where(AgentMessage.id == target))
                self.ids.remove(target)
                if target in self.broadcasts:
                    self.broadcasts.remove(target)
            elif op == "delete_receipt" and broadcast is not None:
                with self.sh.write() as session:
                    session.execute(
                        delete(MessageReceipt).where(
                            MessageReceipt.message_id == broadcast, MessageReceipt.agent == agent
                        )
                    )
        except Exception as exc:  # pragma: no cover - a write State Hub itself refuses
            if type(exc).__name__ not in ("NotFound", "InvalidRequest"):
                raise

    def _new(self, data: MessageCreate) -> None:
        message = self.inbox.send(data)
        self.ids.append(message.id)
        if data.to_agent == "*":
            self.broadcasts.append(message.id)

    def statehub_image(self) -> Image:
        snap = snapshot_image(self.feed)
        return (
            {m["id"]: m for m in snap["messages"]},
            {f"{r['message_id']}:{r['agent']}": r for r in snap["receipts"]},
            {
                t["message_id"]: {k: v for k, v in t.items() if k != "reason"}
                for t in snap["tombstones"]
            },
        )

    # -- hub-core side ------------------------------------------------------------------

    def follower(self, n: int, **hooks: Any) -> Follower:
        source = InProcessFeedSource(self.feed, self.paged)
        options = FollowOptions(limit=n, wait_s=0, snapshot_page_size=n + 1)
        return Follower(self.hc, source, self.clock, options, **hooks)

    def check_invariants(self) -> Image:
        image = hubcore_image(self.hc)
        messages, _, tombstones = image
        assert not set(messages) & set(tombstones), "a tombstoned id still has a body"
        return image

    async def follow(self, op: str, n: int) -> None:
        before = self.check_invariants()
        if op == "follow":
            f = self.follower(n)
            for _ in range(n):
                result = await f.step(wait=0)
                assert f.last_error is None, f.last_error
                if isinstance(result, ApplyResult) and result.checkpoint:
                    break
        elif op == "crash_apply":
            f = self.follower(n, before_commit=_crash)
            try:
                await f.step(wait=0)
            except Crash:
                assert self.check_invariants() == before, "a crash before commit changed rows"
        elif op == "crash_swap":
            self._forget_epoch()
            f = self.follower(n, before_swap_commit=_crash)
            with pytest.raises(Crash):
                await f.step(wait=0)
            assert self.check_invariants() == before
        elif op == "force_409":
            self._forget_epoch()
            await self.follower(n).step(wait=0)
        elif op == "replay" and self.history:
            raw, after = self.history[n % len(self.history)]
            self._refused_or_no_op(raw, after, before)
        elif op == "reorder":
            await self._reorder(n, before)
        self.check_invariants()

    def _forget_epoch(self) -> None:
        with self.hc.write() as session:
            session.execute(update(SourceCursor).values(source_epoch="some-older-epoch"))

    def _cursor(self) -> SourceCursor | None:
        with self.hc.read_only() as session:
            from agenthub.hubcore.feedrepo import the_cursor

            return the_cursor(session)

    def _refused_or_no_op(self, raw: dict[str, Any], after: str, before: Image) -> None:
        """A page State Hub served earlier, delivered again. If everything in it is at or
        below the cursor it is a replay: a no-op or refused, and nothing changes. If it
        reaches past the cursor it is still a valid page (asked for from an older cursor)."""
        cursor = self._cursor()
        applier = self.follower(1).applier
        old = cursor is not None and _revision(raw["next_cursor"]) <= _revision(cursor.cursor)
        try:
            result = applier.apply(raw, after=after)
        except FeedRefused:
            assert self.check_invariants() == before, "a refused page changed rows"
            return
        if old:
            assert (result.inserted, result.replaced, result.deleted) == (0, 0, 0)
            assert self.check_invariants() == before

    async def _reorder(self, n: int, before: Image) -> None:
        cursor = self._cursor()
        if cursor is None or cursor.source_epoch == "some-older-epoch":
            return
        source = InProcessFeedSource(self.feed, self.paged)
        ask = functools.partial(
            source.page,
            limit=n,
            wait=0,
            source_instance=cursor.source_instance,
            source_epoch=cursor.source_epoch,
        )
        first = await ask(cursor.cursor)
        second = await ask(first["next_cursor"])
        self.history += [(first, cursor.cursor), (second, first["next_cursor"])]
        applier = self.follower(n).applier
        if first["changes"]:
            with pytest.raises(FeedRefused):
                applier.apply(second, after=first["next_cursor"])
            assert self.check_invariants() == before
        applier.apply(first, after=cursor.cursor)
        applier.apply(second, after=first["next_cursor"])

    async def run(self, steps: list[Op]) -> None:
        self.reset()
        await self.follower(3).step(wait=0)
        for op, pick, n in steps:
            if op in WRITES:
                self.write(op, pick, n)
            else:
                await self.follow(op, n)
            self._remember_a_page(n)
        await self.follower(50).catch_up()
        assert self.check_invariants() == self.statehub_image()

    def _remember_a_page(self, n: int) -> None:
        """Keep a page exactly as State Hub serves it now, to replay later (when older)."""
        raw = self.feed.page("v1:0", 4 * n)
        self.history.append((raw, "v1:0"))


def _revision(cursor: str) -> int:
    return int(cursor.split(":")[1])


def _crash() -> None:
    raise Crash("killed between applying and committing")


@pytest.fixture
def world(statehub_url: str, hubcore_url: str) -> Any:
    w = World(statehub_url, hubcore_url)
    yield w
    w.close()


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=ops)
def test_the_projection_converges_on_state_hubs_snapshot(world: World, steps: list[Op]) -> None:
    asyncio.run(world.run(steps))
