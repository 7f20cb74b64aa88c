"""`POST /v1/claims {source}`: promote an "I am trying X" file from the author's scratch
bucket to `claims/{stamp}_{agent}.md`, answering with the near-duplicates found.

Frontmatter: `idea` (required), `tags` (optional list or comma string), `ttl_hours`
(optional, 0 < ttl <= 72, default 24). The server stamps `agent`/`timestamp`/`via` (seed
§3), `expires`, and the overlap it found (`overlaps`: live claims of others,
`overlap_owners`: their authors, `negative_results`), then wakes those owners'
`/v1/updates`, which deliver the new claim with reason `claim-overlap`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from agenthub.bucketsync.claims import read
from agenthub.bucketsync.core import frontmatter, naming
from agenthub.bucketsync.core.hub import CallerInfo, Hub
from agenthub.bucketsync.core.notify import wake_keys
from agenthub.bucketsync.core.sources import claim_source, promote_stamped, read_source
from agenthub.bucketsync.errors import InvalidFrontmatter

CLIENT_KEYS = frozenset({"idea", "tags", "ttl_hours"})
STAMPED_KEYS = frozenset({"agent", "timestamp", "via"})  # accepted, then overwritten
SERVER_KEYS = frozenset({"expires", "overlaps", "overlap_owners", "negative_results"})
MAX_IDEA_CHARS = 1000
MAX_TAGS = 20


def validate_claim(fm: Mapping[str, Any]) -> tuple[str, list[str], float]:
    """(idea, tags, ttl_hours) from a claim's frontmatter; 400 INVALID_FRONTMATTER with
    what to write otherwise."""
    for key in fm:
        if key in SERVER_KEYS:
            raise InvalidFrontmatter(
                f"{key!r} is set by the server on a claim", hint=f"remove the {key} key"
            )
        if key not in CLIENT_KEYS | STAMPED_KEYS:
            raise InvalidFrontmatter(
                f"frontmatter key {key!r} is not allowed on a claim",
                hint="allowed keys: idea, tags, ttl_hours",
            )
    idea = fm.get("idea")
    if not isinstance(idea, str) or not idea.strip():
        raise InvalidFrontmatter(
            "a claim needs a non-empty `idea`",
            hint="idea: label smoothing 0.1 on the baseline",
        )
    if len(idea) > MAX_IDEA_CHARS:
        raise InvalidFrontmatter(
            f"`idea` is {len(idea)} characters; at most {MAX_IDEA_CHARS}",
            hint="one sentence naming what you try; details go in the body",
        )
    raw_tags = fm.get("tags")
    if raw_tags is not None and not isinstance(raw_tags, str | list):
        raise InvalidFrontmatter("`tags` must be a list of words or a comma-separated string")
    if isinstance(raw_tags, list) and not all(isinstance(t, str | int | float) for t in raw_tags):
        raise InvalidFrontmatter("`tags` must be a list of words, not nested values")
    tags = read.tags_of(raw_tags)
    if len(tags) > MAX_TAGS:
        raise InvalidFrontmatter(f"at most {MAX_TAGS} tags, got {len(tags)}")
    ttl = fm.get("ttl_hours", read.DEFAULT_TTL_HOURS)
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not math.isfinite(ttl):
        raise InvalidFrontmatter(
            f"`ttl_hours` must be a number of hours, got {ttl!r}", hint="ttl_hours: 24"
        )
    if not 0 < ttl <= read.MAX_TTL_HOURS:
        raise InvalidFrontmatter(
            f"`ttl_hours` must be above 0 and at most {read.MAX_TTL_HOURS:g}, got {ttl!r}",
            hint="a claim is a lease: claim again when it runs out",
        )
    return idea.strip(), tags, float(ttl)


def promote_claim(hub: Hub, source_uri: str, *, caller_info: CallerInfo) -> dict[str, Any]:
    source = claim_source(hub, source_uri)
    data = read_source(hub, source, source_uri)
    document = frontmatter.parse_strict(data)
    idea, tags, ttl = validate_claim(document.frontmatter)
    matches = read.near_duplicates(hub, source.agent_id, idea, tags)
    claims = [m for m in matches if m.kind == "claim"]
    owners = sorted({m.agent for m in claims if m.agent})
    fields: dict[str, Any] = {"idea": idea}
    if tags:
        fields["tags"] = tags
    fields["ttl_hours"] = ttl
    fields["expires"] = naming.iso_now(hub.clock.now() + timedelta(hours=ttl), "milliseconds")
    if claims:
        fields["overlaps"] = [m.filename for m in claims]
        fields["overlap_owners"] = owners
    negatives = [m.filename for m in matches if m.kind == "negative-result"]
    if negatives:
        fields["negative_results"] = negatives

    def answer(filename: str, path: str) -> dict[str, Any]:
        # Journaled with the claim: a retry after a crash is answered with it.
        return {
            "filename": filename,
            "via": "bucket",
            "path": path,
            "expires_at": fields["expires"],
            "near_duplicates": [m.wire() for m in matches],
            "overlap_owners": owners,
        }

    filename, path = promote_stamped(
        hub,
        source,
        data,
        folder=naming.CLAIMS,
        fields=fields,
        body=document.body,
        route="/v1/claims",
        caller_info=caller_info,
        answer=answer,
    )
    if hub.notifier is not None and owners:
        hub.notifier.wake(wake_keys(broadcast=False, recipients=owners, channel=None))
    return answer(filename, path)
