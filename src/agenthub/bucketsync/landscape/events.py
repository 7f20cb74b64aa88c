"""Landscape event kinds and their file in the central bucket.

One event per write that changed something, written by the server (`via: server`) in one
batch: `events/{stamp}_landscape.md`, and, when someone was overtaken, its details beside
it in `events/{stamp}_landscape/overtaken.json` (written first, so the event is never
visible without them). The stamp is the server's, so the `/v1/updates` filename cursor
orders events with every other item. It is addressed by content, not by copies (the
read-time union broadcasts use): one event however many owners, so 256 overtaken agents
cost one write, not 256 — and their details are JSON, because YAML frontmatter for 256
owners took ~1 s to write and read back. A `champion:changed` also reaches every
`notify: all` subscriber.

Frontmatter: `agent: landscape`, `timestamp`, `via: server`, `cause` (result | verdict),
`result` (the filename written), `kinds`, `to` (owner -> kinds, for the champions and the
verdict's owner), `overtaken_count`, `passed_by` (the results that passed, as standings),
and as the kinds need `champion` ({before, after}) and `verification` ({owner, verdict}), and `built_on` (owner -> their works the result builds
on, `lineage:built-on`).
`overtaken.json`: {owner: {yours, score, rank_before, rank_after, by: [agents]}}. The body
says it in a few lines.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agenthub.bucketsync.core import naming
from agenthub.bucketsync.landscape.derive import Shift, Standing

EVENTS = "events/"
SUBSCRIBERS = f"{EVENTS}subscribers/"
AUTHOR = "landscape"  # the `agent` of every event file; events are the server's

OVERTAKEN = "leaderboard:overtaken"
CHAMPION = "champion:changed"
VALID = "verification:valid"
INVALID = "verification:invalid"
PHASE = "phase:changed"  # for everyone: a phase opened or closed (phases.announce)
BUILT_ON = "lineage:built-on"
KINDS = (OVERTAKEN, CHAMPION, VALID, INVALID, PHASE, BUILT_ON)
BODY_NAMES = 10  # owners named in the body; the frontmatter has them all


def filename(stamp: str) -> str:
    return naming.message_filename(stamp, AUTHOR)


def path_of(name: str) -> str:
    return f"{EVENTS}{name}"


def details_path(name: str) -> str:
    """Where the overtaken owners' details of event `name` live."""
    return f"{EVENTS}{name.removesuffix('.md')}/overtaken.json"


def is_event_path(path: str) -> bool:
    rest = path[len(EVENTS) :] if path.startswith(EVENTS) else ""
    parsed = naming.parse_stamped_filename(rest) if "/" not in rest else None
    return parsed is not None and parsed[1] == AUTHOR


def _name(standing: Standing | None) -> str:
    return f"{standing.agent} ({standing.score:g})" if standing else "nobody"


@dataclass
class Change:
    """Everything one write changed, as one event file."""

    cause: str
    result: str
    to: dict[str, list[str]] = field(default_factory=dict)
    overtaken: dict[str, dict[str, Any]] = field(default_factory=dict)
    passed_by: dict[str, dict[str, Any]] = field(default_factory=dict)
    champion: dict[str, Any] | None = None
    verification: dict[str, Any] | None = None
    phase: dict[str, Any] | None = None
    built_on: dict[str, list[str]] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)

    @property
    def kinds(self) -> list[str]:
        present = {kind for kinds in self.to.values() for kind in kinds}
        if self.champion is not None:
            present.add(CHAMPION)
        if self.overtaken:
            present.add(OVERTAKEN)
        if self.phase is not None:
            present.add(PHASE)
        return [kind for kind in KINDS if kind in present]

    @property
    def empty(self) -> bool:
        return not self.kinds

    def address(self, owner: str, kind: str) -> None:
        kinds = self.to.setdefault(owner, [])
        if kind not in kinds:
            kinds.append(kind)
            kinds.sort(key=KINDS.index)

    def fields(self) -> dict[str, Any]:
        found: dict[str, Any] = {
            "cause": self.cause,
            "result": self.result,
            "kinds": self.kinds,
            "to": self.to,
            "overtaken_count": len(self.overtaken),
        }
        if self.passed_by:
            found["passed_by"] = list(self.passed_by.values())
        if self.champion is not None:
            found["champion"] = self.champion
        if self.verification is not None:
            found["verification"] = self.verification
        if self.phase is not None:
            found["phase"] = self.phase
        if self.built_on:
            found["built_on"] = self.built_on
        return found

    def body(self) -> str:
        return "".join(f"{line}\n" for line in self.lines)

    def details(self) -> bytes | None:
        """`overtaken.json`, or None when nobody was overtaken."""
        if not self.overtaken:
            return None
        return json.dumps(self.overtaken, sort_keys=True, separators=(",", ":")).encode()


def change(
    shift: Shift, *, cause: str, result: str, verdict: tuple[str, str] | None = None
) -> Change:
    """The event file a write makes: the verdict (owner, valid|invalid) if any, each
    overtaken owner with its details, and a champion change for the old and new champion
    (and, at read time, every `notify: all` subscriber)."""
    found = Change(cause, result)
    if verdict is not None:
        owner, value = verdict
        found.address(owner, VALID if value == "valid" else INVALID)
        found.verification = {"owner": owner, "verdict": value}
        found.lines.append(f"The verifier re-ran {owner}'s result {result}: {value}.")
    for taken in shift.overtaken:
        found.overtaken[taken.owner] = {
            "yours": taken.after.filename,
            "score": taken.after.score,
            "rank_before": taken.before.rank,
            "rank_after": taken.after.rank,
            "by": [s.agent for s in taken.by],
        }
        for passer in taken.by:
            found.passed_by[passer.agent] = passer.wire()
    if shift.overtaken:
        named = [
            f"{t.owner} ({t.before.rank} -> {t.after.rank})" for t in shift.overtaken[:BODY_NAMES]
        ]
        more = len(shift.overtaken) - len(named)
        passers = sorted({s.agent for t in shift.overtaken for s in t.by})
        found.lines.append(
            f"Passed by {', '.join(passers)}: {', '.join(named)}"
            + (f" and {more} more." if more > 0 else ".")
        )
    moved = shift.champion
    if moved is not None:
        found.champion = {
            "before": moved.before.wire() if moved.before else None,
            "after": moved.after.wire() if moved.after else None,
        }
        for standing in (moved.before, moved.after):
            if standing is not None:
                found.address(standing.agent, CHAMPION)
        found.lines.append(f"The champion changed: {_name(moved.before)} -> {_name(moved.after)}.")
    return found


def built_on(found: Change, owners: Mapping[str, list[str]]) -> None:
    """Tell each owner (owner -> their works the result names) that it builds on them."""
    for owner, works in sorted(owners.items()):
        found.address(owner, BUILT_ON)
        found.built_on[owner] = list(works)
    if owners:
        parsed = naming.parse_stamped_filename(found.result)
        author = parsed[1] if parsed else "someone"
        found.lines.append(
            f"{author}'s result {found.result} builds on the work of {', '.join(sorted(owners))}."
        )


def wake_keys(found: Change) -> list[str]:
    """`landscape:{owner}` for each addressee, `landscape:all` for a champion change;
    everyone (`*`) for a phase change."""
    if found.phase is not None:
        return ["*"]
    keys = [f"landscape:{owner}" for owner in sorted({*found.to, *found.overtaken})]
    if found.champion is not None:
        keys.append("landscape:all")
    return keys
