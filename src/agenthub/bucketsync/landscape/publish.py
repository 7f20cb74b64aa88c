"""Writing landscape events: one server stamp for the batch, one file per event and
addressee (`events.py`), written through the central bucket, then the addressees woken."""

from __future__ import annotations

from collections.abc import Sequence

from agenthub.bucketsync.core import frontmatter, naming
from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.landscape import events
from agenthub.bucketsync.landscape.events import Event


def publish(hub: Hub, found: Sequence[Event]) -> list[str]:
    """Write `found` in one batch and wake its addressees; returns the paths written."""
    if not found:
        return []
    entries = hub.read_model.entries(events.EVENTS)

    def taken(stamp: str) -> bool:
        # After a restart the issuer has forgotten its last stamp; never overwrite a file.
        return any(events.path_for(e.to, events.filename(stamp, e.kind)) in entries for e in found)

    stamp = hub.stamps.issue(events.AUTHOR, taken=taken)
    adds: list[tuple[str, bytes]] = []
    for event in found:
        head = {
            "agent": events.AUTHOR,
            "timestamp": naming.stamp_to_iso(stamp),
            "via": "server",
            "kind": event.kind,
            "to": event.to if event.to is not None else "all",
            **event.fields,
        }
        path = events.path_for(event.to, events.filename(stamp, event.kind))
        adds.append((path, frontmatter.render(head, event.body)))
    hub.write_central(adds)
    if hub.notifier is not None:
        hub.notifier.wake(events.wake_keys(found))
    return [path for path, _data in adds]
