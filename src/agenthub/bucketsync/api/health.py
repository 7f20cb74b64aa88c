"""`GET /v1/healthz`: each dependency probed now, and the service's counters."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.core.notify import NotifierHealth


def _probe(check: Callable[[], object]) -> dict[str, Any]:
    try:
        check()
    except Exception as exc:  # any failure of a dependency is what healthz reports
        return {"status": "down", "error": f"{type(exc).__name__}: {exc}"}
    return {"status": "ok"}


def dependencies(hub: Hub, notifier: NotifierHealth) -> dict[str, dict[str, Any]]:
    """Each dependency probed now: the store (the central bucket's metadata), identity (an
    org-role lookup) and the bus (a ping; `none` with the in-process notifier)."""
    s = hub.settings
    bus: dict[str, Any] = (
        {"status": "none"}
        if notifier.bus is None
        else {"status": "down", "error": notifier.error}
        if notifier.error is not None
        else {"status": "ok"}
    )
    return {
        "store": _probe(lambda: hub.store.info(s.central_bucket)),
        "identity": _probe(lambda: hub.identity.org_role(s.org, "bucket-sync")),
        "bus": bus,
    }


def report(hub: Hub) -> dict[str, Any]:
    """The counters and each dependency; `status` is `degraded` while one is down (the
    route answers 503 then)."""
    notifier = hub.notifier.health() if hub.notifier is not None else NotifierHealth()
    checks = dependencies(hub, notifier)
    down = any(check["status"] == "down" for check in checks.values())
    return {
        "status": "degraded" if down else "ok",
        "dependencies": checks,
        "audit": {
            "written": hub.audit.written,
            "failures": hub.audit.failures,
            "last_error": hub.audit.last_error,
        },
        "read_model": {
            "listings": hub.read_model.listings,
            "listings_by_folder": dict(hub.read_model.listings_by_folder),
            "content_entries": len(hub.read_model.content),
            "content_bytes": hub.read_model.content.total_bytes,
            # The central bucket's change feed (hf): live, or listings refresh every TTL.
            "feed": (
                {**hub.read_model.feed.stats(), "applied": dict(hub.read_model.feed_counts)}
                if hub.read_model.feed is not None
                else None
            ),
        },
        # The HF token's Hub request budget: window_s, used, limit, shed, refused.
        "hub_budget": hub.budget.report() if hub.budget is not None else None,
        "writes": {"repairs_pending": hub.repairs_pending},
        "wakes": notifier.wakes,
        "longpoll": hub.longpoll.registry.stats() if hub.longpoll is not None else None,
        "bus": notifier.bus,
        # Presence shared with other workers for reach forecasts (None: one worker).
        "presence_map": (
            hub.longpoll.registry.presence_map.stats() if hub.longpoll is not None else None
        ),
    }
