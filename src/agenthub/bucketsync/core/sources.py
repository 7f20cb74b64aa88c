"""Promoted sources (seed §4): a file or folder in an agent's scratch bucket that a write
copies into the central bucket. Every promotion resolves its source here."""

from __future__ import annotations

from collections.abc import Callable

from agenthub.bucketsync.core.access import require_registered
from agenthub.bucketsync.core.clihints import bucket_cli
from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.core.naming import SourceRef
from agenthub.bucketsync.errors import SourceNotFound


def claim_source(
    hub: Hub, uri: str, *, check: Callable[[SourceRef], object] | None = None
) -> SourceRef:
    """Parse `uri` (a scratch bucket, never central/audit), run `check` on it, require its
    agent to be registered, and charge the bucket's source-write limit."""
    source = hub.parse_source(uri)
    if check is not None:
        check(source)
    require_registered(hub, source.agent_id)
    hub.limiters.source_writes.acquire(source.bucket)
    return source


def read_source(hub: Hub, source: SourceRef, uri: str, *, hint: str | None = None) -> bytes:
    """The source file's bytes; `SourceNotFound` (with `hint`, by default how to upload
    it) when it is not there."""
    data = hub.store.read(source.bucket, source.path)
    if data is None:
        raise SourceNotFound(
            f"{uri} does not exist",
            hint=hint or f"{bucket_cli(hub.settings.storage)} cp <local file> {uri}",
        )
    return data
