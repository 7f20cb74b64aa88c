"""Re-submitting a result for verification (`POST /v1/results/{filename}:reverify`) after
the platform failed its verification, which leaves it `pending` with nothing else to do:
promoting it again is `409 ALREADY_PROMOTED` (dedup by content, seed §5).

Who and when:
- Only the result's author (the user its agent is registered to), and only while the
  verifier's ledger says the platform failed the run (`platform_error`, retries used up)
  or could not find its submission (`unlocatable`, e.g. the folder was uploaded late). A
  decided result (`valid`/`invalid`, by the verifier or a human, seed §9), one still queued
  or running, one the verifier never took up, and one whose run failed on its merits
  (harness error, timeout, out of memory, no score) cannot be re-submitted: a new result
  can.
- The re-run is charged as a benchmark job to the author's agent and user (the 24h caps of
  `scoring/quota.py`, 429 with Retry-After when used up); if the platform fails it again the
  charge is released, as for any run the platform failed.
- Every accepted re-submission is a row of the audit log.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agenthub.bucketsync.core import naming
from agenthub.bucketsync.core.access import bearer_caller, require_registered
from agenthub.bucketsync.core.hub import CallerInfo
from agenthub.bucketsync.errors import Conflict, IdentityMismatch, InvalidFrontmatter, NotFound
from agenthub.bucketsync.results.leaderboard import score_of
from agenthub.bucketsync.runners.base import PLATFORM_ERROR, SUBMISSION_MISSING
from agenthub.bucketsync.scoring.verifier import Verifier

ROUTE = "/v1/results/{filename}:reverify"


@dataclass(frozen=True)
class Charge:
    """A re-submission counted against the quota: its ledger row's id and what is left."""

    job_id: str
    agent: int
    user: int


def charge(verifier: Verifier, filename: str, agent_id: str, hf_user: str) -> Charge:
    """Count a re-submitted verification as one benchmark job of `agent_id` and `hf_user`
    (the 24h caps; 429 when used up). The row names no run folder (the verification run
    reports to the audit bucket, where `reconcile` finishes it); the verifier releases it
    if the platform fails the run again."""
    now = verifier.hub.clock.now().isoformat(timespec="milliseconds")
    job_id = f"reverify:{filename}:{now}"
    _none, remaining = verifier.jobs.quota.launch(agent_id, hf_user, lambda: (job_id, None))
    return Charge(job_id, remaining.agent, remaining.user)


def resubmittable(ledger: dict[str, Any] | None) -> bool:
    """The ledger of a verification the platform failed (or whose submission was missing)."""
    if ledger is None:
        return False
    state, reason = ledger.get("state"), ledger.get("reason")
    return (state == "failed" and reason == PLATFORM_ERROR) or (
        state == "unlocatable" and reason == SUBMISSION_MISSING
    )


def resubmit(
    verifier: Verifier, authorization: str | None, filename: str, *, caller_info: CallerInfo
) -> dict[str, Any]:
    hub = verifier.hub
    caller = bearer_caller(hub, authorization)
    author = naming.parse_stamped_filename(filename)
    record = hub.read_model.record(naming.result_path(filename), naming.RESULTS) if author else None
    if author is None or record is None:
        raise NotFound(f"no result {filename!r}", hint="list them with GET /v1/results")
    agent_id = author[1]
    registration = require_registered(hub, agent_id)
    if registration.frontmatter.get("hf_user") != caller.user:
        raise IdentityMismatch(
            f"{filename} is a result of {agent_id}, which is not registered to {caller.user}",
            hint="only the result's author can re-submit it",
        )
    index = verifier.index_fresh()
    verdict = (index or {}).get(filename, "pending")
    if verdict != "pending":
        raise Conflict(
            f"{filename} is already {verdict}",
            hint="a decided result is not re-run; promote a new result for new work",
        )
    ledger = verifier.ledger(filename)
    if not resubmittable(ledger):
        raise Conflict(_why_not(filename, ledger), hint=_what_instead(ledger))
    reported = score_of(record.frontmatter, hub.settings.score_field)
    if reported is None:
        raise InvalidFrontmatter(f"{filename} has no {hub.settings.score_field} to verify")
    if ledger is not None and ledger.get("state") == "unlocatable":
        located, problem = verifier.locate(agent_id, record.frontmatter)
        if located is None:
            raise Conflict(
                f"{filename} still cannot be verified: {problem}",
                hint="upload the submission to the folder its artifacts: line names, then "
                "re-submit; or promote a new result naming the folder that holds it",
            )
    charged = charge(verifier, filename, agent_id, caller.user)
    outcome = verifier.requeue(
        filename,
        agent_id=agent_id,
        reported=reported,
        fields={
            "resubmitted_by": caller.user,
            "resubmissions": int((ledger or {}).get("resubmissions", 0)) + 1,
            "charge": charged.job_id,
            "previous": {k: (ledger or {}).get(k) for k in ("state", "reason", "message")},
        },
    )
    hub.audit.record(
        agent_id=agent_id,
        route=ROUTE,
        via="bearer",
        source=naming.result_path(filename),
        target_path=naming.result_path(filename),
        size=0,
        status_code=202,
        job_id=charged.job_id,
        hf_user=caller.user,
        caller_ip=caller_info.ip,
        user_agent=caller_info.user_agent,
    )
    return {
        "filename": filename,
        "verification": "pending",
        "state": outcome,
        "quota": {"agent_remaining": charged.agent, "user_remaining": charged.user},
        "message": f"{filename} is {outcome} for verification again; the verdict is "
        "announced on the board and shows in GET /v1/results/" + filename,
    }


def _why_not(filename: str, ledger: dict[str, Any] | None) -> str:
    if ledger is None:
        return f"{filename} has not been taken up by the verifier: there is nothing to retry"
    state = ledger.get("state")
    if state in ("queued", "running"):
        return f"the verification of {filename} is already {state}"
    if state in ("decided", "deferred"):
        return f"{filename} has a verdict already"
    reason = ledger.get("reason") or ledger.get("problem") or state
    return f"the verification of {filename} failed on its merits ({reason}), not the platform's"


def _what_instead(ledger: dict[str, Any] | None) -> str:
    if ledger is None:
        return "only results that beat the valid champion are re-run; see GET /v1/queue"
    if ledger.get("state") in ("queued", "running"):
        return "wait for it: GET /v1/queue shows where it is"
    return "fix the submission and promote a new result (see job_logs.txt of the run)"
