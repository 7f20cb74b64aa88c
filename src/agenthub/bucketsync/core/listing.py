"""The shared list grammar of `/v1/messages`, `/v1/agents`, `/v1/inbox/{handle}` (and later
results/channels): filters, `q`, `expand`, `limit`/`order`, exclusive filename cursors, and
the `count`/`matched`/`next`/`cursor` envelope."""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agenthub.bucketsync.core.longpoll import HELD
from agenthub.bucketsync.core.naming import (
    STAMP_LEN,
    normalize_time_bound,
    read_board_filename,
    validate_handle,
)
from agenthub.bucketsync.core.readmodel import FilterMemo, Record
from agenthub.bucketsync.errors import InvalidQuery

VERIFICATION_STATES = ("pending", "valid", "invalid")
_TRUE = {"true", "1", "yes"}
_FALSE = {"false", "0", "no", ""}
_STAMP_RE = re.compile(r"\d{8}-\d{6}-\d{3}")
# BS-13.20: `after=` also takes a bare stamp prefix (`20260301-120001`), compared as text.
_STAMP_PREFIX_RE = re.compile(r"\d{8}(?:-\d{1,6}(?:-\d{1,3})?)?")

CURSOR_HINT = (
    "a cursor is the `cursor` (or `next`) of a page this stream answered, a filename such "
    "as 20260101-120000-000_agent-1.md (or a bare stamp prefix, 20260101-120000); pass "
    "it back verbatim, or omit {name} to start"
)


def check_cursor(name: str, value: str | None, valid: Callable[[str], bool]) -> None:
    """`after`/`before` must be a key this stream can have served: 400 INVALID_QUERY
    naming the parameter (a garbled cursor would otherwise answer empty forever)."""
    if value is not None and not valid(value):
        raise InvalidQuery(
            f"{name}={value!r} is not a cursor of this stream",
            hint=CURSOR_HINT.format(name=name),
        )


def is_filename_cursor(value: str) -> bool:
    """A record filename, as the board-style streams key their items, or a bare stamp
    prefix of one."""
    return read_board_filename(value) is not None or bool(_STAMP_PREFIX_RE.fullmatch(value))


@dataclass(frozen=True)
class ListQuery:
    since: str | None = None
    until: str | None = None
    agent: str | None = None
    type: str | None = None
    via: str | None = None
    status: str | None = None
    verification: tuple[str, ...] | None = None
    q: str | None = None
    expand: bool = False
    limit: int | None = None
    order: str = "desc"
    after: str | None = None
    before: str | None = None
    fields: tuple[tuple[str, str], ...] = ()  # extra frontmatter equality filters

    @property
    def needs_content(self) -> bool:
        return bool(
            self.type or self.via or self.status or self.q or self.verification or self.fields
        )

    @property
    def only_q(self) -> bool:
        """`q` is the one test `matches_record` makes: a record whose search text holds it
        matches, without being loaded."""
        others = (self.type, self.via, self.status)
        return bool(self.q) and all(other is None for other in others) and not self.fields


def parse_query(
    params: Mapping[str, str],
    *,
    default_limit: int | None = 10,
    default_order: str = "desc",
    expand_max: int = 200,
    extra_fields: Sequence[str] = (),
    cursor: Callable[[str], bool] | None = None,
) -> ListQuery:
    """Validate query parameters into a `ListQuery`; a bad value is 400 INVALID_QUERY.
    With `cursor`, `after`/`before` must pass it (the streams' filename cursors)."""

    def text(name: str) -> str | None:
        value = params.get(name)
        return value if value not in (None, "") else None

    expand_raw = (params.get("expand") or "").lower()
    if expand_raw not in _TRUE | _FALSE:
        raise InvalidQuery(f"expand={expand_raw!r} is not a boolean", hint="use expand=true")
    expand = expand_raw in _TRUE

    order = (params.get("order") or default_order).lower()
    if order not in ("asc", "desc"):
        raise InvalidQuery(f"order={order!r} is not asc or desc", hint="use order=asc|desc")

    limit: int | None = default_limit
    if text("limit") is not None:
        limit = parse_limit(params["limit"])
    if expand:
        limit = min(limit or expand_max, expand_max)

    since = text("since")
    until = text("until")
    agent = text("agent")
    if agent is not None:
        try:
            validate_handle(agent)
        except Exception:
            raise InvalidQuery(f"agent={agent!r} is not a valid agent id") from None

    verification: tuple[str, ...] | None = None
    if text("verification") is not None:
        states = tuple(s.strip() for s in params["verification"].split(",") if s.strip())
        unknown = [s for s in states if s not in VERIFICATION_STATES]
        if unknown or not states:
            raise InvalidQuery(
                f"verification={params['verification']!r} is not valid",
                hint="a comma list of pending, valid, invalid",
            )
        verification = states

    if cursor is not None:
        check_cursor("after", text("after"), cursor)
        check_cursor("before", text("before"), cursor)
    fields = tuple((name, params[name]) for name in extra_fields if text(name) is not None)
    return ListQuery(
        since=normalize_time_bound(since, name="since") if since else None,
        until=normalize_time_bound(until, name="until") if until else None,
        agent=agent,
        type=text("type"),
        via=text("via"),
        status=text("status"),
        verification=verification,
        q=text("q"),
        expand=expand,
        limit=limit,
        order=order,
        after=text("after"),
        before=text("before"),
        fields=fields,
    )


def _stamp_of(key: str) -> str | None:
    return (read_board_filename(key) or (None, None))[0]


def _agent_of(key: str) -> str | None:
    return (read_board_filename(key) or (None, None))[1]


def in_time_range(stamp: str | None, query: ListQuery) -> bool:
    if query.since is None and query.until is None:
        return True
    if stamp is None:
        return False
    if query.since is not None and stamp < query.since:
        return False
    return not (query.until is not None and stamp[: len(query.until)] > query.until)


def matches_record(record: Record, query: ListQuery) -> bool:
    fm = record.frontmatter
    if query.type is not None and str(fm.get("type", "")) != query.type:
        return False
    if query.via is not None and str(fm.get("via", "")) != query.via:
        return False
    if query.status is not None and str(fm.get("status", "")) != query.status:
        return False
    for name, value in query.fields:
        if str(fm.get(name, "")) != value:
            return False
    return query.q is None or query.q.lower() in record.search_text


@dataclass(frozen=True)
class Listed:
    """One folder's worth of candidates: `keys` sorted ascending, each mapped to a path."""

    keys: Sequence[str]
    paths: Mapping[str, str]
    count: int


def page(
    listed: Listed,
    query: ListQuery,
    *,
    load: Callable[[Sequence[str]], dict[str, Record]],
    render: Callable[[str, Record], dict[str, Any]],
    stamp_of: Callable[[str, Record | None], str | None] = lambda key, _r: _stamp_of(key),
    agent_of: Callable[[str], str | None] = _agent_of,
    time_from_content: bool = False,
    memo: Callable[[tuple[Any, ...], Callable[[], list[str]]], list[str]] | None = None,
    bound: str | None = None,
) -> dict[str, Any]:
    """Filter, order and page `listed` under `query`; returns the response envelope.

    `memo(signature, compute)` may cache the filtered key list for one listing version, so
    a repeated content filter (`q=`, `type=`…) does not rescan every record. `bound` (the
    watermark, `StampIssuer.watermark`, read before the listing) holds back stamped keys
    at or above it: the page stops below them, the envelope gains `HELD` (how many wait
    past `after`) for the long-poll, which strips it."""
    keys: Sequence[str] = listed.keys
    held = 0
    if bound is not None:
        keys, held = _below(keys, bound, query.after)
    if query.agent is not None:
        keys = [key for key in keys if agent_of(key) == query.agent]
    timed = query.since is not None or query.until is not None
    if timed and not time_from_content:
        keys = [key for key in keys if in_time_range(stamp_of(key, None), query)]
    records: dict[str, Record] = {}
    if query.needs_content or (timed and time_from_content):
        candidates = keys

        def content_filter() -> list[str]:
            chosen: Sequence[str] = candidates
            known: list[str] = []
            if query.q and isinstance(memo, FilterMemo):  # the index answers for what it holds
                found = memo.search(query.q.lower(), candidates, listed.paths)
                if found is not None:
                    known, chosen = found
                    if not query.only_q or (timed and time_from_content):
                        # The index knows the text only: its matches are checked in full.
                        chosen, known = sorted((*known, *chosen)), []
            loaded = load([listed.paths[key] for key in chosen]) if chosen else {}
            records.update(
                (key, loaded[listed.paths[key]]) for key in chosen if listed.paths[key] in loaded
            )
            checked = [
                key
                for key in chosen
                if key in records
                and matches_record(records[key], query)
                and (
                    not (timed and time_from_content)
                    or in_time_range(stamp_of(key, records[key]), query)
                )
            ]
            return sorted((*known, *checked)) if known else checked

        signature = (
            query.agent,
            query.since,
            query.until,
            query.type,
            query.via,
            query.status,
            query.q.lower() if query.q else None,
            query.fields,
        )
        if memo is None:
            keys = content_filter()
        else:
            # The memo may be one listing version ahead of `listed` under a racing write.
            keys = [key for key in memo(signature, content_filter) if key in listed.paths]
    matched = len(keys)

    # Keys are sorted, so exclusive cursors are two binary searches.
    lo = bisect.bisect_right(keys, query.after) if query.after is not None else 0
    hi = bisect.bisect_left(keys, query.before) if query.before is not None else len(keys)
    window = keys[lo : max(lo, hi)]
    limit = query.limit if query.limit is not None else len(window)
    forward = (
        query.after is not None
        if (query.after is None) != (query.before is None)
        else (query.order == "asc")
    )
    if forward:
        chunk = window[:limit]
        more = len(window) > limit
    else:
        # Clamped: a negative start would wrap around and drop items when limit > len.
        chunk = window[max(0, len(window) - limit) :][::-1]
        more = len(window) > limit
    next_key = chunk[-1] if (more and chunk) else None
    ordered = sorted(chunk, reverse=query.order == "desc")

    if query.expand:
        missing = [listed.paths[key] for key in ordered if key not in records]
        if missing:
            loaded = load(missing)
            for key in ordered:
                if key not in records and listed.paths[key] in loaded:
                    records[key] = loaded[listed.paths[key]]
        items: list[Any] = [render(key, records[key]) for key in ordered if key in records]
    else:
        items = list(ordered)
    envelope = {
        "count": listed.count,
        "matched": matched,
        "items": items,
        "next": next_key,
        "cursor": max(chunk) if chunk else None,
    }
    if bound is not None:
        envelope[HELD] = held
    return envelope


def held_back(page: dict[str, Any], listed: Listed, catch_up: Callable[[str], bool]) -> bool:
    """A page that held items back asks the watermark to move past the newest of them
    (`StampIssuer.catch_up`); True if this worker's floor moved: read the page again
    (watermark first, then the listings)."""
    return bool(page.get(HELD)) and bool(listed.keys) and catch_up(listed.keys[-1])


def _below(keys: Sequence[str], bound: str, after: str | None) -> tuple[Sequence[str], int]:
    """`keys` without the stamped ones at or above `bound`, and how many of those sort
    after `after`. Sorted keys put them in one tail (names without a stamp sort last and
    are never held), so the common case — nothing above the bound — costs one search."""
    cut = bisect.bisect_left(keys, bound)
    if cut == len(keys):
        return keys, 0
    tail = keys[cut:]
    kept = [key for key in tail if not _STAMP_RE.match(key, 0, STAMP_LEN)]
    if len(kept) == len(tail):
        return keys, 0
    held = sum(1 for key in tail if after is None or key > after) - sum(
        1 for key in kept if after is None or key > after
    )
    return [*keys[:cut], *kept], held


def stamp_prefix(filename: str) -> str:
    return filename[:STAMP_LEN]


def parse_limit(raw: str) -> int:
    """A `limit=` query value: a whole number of at least 1."""
    try:
        limit = int(raw)
    except ValueError:
        raise InvalidQuery(f"limit={raw!r} is not an integer") from None
    if limit < 1:
        raise InvalidQuery("limit must be at least 1", hint="use limit=10")
    return limit
