"""Reading the board and inboxes — composed entirely from the read model."""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Mapping, MutableMapping
from typing import Any, cast

from agenthub.bucketsync.core import listing, naming
from agenthub.bucketsync.core.access import check_registered
from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.core.readmodel import Record
from agenthub.bucketsync.core.records import render_record, stamped_index
from agenthub.bucketsync.errors import NotFound
from agenthub.bucketsync.storage.base import FileEntry


def _inbox_index(entries: dict[str, FileEntry]) -> dict[str, dict[str, str]]:
    by_handle: dict[str, dict[str, str]] = {}
    for path in entries:
        rest = path[len(naming.INBOX) :]
        handle, _, filename = rest.partition("/")
        if naming.read_board_filename(filename) is None:
            continue
        by_handle.setdefault(handle, {})[filename] = path
    return by_handle


def parse_query(hub: Hub, params: Mapping[str, str]) -> listing.ListQuery:
    """The list grammar's query for a board or inbox read (400 on a bad value, a cursor
    that is no filename included)."""
    return listing.parse_query(
        params, expand_max=hub.settings.expand_max_limit, cursor=listing.is_filename_cursor
    )


def list_messages(hub: Hub, params: Mapping[str, str]) -> dict[str, Any]:
    query = parse_query(hub, params)
    listed = hub.read_model.derived(
        naming.MESSAGE_BOARD, "stamped", stamped_index(naming.MESSAGE_BOARD)
    )
    return listing.page(
        listed,
        query,
        load=lambda ps: hub.read_model.records(ps, naming.MESSAGE_BOARD),
        render=lambda _key, record: render_record(record),
        memo=hub.read_model.filter_memo(naming.MESSAGE_BOARD),
    )


def get_message(hub: Hub, filename: str) -> dict[str, Any]:
    record = None
    if naming.read_board_filename(filename) is not None:
        record = hub.read_model.record(f"{naming.MESSAGE_BOARD}{filename}", naming.MESSAGE_BOARD)
    if record is None:
        raise NotFound(
            f"no message {filename!r} on the board", hint="list them with GET /v1/messages"
        )
    return render_record(record)


class _InboxLoader:
    """Loads inbox records from two folders: the handle's copies and the broadcasts."""

    def __init__(self, hub: Hub) -> None:
        self.hub = hub

    def __call__(self, paths: list[str] | Any) -> dict[str, Record]:
        inbox = [p for p in paths if p.startswith(naming.INBOX)]
        broadcasts = [p for p in paths if p.startswith(naming.BROADCASTS)]
        found = self.hub.read_model.records(inbox, naming.INBOX) if inbox else {}
        if broadcasts:
            found.update(self.hub.read_model.records(broadcasts, naming.BROADCASTS))
        return found


def inbox_listed(hub: Hub, handle: str) -> listing.Listed:
    """The handle's inbox copies plus every broadcast, deduped by filename (§11). Most
    handles hold broadcasts only and share the broadcasts' listing; the others' joined
    listing is built once per change of either folder (a broadcast's woken waiters each
    read theirs twice: the answer, and the check before parking again)."""
    naming.validate_handle(handle)
    if not naming.is_human_handle(handle):
        check_registered(hub, handle)
    if not _copies(hub, handle):
        return _broadcasts(hub)
    # Built from what the build itself reads (not `copies` above): `joined` reads the
    # versions first, so a value it keeps is never older than they say.
    return hub.read_model.joined(
        ("inbox", handle), (naming.INBOX, naming.BROADCASTS), lambda: _inbox_listed(hub, handle)
    )


def _copies(hub: Hub, handle: str) -> dict[str, str]:
    return hub.read_model.derived(naming.INBOX, "by_handle", _inbox_index).get(handle, {})


def _broadcasts(hub: Hub) -> listing.Listed:
    return hub.read_model.derived(naming.BROADCASTS, "stamped", _BROADCASTS_INDEX)


_BROADCASTS_INDEX = stamped_index(naming.BROADCASTS)


def _inbox_listed(hub: Hub, handle: str) -> listing.Listed:
    copies, broadcasts = _copies(hub, handle), _broadcasts(hub)
    # Copies first: a filename in both is the handle's own copy. The broadcasts' paths
    # are looked through, not copied, so a handle costs its keys, not a second map.
    # (A ChainMap writes only to its first map; typeshed asks every map be mutable.)
    paths = ChainMap(copies, cast("MutableMapping[str, str]", broadcasts.paths))
    keys = sorted(copies.keys() | set(broadcasts.keys))
    return listing.Listed(keys=keys, paths=paths, count=len(keys))


def inbox(hub: Hub, handle: str, params: Mapping[str, str]) -> dict[str, Any]:
    return inbox_page(hub, handle, parse_query(hub, params))


def inbox_page(hub: Hub, handle: str, query: listing.ListQuery) -> dict[str, Any]:
    """Two folders (copies, broadcasts): served up to the watermark, read before them."""
    bound = hub.stamps.watermark()
    listed = inbox_listed(hub, handle)
    page = listing.page(
        listed,
        query,
        load=_InboxLoader(hub),
        render=lambda _key, record: render_record(record),
        bound=bound,
    )
    if listing.held_back(page, listed, hub.stamps.catch_up):
        return inbox_page(hub, handle, query)  # once: the floor is past every listed key
    return page
