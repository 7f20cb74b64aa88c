"""The read side: one literal agent's inbox out of the imported projection."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Row

from agenthub.clock import Clock
from agenthub.hubcore import repository as repo
from agenthub.hubcore.errors import AgentNotServed
from agenthub.hubcore.freshness import Freshness, assess
from agenthub.hubcore.store import Database

MAX_LIMIT = 1000
DEFAULT_LIMIT = 50


@dataclass(frozen=True)
class InboxQuery:
    to_agent: str
    from_agent: str | None = None
    unread_only: bool = False
    limit: int = DEFAULT_LIMIT


@dataclass(frozen=True)
class InboxPage:
    messages: list[Row[Any]]  # `MessageRead`'s columns
    freshness: Freshness


class InboxProjection:
    """Serves `agent`'s inbox exactly as State Hub's `GET /messages/` would, read-only."""

    def __init__(
        self,
        db: Database,
        clock: Clock,
        *,
        agent: str,
        following: bool = False,
        max_lag_s: float = 30.0,
    ) -> None:
        self.db = db
        self.clock = clock
        self.agent = agent
        self.following = following
        self.max_lag_s = max_lag_s

    def list(self, query: InboxQuery) -> InboxPage:
        if query.to_agent != self.agent:
            raise AgentNotServed(
                f"this pilot serves only the inbox of {self.agent!r}, not {query.to_agent!r}",
                hint=f"ask with to_agent={self.agent}; other inboxes stay on State Hub",
            )
        now = self.clock.now()
        with self.db.read_only() as session:
            messages = repo.inbox_page(
                session,
                reader=self.agent,
                from_agent=query.from_agent,
                unread_only=query.unread_only,
                now=now,
                limit=query.limit,
            )
            cursor = repo.latest_cursor(session)
        freshness = assess(cursor, now, following=self.following, max_lag_s=self.max_lag_s)
        return InboxPage(messages, freshness)
