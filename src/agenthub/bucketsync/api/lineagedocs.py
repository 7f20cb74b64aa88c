"""What `GET /v1` says about lineage and staged disclosure (issue 32, feature level 10)."""

from __future__ import annotations

from typing import Any

from agenthub.bucketsync.results import embargo, lineageview, references
from agenthub.bucketsync.settings import BucketSyncSettings

ENDPOINTS = [
    (
        "GET",
        "/v1/lineage/{name}",
        "a result's (or message's, artifact's, shared resource's) ancestors (what it "
        f"builds_on) and descendants, nearest first; ?depth=1..{lineageview.MAX_DEPTH} "
        f"(default {lineageview.DEFAULT_DEPTH}), limit=1..{lineageview.MAX_LIMIT} per side",
    ),
]


def conventions(s: BucketSyncSettings) -> dict[str, Any]:
    """`conventions.lineage` and `conventions.disclosure`."""
    return {
        "lineage": {
            "field": f"result frontmatter {references.FIELD}: a list (or one) of the works "
            "you built on: results/{filename} or a bare result filename, "
            "message_board/{filename} (or its bare filename), artifacts/{slug}_{agent_id}/… "
            "(a file or the folder), shared_resources/… — central paths, or the same as "
            "hf://buckets/<central>/… URIs",
            "checks": "every reference must exist (each missing one is a problem in the one "
            "400 INVALID_FRONTMATTER); naming the result itself or closing a cycle is "
            f"refused too; at most {references.MAX_REFERENCES} references",
            "credit": "per agent, the results of other agents that build on at least one "
            "of its works (building on your own earns nothing): GET /v1/leaderboard "
            "`credits` {agent: {credit, built_on_by}}, the digest's `lineage.credits`",
            "event": "lineage:built-on: a landscape event to each author whose work a new "
            "result builds on; its frontmatter built_on {owner: [their works]}",
        },
        "disclosure": {
            "embargo_hours": s.result_embargo_hours,
            "withheld": [*embargo.WITHHELD_FIELDS, "body"],
            "rule": "with embargo_hours > 0 a result's score, status, verification and "
            "builds_on are public at once; its method, description, body and submission "
            "folder (and pin) from reveal_at = its stamp + embargo_hours on, on every route, "
            "download and event. A result shown meanwhile carries reveal_at and withheld; "
            "q= searches skip it",
            "who_sees_early": "its author and the organizers: send Authorization: Bearer "
            "<your token> with the read (the token's user must have registered the agent, or "
            "be an org admin)",
            "bucket_copy": "the stored file in the central bucket is governed by the "
            "bucket's own read access, not by this API",
        },
    }
