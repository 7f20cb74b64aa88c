"""The token budget of `GET /v1/digest?budget_tokens=N` (issue 18, item 5): how tokens are
counted, the fixed priority of the digest's sections, and the packer that fills at most N
tokens of response body by measuring the bytes it emits.

One deterministic rule counts tokens: ceil(UTF-8 bytes of the compact JSON body / 4), the
body exactly as the route sends it (`encode`). The packer places items section by section
in `SECTIONS` order, each section's best first. A body longer than `BODY_TOKENS`, or than
what is left of the budget, is cut (`truncated: true`; the item's `expand` names the route
that serves it whole). The first item that does not fit even with an empty body ends the
packing, so nothing of lower priority is shown while something above it is left out;
`omitted` counts, per section, what was left out.

A `Block` is one of the plain digest's standing blocks (`lineage`), carried under its own
key with the same shape, below every section: its list's entries are placed by the same
rule, best first, each whole or not at all, and `omitted` counts those left out.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from agenthub.bucketsync.errors import BudgetTooSmall

BYTES_PER_TOKEN = 4
# A body is cut to this many tokens even when the budget has room, so one long post cannot
# crowd out the rest of its section.
BODY_TOKENS = 200


@dataclass(frozen=True)
class Section:
    """A digest section and the `/v1/updates` reasons it takes (exactly, or by prefix)."""

    name: str
    reasons: frozenset[str] = frozenset()
    prefixes: tuple[str, ...] = ()

    def takes(self, reasons: Iterable[str]) -> bool:
        return any(r in self.reasons or r.startswith(self.prefixes) for r in reasons)


# The priority, highest first. An item goes to the first section taking one of its reasons;
# an item no section takes goes to the last (`rest`).
SECTIONS: tuple[Section, ...] = (
    Section("directives", frozenset({"directive"})),
    Section("mentions", frozenset({"mention"})),
    Section("broadcasts", frozenset({"broadcast"})),
    Section("channels", prefixes=("channel:",)),
    Section("landscape", prefixes=("leaderboard:", "champion:", "verification:", "phase:")),
    Section("claims", frozenset({"claim-overlap"})),
    Section("rest"),
)
NAMES = tuple(section.name for section in SECTIONS)


def section_of(reasons: Iterable[str]) -> str:
    listed = list(reasons)
    return next((s.name for s in SECTIONS if s.takes(listed)), SECTIONS[-1].name)


def tokens(size_bytes: int) -> int:
    """The token estimate of `size_bytes` bytes of body."""
    return -(-size_bytes // BYTES_PER_TOKEN)


def _plain(value: object) -> str:
    if isinstance(value, datetime | date):  # a YAML timestamp in a frontmatter
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def encode(value: Any) -> bytes:
    """The wire bytes of a budgeted digest: compact JSON in UTF-8."""
    text = json.dumps(
        value, ensure_ascii=False, allow_nan=False, separators=(",", ":"), default=_plain
    )
    return text.encode("utf-8")


@dataclass(frozen=True)
class Source:
    """One section's candidates: how many there are, and the items (each with `body` and
    `truncated`) best first, rendered lazily so only what is emitted is read."""

    section: str
    total: int
    items: Iterable[dict[str, Any]]


@dataclass(frozen=True)
class Block:
    """A plain digest block (`value`) whose list at `key` is packed entry by entry."""

    name: str
    value: Mapping[str, Any]
    key: str

    @property
    def entries(self) -> list[Any]:
        return list(self.value[self.key])


def _escaped(text: str) -> int:
    """The bytes `text` takes inside a JSON string."""
    return len(encode(text)) - 2


def _cut(text: str, max_bytes: int) -> str:
    """The longest prefix of `text` that takes at most `max_bytes` inside a JSON string."""
    if _escaped(text) <= max_bytes:
        return text
    lo, hi = 0, min(len(text), max_bytes)  # every character takes at least one byte
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if _escaped(text[:mid]) <= max_bytes:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo]


def _fit(item: dict[str, Any], room: int) -> tuple[dict[str, Any], int] | None:
    """`item` as it fits in `room` bytes (whole, or with its body cut) and its size."""
    if "body" not in item:  # a block's entry: whole or not at all
        size = len(encode(item))
        return (item, size) if size <= room else None
    body = str(item["body"])
    cap = BODY_TOKENS * BYTES_PER_TOKEN
    if _escaped(body) <= cap:
        size = len(encode(item))
        if size <= room:
            return item, size
    bare = {**item, "body": "", "truncated": True}
    bare_size = len(encode(bare))
    if bare_size > room:
        return None
    cut = _cut(body, min(cap, room - bare_size))
    return {**bare, "body": cut}, bare_size + _escaped(cut)


def _floor(size_of: Callable[[int], int]) -> int:
    """The least budget `m` whose envelope (`size_of(m)` bytes, `m` written in it) fits."""
    m = 1
    while tokens(size_of(m)) > m:
        m = tokens(size_of(m))
    return m


def pack(
    head: Mapping[str, Any],
    sources: Sequence[Source],
    budget_tokens: int,
    blocks: Sequence[Block] = (),
) -> bytes:
    """`head`, then `budget {tokens, used}`, `sections`, the `blocks` and `omitted`,
    encoded in at most `budget_tokens` tokens; `BudgetTooSmall` when even the envelope
    (every block with an empty list) does not fit."""
    by_name = {source.section: source for source in sources}
    sections: dict[str, list[dict[str, Any]]] = {name: [] for name in NAMES}
    omitted = {name: by_name[name].total if name in by_name else 0 for name in NAMES}
    shown: dict[str, list[dict[str, Any]]] = {block.name: [] for block in blocks}
    omitted |= {block.name: len(block.entries) for block in blocks}

    def body(budget: int, used: int) -> dict[str, Any]:
        return {
            **head,
            "budget": {"tokens": budget, "used": used},
            "sections": sections,
            **{b.name: {**b.value, b.key: shown[b.name]} for b in blocks},
            "omitted": omitted,
        }

    floor = _floor(lambda m: len(encode(body(m, m))))
    if budget_tokens < floor:
        raise BudgetTooSmall(
            f"budget_tokens={budget_tokens} cannot hold this digest's envelope",
            minimum=floor,
            hint=f"use budget_tokens={floor} or more (tokens = ceil(UTF-8 bytes of the JSON "
            f"body / {BYTES_PER_TOKEN}))",
        )
    # Counts only shrink as items are placed, so the envelope measured now is an upper bound.
    room = budget_tokens * BYTES_PER_TOKEN - len(encode(body(budget_tokens, budget_tokens)))
    queue = [(name, sections[name], by_name[name].items) for name in NAMES if name in by_name]
    queue += [(block.name, shown[block.name], block.entries) for block in blocks]
    for name, placed, items in queue:
        for item in items:
            comma = 1 if placed else 0
            fitted = _fit(item, room - comma)
            if fitted is None:
                break
            placed.append(fitted[0])
            omitted[name] -= 1
            room -= fitted[1] + comma
        else:
            continue
        break
    # `used` is written in the body it measures: settle it (it only falls, from the budget).
    used = budget_tokens
    while True:
        data = encode(body(budget_tokens, used))
        if tokens(len(data)) == used:
            return data
        used = tokens(len(data))
