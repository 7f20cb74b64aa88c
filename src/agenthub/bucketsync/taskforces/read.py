"""Reading taskforces: the list, one taskforce, its notes (the list grammar), its files and
one file's bytes, and the digest block, all from the one `taskforces/` listing."""

from __future__ import annotations

import mimetypes
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agenthub.bucketsync.core import listing, naming
from agenthub.bucketsync.core.access import registered_agents
from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.core.readmodel import Record
from agenthub.bucketsync.core.records import render_record
from agenthub.bucketsync.errors import NotFound
from agenthub.bucketsync.taskforces.write import (
    README,
    TASKFORCES,
    Taskforce,
    is_readme,
    marker,
    require_taskforce,
    taskforces_index,
)

EXCERPT = 160
RECENT_IN_DETAIL = 5
NEWEST_IN_DIGEST = 5


def _load(hub: Hub, paths: Sequence[str]) -> dict[str, Record]:
    return hub.read_model.records(paths, TASKFORCES) if paths else {}


def _readmes(hub: Hub, taskforces: Sequence[Taskforce]) -> dict[str, Record]:
    """Each taskforce's README record by name (a README gone since the listing is absent)."""
    loaded = _load(hub, [t.folder + README for t in taskforces])
    return {t.name: loaded[t.folder + README] for t in taskforces if t.folder + README in loaded}


def _leaf(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def _stamped(path: str) -> tuple[str, str] | None:
    return naming.parse_stamped_filename(_leaf(path))


def contributors(taskforce: Taskforce, creator: str | None, agents: Sequence[str]) -> list[str]:
    """The creator first, then everyone else who added a file, by name: a stamped note
    names its author, a named file carries its author's `_{agent_id}`."""
    found: set[str] = set()
    for path in taskforce.files:
        if is_readme(path):
            continue
        stamped = _stamped(path) if path.endswith(".md") else None
        if stamped is not None:
            found.add(stamped[1])
        else:
            found.update(agent for agent in agents if marker(agent).search(path))
    found.discard(creator or "")
    return ([creator] if creator else []) + sorted(found)


def _last_activity(taskforce: Taskforce) -> str | None:
    """The compact stamp of the newest stamped note; None before the first one."""
    stamps = [s[0] for s in map(_stamped, taskforce.notes) if s is not None]
    return max(stamps) if stamps else None


def _excerpt(body: str) -> str:
    """The README's first line of prose (its heading is usually just the name), else the
    first heading."""
    heading = ""
    for line in body.splitlines():
        text = line.strip()
        if text.startswith("#"):
            heading = heading or text.lstrip("#").strip()
        elif text:
            heading = text
            break
    return heading if len(heading) <= EXCERPT else heading[: EXCERPT - 1] + "…"


def _created_stamp(created: object) -> str:
    moment = naming.parse_moment(created)
    return naming.stamp(moment) if moment is not None else ""


def _text(value: object) -> str | None:
    return None if value is None else str(value)


@dataclass(frozen=True)
class Summary:
    taskforce: Taskforce
    readme: Record | None

    @property
    def frontmatter(self) -> dict[str, Any]:
        return self.readme.frontmatter if self.readme is not None else {}

    @property
    def creator(self) -> str | None:
        return _text(self.frontmatter.get("creator"))

    def activity(self) -> str:
        """Newest first by this: the newest note, or the creation when that is later."""
        return max(
            _last_activity(self.taskforce) or "", _created_stamp(self.frontmatter.get("created"))
        )

    def render(self, agents: Sequence[str]) -> dict[str, Any]:
        t = self.taskforce
        return {
            "name": t.name,
            "creator": self.creator,
            "created": _text(self.frontmatter.get("created")),
            "readme_excerpt": _excerpt(self.readme.body if self.readme is not None else ""),
            "contributors": contributors(t, self.creator, agents),
            "file_count": len(t.files),
            "note_count": len(t.notes),
            "last_activity": _last_activity(t),
        }


def _summaries(hub: Hub) -> list[Summary]:
    index = taskforces_index(hub)
    readmes = _readmes(hub, list(index.values()))
    return [Summary(t, readmes.get(t.name)) for t in index.values()]


def list_taskforces(hub: Hub, params: Mapping[str, str]) -> dict[str, Any]:
    """`GET /v1/taskforces?q=&limit=`: most recently active first (name breaks ties)."""
    summaries = _summaries(hub)
    count = len(summaries)
    q = (params.get("q") or "").lower()
    if q:
        summaries = [
            s
            for s in summaries
            if q in s.taskforce.name or (s.readme is not None and q in s.readme.body.lower())
        ]
    summaries.sort(key=lambda s: s.taskforce.name)
    summaries.sort(key=Summary.activity, reverse=True)
    matched = len(summaries)
    if params.get("limit"):
        summaries = summaries[: listing.parse_limit(params["limit"])]
    agents = registered_agents(hub)
    return {"count": count, "matched": matched, "items": [s.render(agents) for s in summaries]}


def _note(record: Record, inside: str) -> dict[str, Any]:
    """A note as a record, named by its path inside the taskforce (a stamped note's path
    is its filename)."""
    return {**render_record(record), "filename": inside}


def detail(hub: Hub, name: str) -> dict[str, Any]:
    taskforce = require_taskforce(hub, name)
    recent = taskforce.notes[::-1][:RECENT_IN_DETAIL]
    loaded = _load(hub, [taskforce.folder + p for p in [README, *recent]])
    readme = loaded.get(taskforce.folder + README)
    if readme is None:
        raise NotFound(
            f"the README of taskforce {name!r} could not be read", hint="retry in a moment"
        )
    creator = _text(readme.frontmatter.get("creator"))
    return {
        "name": name,
        "creator": creator,
        "created": _text(readme.frontmatter.get("created")),
        "updated": _text(readme.frontmatter.get("updated")),
        "readme": render_record(readme),
        "contributors": contributors(taskforce, creator, registered_agents(hub)),
        "file_count": len(taskforce.files),
        "note_count": len(taskforce.notes),
        "recent_notes": [
            _note(loaded[taskforce.folder + p], p) for p in recent if taskforce.folder + p in loaded
        ],
    }


def notes(hub: Hub, name: str, params: Mapping[str, str]) -> dict[str, Any]:
    """`GET /v1/taskforces/{name}/notes`: the list grammar over the taskforce's markdown
    files but its README, keyed by their path inside it."""
    taskforce = require_taskforce(hub, name)
    keys = taskforce.notes
    listed = listing.Listed(
        keys=keys, paths={key: taskforce.folder + key for key in keys}, count=len(keys)
    )
    agents = registered_agents(hub)

    def author(key: str) -> str | None:
        stamped = _stamped(key)
        if stamped is not None:
            return stamped[1]
        return next((agent for agent in agents if marker(agent).search(key)), None)

    return listing.page(
        listed,
        listing.parse_query(params, expand_max=hub.settings.expand_max_limit),
        load=lambda paths: _load(hub, paths),
        render=lambda key, record: _note(record, key),
        stamp_of=lambda key, _record: (_stamped(key) or (None, None))[0],
        agent_of=author,
    )


def files(hub: Hub, name: str) -> dict[str, Any]:
    """`GET /v1/taskforces/{name}/files`: every file, README included, by path."""
    taskforce = require_taskforce(hub, name)
    items = [{"path": p, "size": taskforce.files[p].size} for p in sorted(taskforce.files)]
    return {"count": len(items), "items": items}


def file_bytes(hub: Hub, name: str, path: str) -> tuple[bytes, str]:
    """One file's bytes and media type (`text/markdown` for `.md`)."""
    taskforce = require_taskforce(hub, name)
    naming.validate_components(path)
    data = hub.store.read(hub.central, taskforce.folder + path) if path in taskforce.files else None
    if data is None:
        raise NotFound(
            f"taskforce {name!r} has no file {path!r}",
            hint=f"GET /v1/taskforces/{name}/files lists them",
        )
    if path.endswith(".md"):
        return data, "text/markdown"
    return data, mimetypes.guess_type(path)[0] or "application/octet-stream"


def digest_block(hub: Hub) -> dict[str, Any]:
    """The digest's `taskforces`: how many, and the newest five by creation."""
    summaries = _summaries(hub)
    summaries.sort(key=lambda s: s.taskforce.name, reverse=True)
    summaries.sort(key=lambda s: _created_stamp(s.frontmatter.get("created")), reverse=True)
    return {
        "count": len(summaries),
        "newest": [s.taskforce.name for s in summaries[:NEWEST_IN_DIGEST]],
    }
