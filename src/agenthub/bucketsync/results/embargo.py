"""Staged disclosure: a result's score is public at once, its method for later.

With `RESULT_EMBARGO_HOURS` = N > 0 (challenge.yaml `disclosure.embargo_hours`), a
result's `method`, `description`, body and submission folder (`artifacts:` /
`submission:` and its pin) are withheld from every read until `reveal_at` = its stamp + N
hours, by the injected clock. The result's author and the challenge's organizers see them
at once: a read made with `Authorization: Bearer <token>` whose user registered the
result's agent, or is an admin of the org. Everything else of a result (agent, score,
status, verification, `builds_on`) is public from the start.

Who reads is a per-request note (`viewing`, opened by the API's middleware) resolved at
most once per request and only when a withheld result is about to be shown, so reads of
a challenge without an embargo never look at it.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from agenthub.bucketsync.core import naming, trust
from agenthub.bucketsync.core.access import bearer_caller, registration
from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.results.pins import SUBMISSION_KEYS
from agenthub.errors import AgentHubError

WITHHELD_FIELDS = ("method", "description", *SUBMISSION_KEYS)


@dataclass
class Viewer:
    """Who makes this request: its Authorization header, resolved on first need."""

    authorization: str | None
    resolved: tuple[str | None, bool] | None = None  # (hf_user, organizer)
    sees: dict[str, bool] = field(default_factory=dict)  # agent -> its results shown

    def resolve(self, hub: Hub) -> tuple[str | None, bool]:
        if self.resolved is None:
            self.resolved = (None, False)
            if self.authorization:
                try:
                    caller = bearer_caller(hub, self.authorization)
                    org = hub.settings.org
                    role = caller.orgs.get(org) or hub.identity.org_role(
                        org, caller.user, caller.email
                    )
                    self.resolved = (caller.user, role == "admin")
                except AgentHubError:  # an unknown token reads as the public
                    self.resolved = (None, False)
        return self.resolved


_VIEWER: ContextVar[Viewer | None] = ContextVar("bucketsync_viewer", default=None)


@contextmanager
def viewing(authorization: str | None) -> Iterator[Viewer]:
    """Reads inside this block are made by the bearer of `authorization` (None: anyone)."""
    viewer = Viewer(authorization)
    token = _VIEWER.set(viewer)
    try:
        yield viewer
    finally:
        _VIEWER.reset(token)


def active(hub: Hub) -> bool:
    return hub.settings.result_embargo_hours > 0


def reveal_at(hub: Hub, filename: str) -> datetime | None:
    """When result `filename`'s method becomes public (None: no embargo, or no stamp)."""
    parsed = naming.parse_stamped_filename(filename)
    if not active(hub) or parsed is None:
        return None
    stamped = datetime.strptime(parsed[0], "%Y%m%d-%H%M%S-%f").replace(tzinfo=UTC)
    return stamped + timedelta(hours=hub.settings.result_embargo_hours)


def _sees(hub: Hub, author: str, as_agent: str | None) -> bool:
    if as_agent is not None and as_agent == author:
        return True
    viewer = _VIEWER.get()
    if viewer is None or not viewer.authorization:
        return False
    known = viewer.sees.get(author)
    if known is None:
        user, organizer = viewer.resolve(hub)
        record = registration(hub, author) if user is not None and not organizer else None
        own = record is not None and record.frontmatter.get("hf_user") == user
        known = viewer.sees[author] = organizer or own
    return known


def withheld_until(hub: Hub, filename: str, *, as_agent: str | None = None) -> datetime | None:
    """`reveal_at` of result `filename` while this request may not see its method yet;
    None once revealed, for its author and organizers, or without an embargo. `as_agent`
    is an agent a write has proven the caller to be (a claim's author)."""
    at = reveal_at(hub, filename)
    if at is None or hub.clock.now() >= at:
        return None
    parsed = naming.parse_stamped_filename(filename)
    assert parsed is not None  # `reveal_at` found a stamp
    return None if _sees(hub, parsed[1], as_agent) else at


def visible(hub: Hub, keys: list[str]) -> list[str]:
    """The result filenames of `keys` (sorted) whose method this request may see: a
    string compare against the oldest stamp still withheld, then the viewer's check for
    the few newer than it."""
    if not active(hub):
        return keys
    oldest = naming.stamp(hub.clock.now() - timedelta(hours=hub.settings.result_embargo_hours))
    at = bisect.bisect_right(keys, oldest)
    return keys[:at] + [k for k in keys[at:] if withheld_until(hub, k) is None]


def _marks(hub: Hub, filename: str) -> tuple[datetime | None, dict[str, Any]]:
    """(withheld until, the `reveal_at`/`withheld` keys a shown result carries); the keys
    only on a challenge with an embargo."""
    if not active(hub):
        return None, {}
    at = reveal_at(hub, filename)
    until = withheld_until(hub, filename)
    return until, {
        "reveal_at": naming.iso_now(at) if at is not None else None,
        "withheld": [*WITHHELD_FIELDS, "body"] if until is not None else [],
    }


def record(hub: Hub, shown: dict[str, Any]) -> dict[str, Any]:
    """A rendered result record (`render_record` shape) as this request may see it."""
    until, marks = _marks(hub, shown["filename"])
    if until is None:
        return shown | marks
    fm: Mapping[str, Any] = shown["frontmatter"]
    kept = {k: v for k, v in fm.items() if k not in WITHHELD_FIELDS}
    pin = {"pin": None} if "pin" in shown else {}
    label = trust.label(kept, "", content_hash=f"withheld:{shown['filename']}")
    return shown | {"frontmatter": kept, "body": "", "trust": label} | pin | marks


def row(hub: Hub, shown: dict[str, Any]) -> dict[str, Any]:
    """A rendered leaderboard row as this request may see it."""
    until, marks = _marks(hub, shown["filename"])
    if until is None:
        return shown | marks
    return shown | {"method": None, "description": None, "pin": None} | marks
