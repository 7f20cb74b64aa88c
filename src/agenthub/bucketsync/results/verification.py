"""The verification index (`results/verification_status.json`): each result's verdict,
`pending` when absent. Written by the verifier (`scoring.verdicts`) or an organizer."""

from __future__ import annotations

import json

from agenthub.bucketsync.core import listing, naming
from agenthub.bucketsync.core.hub import Hub

VERIFICATION_INDEX = f"{naming.RESULTS}verification_status.json"


def verification_index(hub: Hub) -> dict[str, str]:
    """`results/verification_status.json`; unreadable or absent reads as all-pending."""
    record = hub.read_model.record(VERIFICATION_INDEX, naming.RESULTS)
    if record is None:
        return {}
    try:
        data = json.loads(record.body)
    except ValueError:
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(k): str(v) for k, v in data.items() if v in listing.VERIFICATION_STATES}
