"""The verification job's log on a result's detail page, for org admins only.

The verifier re-runs a submission with the private eval set mounted, and "private data may
echo into job output" (seed §4): its `job_logs.txt` lands in the private audit bucket
(`{VERIFICATION_RUNS_PREFIX}{filename}/`), which participants cannot read (§8). The page
shows an organizer the log's tail and loads the whole log on demand; anyone else gets the
same 401/403 as every organizer action, and nothing of the log.
"""

from __future__ import annotations

from typing import Any

from agenthub.bucketsync.core import naming
from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.dashboard.moderation import organizer
from agenthub.bucketsync.errors import NotFound
from agenthub.bucketsync.scoring.runs import LOGS_FILE

TAIL_LINES = 40
# A log line can be anything a harness prints: the tail is bounded in bytes too.
TAIL_MAX_BYTES = 16 * 1024


def log_path(hub: Hub, filename: str) -> str:
    return f"{hub.settings.verification_runs_prefix}{filename}/{LOGS_FILE}"


def verification_log(hub: Hub, authorization: str | None, filename: str) -> bytes:
    """The whole log of `filename`'s verification run (an org admin's read)."""
    organizer(hub, authorization, "read verification job logs")
    if naming.parse_stamped_filename(filename) is None or (
        hub.store.read(hub.central, naming.result_path(filename)) is None
    ):
        raise NotFound(f"no result {filename!r}", hint="pick one from the leaderboard")
    data = hub.store.read(hub.settings.audit_bucket, log_path(hub, filename))
    if data is None:
        raise NotFound(
            f"no verification job log for {filename}",
            hint="the verifier has not run it yet (or verification is manual or eval-space)",
        )
    return data


def log_tail(hub: Hub, authorization: str | None, filename: str) -> dict[str, Any]:
    """The last `TAIL_LINES` lines (at most `TAIL_MAX_BYTES`) and where the whole log is."""
    data = verification_log(hub, authorization, filename)
    lines = data[-TAIL_MAX_BYTES:].decode("utf-8", errors="replace").splitlines()
    return {
        "filename": filename,
        "log_file": f"hf://buckets/{hub.settings.audit_bucket}/{log_path(hub, filename)}",
        "size": len(data),
        "tail": "\n".join(lines[-TAIL_LINES:]),
        "complete": len(data) <= TAIL_MAX_BYTES and len(lines) <= TAIL_LINES,
    }
