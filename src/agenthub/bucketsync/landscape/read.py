"""Reading landscape events: who each event is for (its `to` and its overtaken details,
read once per listing version), an agent's events with their reasons (what `/v1/updates`
merges in), the per-agent view of an event, and `GET /v1/landscape` in the list grammar."""

from __future__ import annotations

import json
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
    """Event filename -> path and -> every kind it carries; per owner the filenames and
    kinds addressed to it; the filenames that carry a champion change; those that carry a
    phase change (addressed to everyone)."""

    paths: Mapping[str, str]
    kinds: Mapping[str, list[str]]
    to: Mapping[str, Mapping[str, list[str]]]
    champions: frozenset[str]
    phases: frozenset[str] = frozenset()


def index(hub: Hub) -> Index:
    def build(entries: Mapping[str, FileEntry]) -> Index:
        wanted = [path for path in entries if events.is_event_path(path)]
        paths: dict[str, str] = {}
        carried: dict[str, list[str]] = {}
        to: dict[str, dict[str, list[str]]] = {}
        champions: set[str] = set()
        phases: set[str] = set()
        for path, record in hub.read_model.records(wanted, events.EVENTS).items():
            name = record.filename
            paths[name] = path
            addressed = record.frontmatter.get("to")
            for owner, kinds in (addressed if isinstance(addressed, dict) else {}).items():
                known = [k for k in kinds if k in events.KINDS] if isinstance(kinds, list) else []
                to.setdefault(str(owner), {})[name] = known
            for owner in details(hub, record):
                mine = to.setdefault(owner, {}).setdefault(name, [])
                if events.OVERTAKEN not in mine:
                    mine.append(events.OVERTAKEN)
                    mine.sort(key=events.KINDS.index)
            kinds_of = record.frontmatter.get("kinds")
            carried[name] = (
                [k for k in kinds_of if k in events.KINDS] if isinstance(kinds_of, list) else []
            )
            if events.CHAMPION in carried[name]:
                champions.add(name)
            if events.PHASE in carried[name]:
                phases.add(name)
        return Index(paths, carried, to, frozenset(champions), frozenset(phases))

    return hub.read_model.derived(events.EVENTS, "landscape:index", build)


def for_handle(hub: Hub, handle: str) -> tuple[dict[str, list[str]], bool]:
    """(event filename -> its reasons for `handle`, whether `handle` hears every champion
    change): what is addressed to it, every phase change, plus each champion change at
    `notify: all`."""
    found = index(hub)
    loud = subscriptions.level(hub, handle) == "all"
    mine = {name: list(kinds) for name, kinds in found.to.get(handle, {}).items()}
    for name in found.phases:
        mine.setdefault(name, [events.PHASE])
    if loud:
        for name in found.champions:
            kinds = mine.setdefault(name, [])
            if events.CHAMPION not in kinds:
                kinds.append(events.CHAMPION)
                kinds.sort(key=events.KINDS.index)
    return mine, loud


def details(hub: Hub, record: Record) -> dict[str, Any]:
    """The overtaken owners' details of event `record` ({} when nobody was overtaken or
    the file is unreadable)."""
    if not record.frontmatter.get("overtaken_count"):
        return {}
    found = hub.read_model.record(events.details_path(record.filename), events.EVENTS)
    try:
        loaded = json.loads(found.body) if found is not None else {}
    except ValueError:
        return {}
    return loaded if isinstance(loaded, dict) else {}


def paths_for(hub: Hub, names: Mapping[str, object]) -> dict[str, str]:
    every = index(hub).paths
    return {name: every[name] for name in names if name in every}


def render(hub: Hub, record: Record, handle: str | None = None) -> dict[str, Any]:
    """An event as reads deliver it, the server its author; for `handle`, its own view:
    `to` holds its kinds only and `overtaken` its entry of `overtaken.json`."""
    shown = render_record(record) | {"agent": events.AUTHOR}
    fm = record.frontmatter
    reasons = list(fm.get("kinds") or [])
    if handle is not None:
        raw_to = fm.get("to")
        addressed: dict[str, Any] = raw_to if isinstance(raw_to, dict) else {}
        mine = list(addressed.get(handle) or [])
        overtaken = details(hub, record).get(handle)
        if overtaken is not None and events.OVERTAKEN not in mine:
            mine = sorted([*mine, events.OVERTAKEN], key=events.KINDS.index)
        if events.PHASE in reasons and events.PHASE not in mine:
            mine.append(events.PHASE)  # a phase change is everyone's
        reasons = mine
        shown["frontmatter"] = {
            **{k: v for k, v in fm.items() if k != "to"},
            "to": {handle: mine} if mine else {},
            **({"overtaken": overtaken} if overtaken is not None else {}),
        }
    return shown | {"reasons": reasons}


def list_events(hub: Hub, params: Mapping[str, str]) -> dict[str, Any]:
    """`GET /v1/landscape`: every event file, or with `as=<handle>` what that handle gets
    (in its own view); the list grammar, plus `kind=` (e.g. `kind=champion:changed`)."""
    handle = params.get("as") or None
    kind = params.get("kind") or None
    if handle is not None:
        access.require_handle(hub, handle)
        reasons, _loud = for_handle(hub, handle)
    else:
        found = index(hub)
        reasons = {name: [] for name in found.paths}
    if kind is not None:
        carried = index(hub).kinds
        reasons = {
            name: r
            for name, r in reasons.items()
            if kind in (r if handle is not None else carried.get(name, []))
        }
    paths = paths_for(hub, reasons)
    listed = listing.Listed(keys=sorted(paths), paths=paths, count=len(paths))
    query = listing.parse_query(params, expand_max=hub.settings.expand_max_limit)

    def shown(record: Record) -> dict[str, Any]:
        item = render(hub, record, handle)
        if handle is not None:
            item["reasons"] = reasons.get(record.filename, [])
        return item

    return listing.page(
        listed,
        query,
        load=lambda wanted: hub.read_model.records(wanted, events.EVENTS),
        render=lambda _key, record: shown(record),
    )
