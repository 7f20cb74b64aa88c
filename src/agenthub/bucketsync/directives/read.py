"""Reading directives: broadcasts flagged `ack_required: true` (`broadcasts/{filename}`),
their acknowledgements (`acks/{directive stem}/{handle}.md`, one marker per handle), and
what is still pinned for a handle.

A directive is *active* until another directive names it in `supersedes`; only active
directives are pinned. Everything derives from the `broadcasts/` records and ONE `acks/`
listing: no roster file, so concurrent acks cannot lose each other.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from agenthub.bucketsync.core import listing, naming
from agenthub.bucketsync.core.access import registered_agents
from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.core.readmodel import Record
from agenthub.bucketsync.core.records import render_record, stamped_index
from agenthub.bucketsync.errors import NotFound
from agenthub.bucketsync.storage.base import FileEntry

ACKS = naming.ACKS


@dataclass(frozen=True)
class Directives:
    records: Mapping[str, Record]  # filename -> the broadcast record, oldest first
    superseded_by: Mapping[str, str]  # filename -> the directive that replaced it

    def active(self) -> list[str]:
        """Not superseded, newest first."""
        return sorted((f for f in self.records if f not in self.superseded_by), reverse=True)


def is_directive(record: Record) -> bool:
    return record.frontmatter.get("ack_required") is True


def _index(hub: Hub) -> Directives:
    listed = hub.read_model.derived(naming.BROADCASTS, "stamped", stamped_index(naming.BROADCASTS))
    loaded = hub.read_model.records([listed.paths[k] for k in listed.keys], naming.BROADCASTS)
    records = {r.filename: r for r in sorted(loaded.values(), key=lambda r: r.filename)}
    directives = {f: r for f, r in records.items() if is_directive(r)}
    superseded: dict[str, str] = {}
    for filename, record in directives.items():
        old = record.frontmatter.get("supersedes")
        if isinstance(old, str) and old in directives and old < filename:
            superseded.setdefault(old, filename)
    return Directives(directives, superseded)


def directives(hub: Hub) -> Directives:
    """Every directive, rebuilt only when the broadcasts folder changes."""
    return hub.read_model.derived(naming.BROADCASTS, "directives", lambda _e: _index(hub))


def _acks_index(entries: dict[str, FileEntry]) -> dict[str, frozenset[str]]:
    by_directive: dict[str, set[str]] = {}
    for path in entries:
        parts = path[len(ACKS) :].split("/")
        if len(parts) == 2 and parts[1].endswith(".md") and not parts[1].startswith("."):
            by_directive.setdefault(parts[0], set()).add(parts[1][: -len(".md")])
    return {stem: frozenset(handles) for stem, handles in by_directive.items()}


def acked_by(hub: Hub, filename: str) -> frozenset[str]:
    """The handles that acknowledged the directive `filename`."""
    index = hub.read_model.derived(ACKS, "by_directive", _acks_index)
    return index.get(filename.removesuffix(".md"), frozenset())


def require_directive(hub: Hub, filename: str) -> Record:
    record = directives(hub).records.get(filename)
    if record is None:
        raise NotFound(
            f"no directive {filename!r}",
            hint="directives are broadcasts with ack_required: true; list them with "
            "GET /v1/directives",
        )
    return record


def render(hub: Hub, record: Record, *, roster: bool = False) -> dict[str, Any]:
    """A directive with its state: active or superseded, and its acks among registered
    agents (the names with `roster`, else the counts)."""
    index = directives(hub)
    acked = acked_by(hub, record.filename)
    agents = registered_agents(hub)
    waiting = [agent for agent in agents if agent not in acked]
    supersedes = record.frontmatter.get("supersedes")
    rendered = render_record(record) | {
        "ack_required": True,
        "supersedes": supersedes if isinstance(supersedes, str) else None,
        "superseded_by": index.superseded_by.get(record.filename),
        "active": record.filename not in index.superseded_by,
        "acked_count": sum(1 for agent in agents if agent in acked),
        "not_acked_count": len(waiting),
    }
    if roster:
        rendered["acked"] = sorted(acked)
        rendered["not_acked"] = waiting
    return rendered


def get_directive(hub: Hub, filename: str) -> dict[str, Any]:
    """`GET /v1/directives/{filename}`: the directive and who has and has not acked it."""
    return render(hub, require_directive(hub, filename), roster=True)


def list_directives(hub: Hub, params: Mapping[str, str]) -> dict[str, Any]:
    """Every directive (list grammar), each with its ack counts; `active=true` keeps the
    ones not superseded."""
    query = listing.parse_query(params, expand_max=hub.settings.expand_max_limit)
    index = directives(hub)
    keys = sorted(index.records)
    if (params.get("active") or "").lower() in ("true", "1", "yes"):
        keys = [key for key in keys if key not in index.superseded_by]
    paths = {key: index.records[key].path for key in keys}
    return listing.page(
        listing.Listed(keys=keys, paths=paths, count=len(index.records)),
        query,
        load=lambda wanted: hub.read_model.records(wanted, naming.BROADCASTS),
        render=lambda _key, record: render(hub, record),
    )


def pending_for(hub: Hub, handle: str) -> list[Record]:
    """The active directives `handle` has not acknowledged, newest first: what stays
    pinned at the top of its digest and in its `/v1/updates`. Directives bind registered
    agents; a `human-*` handle (who acks nothing) has none pinned."""
    if naming.is_human_handle(handle):
        return []
    index = directives(hub)
    return [index.records[name] for name in index.active() if handle not in acked_by(hub, name)]


def digest_block(hub: Hub, as_handle: str | None) -> dict[str, Any]:
    """The digest's `directives`: with `as`, that handle's unacked ones; without, every
    active one."""
    index = directives(hub)
    records = (
        pending_for(hub, as_handle)
        if as_handle is not None
        else [index.records[name] for name in index.active()]
    )
    return {"count": len(records), "items": [render(hub, record) for record in records]}


def pin(
    page: dict[str, Any], pending: list[Record], render: Callable[[str, Record], dict[str, Any]]
) -> dict[str, Any]:
    """`/v1/updates` with `handle`'s unacked directives pinned: named in `pinned` always,
    and put at the top of every page that has items (expanded when the page is). A page
    without items stays empty, so a long-poll still parks and a watcher does not spin on a
    directive it has already been shown; the cursor stays the page's own."""
    names = [record.filename for record in pending]
    items = page["items"]
    if items:
        shown = {item["filename"] if isinstance(item, dict) else item for item in items}
        extra = [record for record in pending if record.filename not in shown]
        top = [render(r.filename, r) if isinstance(items[0], dict) else r.filename for r in extra]
        items = [*top, *items]
    return {**page, "items": items, "pinned": names}
