"""Landscape event kinds and their files in the central bucket.

One file per event and addressee, written by the server (`via: server`) in one batch per
write that caused them, all with the batch's one stamp:

- `events/to/{owner}/{stamp}_{slug}.md` — for the owner it concerns;
- `events/all/{stamp}_champion-changed.md` — every champion change, for `notify: all`
  subscribers of the leaderboard (the old and new champion get a copy under `to/`, with
  the same filename, so `/v1/updates` delivers it once).

The filename is `{stamp}_{slug}`, so the `/v1/updates` filename cursor orders events with
every other item, and the kind is read from the name without opening the file. The
frontmatter carries the details (`kind`, `cause`, `result`, and `overtaken` / `champion` /
`verification` as the kind needs); the body says it in one sentence.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agenthub.bucketsync.core import naming
from agenthub.bucketsync.landscape.derive import Shift, Standing

EVENTS = "events/"
TO = f"{EVENTS}to/"
ALL = f"{EVENTS}all/"
SUBSCRIBERS = f"{EVENTS}subscribers/"
AUTHOR = "landscape"  # the `agent` of every event file; events are the server's

OVERTAKEN = "leaderboard:overtaken"
CHAMPION = "champion:changed"
VALID = "verification:valid"
INVALID = "verification:invalid"
KINDS = (OVERTAKEN, CHAMPION, VALID, INVALID)
_SLUGS = {kind: kind.replace(":", "-") for kind in KINDS}
_KINDS = {slug: kind for kind, slug in _SLUGS.items()}


def filename(stamp: str, kind: str) -> str:
    return f"{stamp}_{_SLUGS[kind]}.md"


def kind_of(name: str) -> str | None:
    """The kind an event filename names, or None for anything else."""
    parsed = naming.parse_stamped_filename(name)
    return _KINDS.get(parsed[1]) if parsed else None


def path_for(to: str | None, name: str) -> str:
    """`events/to/{to}/{name}`, or `events/all/{name}` when `to` is None."""
    return f"{ALL}{name}" if to is None else f"{TO}{naming.validate_handle(to)}/{name}"


@dataclass(frozen=True)
class Event:
    kind: str
    to: str | None  # None: everyone who subscribed at `notify: all`
    fields: dict[str, Any] = field(default_factory=dict)
    body: str = ""


def _name(standing: Standing | None) -> str:
    return f"{standing.agent} ({standing.score:g})" if standing else "nobody"


def from_shift(shift: Shift, *, cause: str, result: str) -> list[Event]:
    """The events a leaderboard shift makes: one per overtaken owner, and a champion change
    for everyone plus a copy for the old and the new champion."""
    common = {"cause": cause, "result": result}
    found: list[Event] = []
    for taken in shift.overtaken:
        by = ", ".join(f"{s.agent}'s {s.filename} ({s.score:g})" for s in taken.by)
        found.append(
            Event(
                OVERTAKEN,
                taken.owner,
                common
                | {
                    "overtaken": {
                        "yours": taken.after.filename,
                        "score": taken.after.score,
                        "rank_before": taken.before.rank,
                        "rank_after": taken.after.rank,
                        "by": [s.wire() for s in taken.by],
                    }
                },
                f"Your best result {taken.after.filename} ({taken.after.score:g}) was passed "
                f"by {by}: rank {taken.before.rank} -> {taken.after.rank}.\n",
            )
        )
    change = shift.champion
    if change is not None:
        details = common | {
            "champion": {
                "before": change.before.wire() if change.before else None,
                "after": change.after.wire() if change.after else None,
            }
        }
        body = f"The champion changed: {_name(change.before)} -> {_name(change.after)}.\n"
        owners = dict.fromkeys(s.agent for s in (change.before, change.after) if s is not None)
        found.append(Event(CHAMPION, None, details, body))
        found.extend(Event(CHAMPION, owner, details, body) for owner in owners)
    return found


def verdict(owner: str, result: str, value: str) -> Event:
    """`verification:valid` / `verification:invalid` for the owner of `result`."""
    kind = VALID if value == "valid" else INVALID
    return Event(
        kind,
        owner,
        {"cause": "verdict", "result": result, "verification": value},
        f"Your result {result} was re-run by the verifier: {value}.\n",
    )


def wake_keys(events: Sequence[Event]) -> list[str]:
    """`landscape:{owner}` for each addressee, `landscape:all` for the subscribers."""
    keys = {f"landscape:{e.to}" if e.to is not None else "landscape:all" for e in events}
    return sorted(keys)
