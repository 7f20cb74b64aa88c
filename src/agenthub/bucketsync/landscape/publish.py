"""Writing a landscape event: one server stamp, one event per write that changed something
(`events.py`: the event and its overtaken details, one batch), written through the
central bucket, then its addressees woken. `new_path`, `render` and `wake` are the steps,
for a writer that must claim the path before it writes (`phases.announce`)."""

from __future__ import annotations

from agenthub.bucketsync.core import frontmatter, naming
from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.landscape import events
from agenthub.bucketsync.landscape.events import Change


def publish(hub: Hub, found: Change) -> str | None:
    """Write `found` (nothing when it is empty) and wake its addressees; returns the path."""
    if found.empty:
        return None
    path = new_path(hub)
    details = found.details()
    ahead = (
        [(events.details_path(path[len(events.EVENTS) :]), details)] if details is not None else []
    )
    # The details go first: the event (last in the batch) is never visible without them.
    hub.write_central([*ahead, (path, render(found, path))])
    wake(hub, found)
    return path


def new_path(hub: Hub) -> str:
    """A path for a new event, its stamp issued (unsettled until the event is written)."""
    entries = hub.read_model.entries(events.EVENTS)
    # After a restart the issuer has forgotten its last stamp; never overwrite a file.
    stamp = hub.stamps.issue(
        events.AUTHOR, taken=lambda s: events.path_of(events.filename(s)) in entries
    )
    return events.path_of(events.filename(stamp))


def render(found: Change, path: str) -> bytes:
    """The event file of `found` at `path` (from `new_path`)."""
    parsed = naming.parse_stamped_filename(path[len(events.EVENTS) :])
    assert parsed is not None, path
    head = {
        "agent": events.AUTHOR,
        "timestamp": naming.stamp_to_iso(parsed[0]),
        "via": "server",
        **found.fields(),
    }
    return frontmatter.render(head, found.body())


def wake(hub: Hub, found: Change) -> None:
    if hub.notifier is not None:
        hub.notifier.wake(events.wake_keys(found))
