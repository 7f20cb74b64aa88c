"""Reading claims (`claims/{stamp}_{agent}.md`): the list grammar plus `live=`, one claim,
the digest's `claims` block, near-duplicates of an idea, and who an overlap concerns.

A claim is live until its `expires` (server-stamped from `ttl_hours`); time is the hub's
clock. Expired claims stay readable and stop counting: they are neither near-duplicates
nor in the digest's block.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from agenthub.bucketsync.claims import similarity
from agenthub.bucketsync.core import listing, naming
from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.core.readmodel import Record
from agenthub.bucketsync.core.records import render_record, stamped_index
from agenthub.bucketsync.errors import InvalidQuery, NotFound
from agenthub.bucketsync.results import embargo

CLAIMS = naming.CLAIMS
DEFAULT_TTL_HOURS = 24.0
MAX_TTL_HOURS = 72.0
# Fields of a `negative` result an idea is compared with, each on its own.
NEGATIVE_FIELDS = ("idea", "method", "description")
DIGEST_LIMIT = 10


def listed(hub: Hub) -> listing.Listed:
    return hub.read_model.derived(CLAIMS, "stamped", stamped_index(CLAIMS))


def _all(hub: Hub) -> dict[str, Record]:
    """Every claim record by filename (parsed once per content hash by the read model)."""
    current = listed(hub)
    records = hub.read_model.records([current.paths[key] for key in current.keys], CLAIMS)
    return {record.filename: record for record in records.values()}


def expires_at(record: Record) -> datetime | None:
    """When the claim stops counting: its stamped `expires`, else its stamp + the default."""
    stamped = naming.parse_moment(record.frontmatter.get("expires"))
    if stamped is not None:
        return stamped
    parsed = naming.read_board_filename(record.filename)
    if parsed is None or parsed[0] is None:
        return None
    started = naming.parse_moment(naming.stamp_to_iso(parsed[0]))
    return started + timedelta(hours=DEFAULT_TTL_HOURS) if started else None


def is_live(hub: Hub, record: Record) -> bool:
    ends = expires_at(record)
    return ends is not None and hub.clock.now() < ends


def tags_of(value: object) -> list[str]:
    """`tags` as written: a list of scalars or one comma-separated string."""
    if value is None:
        return []
    items = value if isinstance(value, list) else str(value).split(",")
    return [str(item).strip() for item in items if str(item).strip()]


def render(hub: Hub, record: Record) -> dict[str, Any]:
    ends = expires_at(record)
    return render_record(record) | {
        "idea": record.frontmatter.get("idea"),
        "tags": tags_of(record.frontmatter.get("tags")),
        "expires_at": naming.iso_now(ends, "milliseconds") if ends else None,
        "live": is_live(hub, record),
        "overlaps": list(record.frontmatter.get("overlaps") or []),
    }


def _live_param(params: Mapping[str, str]) -> bool | None:
    raw = (params.get("live") or "").lower()
    if raw == "":
        return None
    if raw in ("true", "1", "yes"):
        return True
    if raw in ("false", "0", "no"):
        return False
    raise InvalidQuery(f"live={raw!r} is not a boolean", hint="live=true lists live claims")


def list_claims(hub: Hub, params: Mapping[str, str]) -> dict[str, Any]:
    """The list grammar over claims; `live=true` keeps the live ones, `live=false` the
    expired ones (`count` stays the folder total, `matched` counts what is kept)."""
    query = listing.parse_query(params, expand_max=hub.settings.expand_max_limit)
    live = _live_param(params)
    current = listed(hub)
    if live is not None:
        records = _all(hub)
        keys = [k for k in current.keys if k in records and is_live(hub, records[k]) == live]
        current = listing.Listed(keys=keys, paths=current.paths, count=current.count)
    return listing.page(
        current,
        query,
        load=lambda paths: hub.read_model.records(paths, CLAIMS),
        render=lambda _key, record: render(hub, record),
    )


def get_claim(hub: Hub, filename: str) -> dict[str, Any]:
    record = None
    if naming.parse_stamped_filename(filename) is not None:
        record = hub.read_model.record(naming.claim_path(filename), CLAIMS)
    if record is None:
        raise NotFound(f"no claim {filename!r}", hint="list them with GET /v1/claims")
    return render(hub, record)


def live_claims(hub: Hub) -> list[Record]:
    """The live claims, newest first."""
    records = _all(hub)
    return [records[k] for k in sorted(records, reverse=True) if is_live(hub, records[k])]


def digest_block(hub: Hub) -> dict[str, Any]:
    """The digest's `claims`: how many are live and the newest of them, expanded."""
    live = live_claims(hub)
    return {"live": len(live), "items": [render(hub, r) for r in live[:DIGEST_LIMIT]]}


@dataclass(frozen=True)
class Match:
    kind: str  # "claim" | "negative-result"
    filename: str
    agent: str | None
    field: str
    text: str
    similarity: float
    shared: list[str]

    def wire(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "filename": self.filename,
            "agent": self.agent,
            "field": self.field,
            "text": self.text,
            "similarity": round(self.similarity, 3),
            "shared_words": self.shared,
        }


def _match(kind: str, record: Record, field: str, text: str, mine: frozenset[str]) -> Match | None:
    theirs = similarity.words(text)
    score = similarity.jaccard(mine, theirs)
    if score < similarity.THRESHOLD:
        return None
    agent = (naming.read_board_filename(record.filename) or (None, None))[1]
    return Match(kind, record.filename, agent, field, text, score, sorted(mine & theirs))


def near_duplicates(hub: Hub, author: str, idea: str, tags: list[str]) -> list[Match]:
    """Live claims of other agents and `negative` results (anyone's) whose idea, method or
    description is at least `similarity.THRESHOLD` similar to `idea` + `tags`, best first."""
    mine = similarity.words_of([idea, *tags])
    found: list[Match] = []
    for record in live_claims(hub):
        if (naming.read_board_filename(record.filename) or (None, None))[1] == author:
            continue  # re-claiming your own idea warns nobody
        text = " ".join(
            [str(record.frontmatter.get("idea") or ""), *tags_of(record.frontmatter.get("tags"))]
        )
        match = _match("claim", record, "idea", text, mine)
        if match is not None:
            found.append(match)
    results = hub.read_model.derived(naming.RESULTS, "stamped", stamped_index(naming.RESULTS))
    loaded = hub.read_model.records([results.paths[k] for k in results.keys], naming.RESULTS)
    for record in loaded.values():
        if record.frontmatter.get("status") != "negative":
            continue
        if embargo.withheld_until(hub, record.filename, as_agent=author) is not None:
            continue  # its method is not public yet: nothing of it may be quoted
        best: Match | None = None
        for field in NEGATIVE_FIELDS:
            value = record.frontmatter.get(field)
            if isinstance(value, str) and value.strip():
                match = _match("negative-result", record, field, value, mine)
                if match is not None and (best is None or match.similarity > best.similarity):
                    best = match
        if best is not None:
            found.append(best)
    return sorted(found, key=lambda m: (-m.similarity, m.filename))


def _overlap_index(hub: Hub) -> dict[str, dict[str, str]]:
    by_owner: dict[str, dict[str, str]] = {}
    for record in _all(hub).values():
        owners = record.frontmatter.get("overlap_owners") or []
        for owner in owners if isinstance(owners, list) else []:
            by_owner.setdefault(str(owner), {})[record.filename] = record.path
    return by_owner


def overlaps_for(hub: Hub, handle: str) -> dict[str, str]:
    """Claims that overlapped one of `handle`'s live claims when they were made, by
    filename: `/v1/updates` delivers them with reason `claim-overlap`."""
    index = hub.read_model.derived(CLAIMS, "overlap_owners", lambda _e: _overlap_index(hub))
    return index.get(handle, {})
