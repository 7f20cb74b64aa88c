"""What the scoring loop shows: `GET /v1/queue`, `GET /v1/me/quota`, and the verification
block of `GET /v1/results/{filename}` (where a result stands: queued, running, decided, and
why it failed)."""

from __future__ import annotations

from typing import Any

from agenthub.bucketsync.agents.read import agents_of
from agenthub.bucketsync.core.access import bearer_caller
from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.phases.schedule import sealed
from agenthub.bucketsync.results.write import get_result
from agenthub.bucketsync.scoring.assembly import Scoring

# Ledger fields a participant may see (the rest is the verifier's bookkeeping).
SHOWN_LEDGER = (
    "state",
    "verdict",
    "reason",
    "problem",
    "job_url",
    "launched_at",
    "attempt",
    "rerun",
    "deviation",
    "changed",
    "changed_count",
)

# The private split's numbers: hidden while it is sealed.
PRIVATE_LEDGER = ("rerun", "deviation")

QUEUE_FIELDS = ("state", "queued_at", "started_at", "attempt", "position", "eta_s", "eta_at")


def queue(scoring: Scoring) -> dict[str, Any]:
    """`GET /v1/queue`."""
    return scoring.jobs.queue.view(verifier_enabled=scoring.verifier is not None)


def my_quota(scoring: Scoring, authorization: str | None) -> dict[str, Any]:
    """`GET /v1/me/quota` (Bearer): the caller's and each of their agents' runs left."""
    hub = scoring.jobs.hub
    caller = bearer_caller(hub, authorization)
    return scoring.jobs.quota.usage(caller.user, agents_of(hub, caller.user))


def result(hub: Hub, scoring: Scoring | None, filename: str) -> dict[str, Any]:
    """`GET /v1/results/{filename}`, with where its verification stands when the verifier
    runs (`verification_detail`: the ledger's public fields, and the queue entry with its
    position and ETA while it waits or runs)."""
    body = get_result(hub, filename)
    if scoring is None or scoring.verifier is None:
        return body
    ledger = scoring.verifier.ledger(filename) or {}
    hidden = PRIVATE_LEDGER if sealed(hub.settings, hub.clock.now()) else ()
    detail: dict[str, Any] = {k: ledger[k] for k in SHOWN_LEDGER if k in ledger and k not in hidden}
    entry = scoring.jobs.queue.entry(filename)
    if entry is not None:
        detail["queue"] = {k: entry.get(k) for k in QUEUE_FIELDS}
    body["verification_detail"] = detail or None
    return body
