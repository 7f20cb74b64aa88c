"""How a board-style record reads on the wire, and the index of a flat stamped folder."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from agenthub.bucketsync.core import frontmatter, listing, naming, trust
from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.core.readmodel import Record
from agenthub.bucketsync.storage.base import FileEntry


def render_record(record: Record) -> dict[str, Any]:
    """A record as every read delivers it, with its trust label (`core.trust`)."""
    stamp, author = naming.read_board_filename(record.filename) or (None, None)
    return {
        "filename": record.filename,
        "path": record.path,
        "agent": author or record.frontmatter.get("agent"),
        "timestamp": record.frontmatter.get("timestamp")
        or (naming.stamp_to_iso(stamp) if stamp else None),
        "frontmatter": record.frontmatter,
        "body": record.body,
        "reasons": None,  # set only by /v1/updates
        "trust": trust.label(record.frontmatter, record.body, content_hash=record.content_hash),
    }


def stamped_index(folder: str) -> Callable[[dict[str, FileEntry]], listing.Listed]:
    """Build the sorted filename keys of one flat folder from its listing: every markdown
    leaf, ours (`{stamp}_{agent}.md`) and others (ordered by their time prefix; a name
    without one sorts last) — data on the board is never silently invisible."""

    def build(entries: dict[str, FileEntry]) -> listing.Listed:
        paths = {
            path[len(folder) :]: path
            for path in entries
            if "/" not in path[len(folder) :]
            and naming.read_board_filename(path[len(folder) :]) is not None
        }
        return listing.Listed(keys=sorted(paths), paths=paths, count=len(paths))

    return build


def stamp_record(
    hub: Hub,
    author: str,
    *,
    via: str,
    fields: Mapping[str, Any],
    body: str,
    taken: Callable[[str], bool] = lambda _filename: False,
) -> tuple[str, bytes]:
    """A new `{stamp}_{author}.md` record: the server's stamp (skipping filenames `taken`
    reports as used) and `agent`/`timestamp`/`via` ahead of `fields`. Returns (filename,
    rendered bytes); every stamped write — board, channel, result — is made here."""
    stamp_value = hub.stamps.issue(
        author, taken=lambda s: taken(naming.message_filename(s, author))
    )
    stamped = {
        "agent": author,
        "timestamp": naming.stamp_to_iso(stamp_value),
        "via": via,
        **fields,
    }
    return naming.message_filename(stamp_value, author), frontmatter.render(stamped, body)
