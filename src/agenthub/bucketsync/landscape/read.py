"""Reading landscape events: who each event file is for, an agent's events (what
`/v1/updates` merges in), and `GET /v1/landscape` in the list grammar."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agenthub.bucketsync.core import access, listing
from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.core.readmodel import Record
from agenthub.bucketsync.core.records import render_record
from agenthub.bucketsync.landscape import events, subscriptions
from agenthub.bucketsync.storage.base import FileEntry


@dataclass(frozen=True)
class Index:
    """Event filenames → paths, per addressee (`to`) and for everyone (`all`)."""

    to: Mapping[str, Mapping[str, str]]
    all: Mapping[str, str]


def _build(entries: Mapping[str, FileEntry]) -> Index:
    to: dict[str, dict[str, str]] = {}
    everyone: dict[str, str] = {}
    for path in entries:
        if path.startswith(events.ALL):
            name = path[len(events.ALL) :]
            if "/" not in name and events.kind_of(name):
                everyone[name] = path
        elif path.startswith(events.TO):
            owner, _, name = path[len(events.TO) :].partition("/")
            if "/" not in name and events.kind_of(name):
                to.setdefault(owner, {})[name] = path
    return Index(to, everyone)


def index(hub: Hub) -> Index:
    return hub.read_model.derived(events.EVENTS, "landscape:index", _build)


def for_handle(hub: Hub, handle: str) -> tuple[dict[str, str], bool]:
    """(filename → path of the events `handle` gets, whether it hears every champion
    change): its own events, plus `events/all/` at `notify: all`."""
    found = index(hub)
    loud = subscriptions.level(hub, handle) == "all"
    mine = dict(found.to.get(handle, {}))
    if loud:
        for name, path in found.all.items():
            mine.setdefault(name, path)
    return mine, loud


def reasons(name: str) -> list[str]:
    kind = events.kind_of(name)
    return [kind] if kind else []


def render(record: Record) -> dict[str, Any]:
    """An event as every read delivers it: the server is its author, its kind its reason."""
    return render_record(record) | {"agent": events.AUTHOR, "reasons": reasons(record.filename)}


def list_events(hub: Hub, params: Mapping[str, str]) -> dict[str, Any]:
    """`GET /v1/landscape`: every champion change, or with `as=<handle>` what that handle
    gets (its own events + champion changes at `notify: all`); the list grammar, plus
    `kind=` (e.g. `kind=leaderboard:overtaken`)."""
    handle = params.get("as")
    if handle:
        access.require_handle(hub, handle)
        paths, _loud = for_handle(hub, handle)
    else:
        paths = dict(index(hub).all)
    listed = listing.Listed(keys=sorted(paths), paths=paths, count=len(paths))
    query = listing.parse_query(
        params, expand_max=hub.settings.expand_max_limit, extra_fields=("kind",)
    )
    return listing.page(
        listed,
        query,
        load=lambda wanted: hub.read_model.records(wanted, events.EVENTS),
        render=lambda _key, record: render(record),
        agent_of=lambda _key: events.AUTHOR,
    )
