"""Writing a landscape event: one server stamp, one event per write that changed something
(`events.py`: the event and its overtaken details, one batch), written through the
central bucket, then its addressees woken."""

from __future__ import annotations

from agenthub.bucketsync.core import frontmatter, naming
from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.landscape import events
from agenthub.bucketsync.landscape.events import Change


def publish(hub: Hub, found: Change) -> str | None:
    """Write `found` (nothing when it is empty) and wake its addressees; returns the path."""
    if found.empty:
        return None
    entries = hub.read_model.entries(events.EVENTS)
    # After a restart the issuer has forgotten its last stamp; never overwrite a file.
    stamp = hub.stamps.issue(
        events.AUTHOR, taken=lambda s: events.path_of(events.filename(s)) in entries
    )
    head = {
        "agent": events.AUTHOR,
        "timestamp": naming.stamp_to_iso(stamp),
        "via": "server",
        **found.fields(),
    }
    name = events.filename(stamp)
    path = events.path_of(name)
    details = found.details()
    ahead = [(events.details_path(name), details)] if details is not None else []
    # The details go first: the event (last in the batch) is never visible without them.
    hub.write_central([*ahead, (path, frontmatter.render(head, found.body()))])
    if hub.notifier is not None:
        hub.notifier.wake(events.wake_keys(found))
    return path
