"""Verdicts on re-scored results, shared by the jobs verifier and `agenthub challenge
evaluate`: `verdict_for` (the tolerance and guard rule), locating a result's submission, and
`VerdictBook` — the private side ledger, the compare-and-set into
`results/verification_status.json` and the board announcement.

- Verdict: `valid` iff |rerun - reported| / reported ≤ VERIFIER_SCORE_TOL and (when
  VERIFIER_GUARD_FIELD is set) rerun_guard ≤ VERIFIER_GUARD_CAP; missing numbers leave it
  pending.
- Compare-and-set against a private side ledger (`verification_ledger/{filename}/verdict.json`
  in the audit bucket): the ledger records the verdict about to be written *before* the
  index write, so a non-pending index value the ledger does not know is a human's, and
  human verdicts always win. The ledger lives outside the job's rw /state mount, so nothing
  inside the container can forge it.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping
from typing import Any

from agenthub.bucketsync.board.write import Draft, publish
from agenthub.bucketsync.core import naming
from agenthub.bucketsync.core.hub import CallerInfo, Hub
from agenthub.bucketsync.results import standings
from agenthub.bucketsync.results.leaderboard import score_of, scored_results
from agenthub.bucketsync.results.pins import Located, locate
from agenthub.bucketsync.results.verification import (
    encode_index,
    index_edits,
    parse_index,
    stored_index,
)
from agenthub.bucketsync.runners.base import GUARD_EXCEEDED, SCORE_MISMATCH, SUBMISSION_CHANGED
from agenthub.bucketsync.storage.base import Batch, read_json_object

log = logging.getLogger(__name__)

LEDGER_PREFIX = "verification_ledger/"


def verdict_for(
    reported: float,
    summary: Mapping[str, Any],
    *,
    score_field: str,
    tolerance: float,
    guard_field: str = "",
    guard_cap: float | None = None,
) -> tuple[str | None, dict[str, Any]]:
    """(`valid`|`invalid`, details), or (None, details) when the numbers are missing."""
    rerun = summary.get(score_field)
    details: dict[str, Any] = {"reported": reported, "rerun": rerun, "tolerance": tolerance}
    if isinstance(rerun, bool) or not isinstance(rerun, int | float) or not math.isfinite(rerun):
        details["problem"] = f"summary.json has no numeric {score_field!r}"
        return None, details
    deviation = abs(rerun - reported) / reported
    details["deviation"] = deviation
    ok = deviation <= tolerance
    if guard_field:
        guard = summary.get(guard_field)
        details["guard_field"], details["guard"], details["guard_cap"] = (
            guard_field,
            guard,
            guard_cap,
        )
        if isinstance(guard, bool) or not isinstance(guard, int | float):
            details["problem"] = f"summary.json has no numeric guard {guard_field!r}"
            return None, details
        guarded = guard_cap is not None and guard <= guard_cap
        if ok and not guarded:
            details["reason"] = GUARD_EXCEEDED
        ok = ok and guarded
    if deviation > tolerance:
        details["reason"] = SCORE_MISMATCH
    return ("valid" if ok else "invalid"), details


class VerdictBook:
    """The verdict side of verification, shared by every mode that re-scores results (the
    jobs verifier below, and `agenthub challenge evaluate`): the private side ledger, locating
    a submission, the compare-and-set into the index (human verdicts win) and the board
    announcement. Needs no JobsService."""

    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        self.settings = hub.settings
        self.announced = 0

    # -- side ledger ------------------------------------------------------------------------
    def _ledger_path(self, filename: str) -> str:
        return f"{LEDGER_PREFIX}{filename}/verdict.json"

    def ledger(self, filename: str) -> dict[str, Any] | None:
        return read_json_object(
            self.hub.store, self.settings.audit_bucket, self._ledger_path(filename)
        )

    def save_ledger(self, filename: str, entry: dict[str, Any]) -> None:
        body = json.dumps(entry, indent=2, sort_keys=True).encode()
        self.hub.store.write_batch(
            self.settings.audit_bucket, Batch(adds=[(self._ledger_path(filename), body)])
        )

    def champion_score(self, index: Mapping[str, str]) -> float | None:
        ranking = scored_results(self.hub).ranking(
            self.hub, index, verification=("valid",), best_per_agent=False
        )
        return ranking.rows[0].score if ranking.rows else None

    def locate(self, author: str, fm: Mapping[str, Any]) -> tuple[Located | None, str]:
        """Where the result's submission lives, or (None, what is wrong)."""
        return locate(self.hub, author, fm)

    # -- verdict ----------------------------------------------------------------------------
    def index_fresh(self) -> dict[str, str] | None:
        """The index as stored now (not the TTL'd copy); None if unreadable."""
        index = stored_index(self.hub)
        return None if index is None else {str(k): str(v) for k, v in index.items()}

    def commit(self, filename: str, ledger: dict[str, Any]) -> str:
        """Compare-and-set the verdict into the index, then announce it (each at most once)."""
        verdict = str(ledger["verdict"])
        if ledger.get("state") == "deferred":
            return "deferred to a human verdict"
        # Promotions enter results as pending through the same edits: neither write loses
        # the other's, whichever worker or machine makes it (`core.shared`: fenced under
        # the lock, or compare-and-swap on S3, where a lost pass runs again on what won).
        for edit in index_edits(self.hub):
            index = parse_index(edit.data)
            if index is None:
                log.error("verification index unreadable; %s stays pending", filename)
                return "index unreadable"
            current = str(index.get(filename, "pending"))
            if current != "pending" and current != ledger.get("written"):
                ledger = {**ledger, "state": "deferred", "human_verdict": current}
                self.save_ledger(filename, ledger)
                return "deferred to a human verdict"
            if ledger.get("written") != verdict:
                ledger = {**ledger, "written": verdict}
                self.save_ledger(filename, ledger)  # intent first
            before = {str(k): str(v) for k, v in index.items()}
            if current != verdict:
                index[filename] = verdict
                edit.write(encode_index(index))
        if current != verdict:
            standings.after_verdict(
                self.hub, filename, verdict, before=before, after={**before, filename: verdict}
            )
        if not ledger.get("announced"):
            author = naming.parse_stamped_filename(filename)
            assert author is not None
            self._announce_verdict(filename, author[1], verdict, ledger)
            self.save_ledger(filename, {**ledger, "announced": True})
        return verdict

    # -- the board --------------------------------------------------------------------------
    def _announce_verdict(
        self, filename: str, author: str, verdict: str, details: Mapping[str, Any]
    ) -> None:
        field = self.settings.score_field
        if details.get("reason") == SUBMISSION_CHANGED:
            paths = ", ".join(f"`{c['path']}` ({c['change']})" for c in details.get("changed", []))
            body = (
                f"@{author} your result `{filename}` is **{verdict}**: its submission changed "
                f"after it was promoted (`{SUBMISSION_CHANGED}`): {paths}. The verifier runs "
                "exactly what was pinned at promotion; promote a new result for new content.\n"
            )
            self.announce(body, refs=[naming.result_path(filename)], kind="verification")
            return
        body = (
            f"@{author} your result `{filename}` was re-run on the private eval set: "
            f"**{verdict}**.\n\nreported {field}: {details.get('reported')}, re-run: "
            f"{details.get('rerun')} (relative deviation {details.get('deviation', 0):.4f}, "
            f"tolerance {details.get('tolerance')})"
        )
        if details.get("guard_field"):
            body += (
                f"; guard {details['guard_field']}: {details.get('guard')} "
                f"(cap {details.get('guard_cap')})"
            )
        self.announce(body + ".\n", refs=[naming.result_path(filename)], kind="verification")

    def nudge(self, filename: str, author: str, problem: str) -> None:
        s = self.settings
        body = (
            f"@{author} your result `{filename}` cannot be verified: {problem}. Put your "
            "runnable submission in a folder and name it in the result's frontmatter, e.g. "
            f"`artifacts: hf://buckets/{s.scratch_bucket(author)}/submission/` (or an "
            f"`artifacts/{{slug}}_{author}/` folder made by POST /v1/artifacts:sync, or the "
            "run folder of a POST /v1/jobs:run). If the result already names that folder, "
            "upload the submission there and re-submit it with "
            f"`POST /v1/results/{filename}:reverify` (your Bearer token); otherwise promote "
            "a new result that names it.\n"
        )
        self.announce(body, refs=[naming.result_path(filename)], kind="verification")

    def announce(self, body: str, *, refs: list[str], kind: str) -> str:
        """Post `body` on the board as VERIFIER_AGENT (`via: server`) with inbox fan-out."""
        draft = Draft(
            author=self.settings.verifier_agent,
            via="server",
            client_fm={"type": kind, "refs": refs},
            body=body,
            source_uri=None,
            source_bytes=None,
        )
        posted = publish(
            self.hub, draft, caller_info=CallerInfo(), route="verifier", audit_fields={}
        )
        self.announced += 1
        return str(posted["filename"])

    def _now(self) -> str:
        return self.hub.clock.now().isoformat(timespec="milliseconds").replace("+00:00", "Z")

    def record(
        self, filename: str, ledger: dict[str, Any], summary: Mapping[str, Any] | None
    ) -> str:
        """Decide `filename` from a re-run's `summary` and write the verdict (ledger first)."""
        record = self.hub.read_model.record(naming.result_path(filename), naming.RESULTS)
        reported = score_of(record.frontmatter, self.settings.score_field) if record else None
        if reported is None or summary is None:
            self.save_ledger(
                filename, {**ledger, "state": "undecidable", "problem": "no summary.json or score"}
            )
            return "undecidable"
        verdict, details = verdict_for(
            reported,
            summary,
            score_field=self.settings.score_field,
            tolerance=self.settings.verifier_score_tol,
            guard_field=self.settings.verifier_guard_field,
            guard_cap=self.settings.verifier_guard_cap,
        )
        if verdict is None:
            self.save_ledger(filename, {**ledger, "state": "undecidable", **details})
            return "undecidable"
        ledger = {
            **ledger,
            "state": "decided",
            "verdict": verdict,
            "written": None,
            "announced": False,
            **details,
        }
        self.save_ledger(filename, ledger)
        return self.commit(filename, ledger)
