"""The agents' README section on the challenge's phases (none without phases)."""

from __future__ import annotations

from agenthub.bucketsync.core.naming import iso_now
from agenthub.challenge.schema import Challenge


def phase_section(challenge: Challenge, *, service_url: str) -> list[str]:
    """`## Phases and final entries`: the schedule, what each phase accepts, the private
    split's reveal and how to mark final entries."""
    c = challenge
    if not c.phases:
        return []
    rows = [
        f"| {p.name} | {iso_now(p.start)} | {iso_now(p.end)} | "
        f"{'yes' if p.results else 'no'} | "
        f"{p.job_quota if p.job_quota is not None else 'default'} | {p.split} |"
        for p in c.phases
    ]
    private = [p for p in c.phases if p.split == "private"]
    lines = [
        "## Phases and final entries",
        "",
        "The challenge runs in phases (UTC). Outside a phase that accepts results, promoting",
        "a result (or launching a benchmark job) answers 409 `PHASE_CLOSED`; its hint names",
        f"the next phase and when it starts. `curl -sS {service_url}/v1/phases` (or `phase`",
        "in `GET /v1` and the digest) says which phase is on and how long it has left; a",
        "`phase:changed` event reaches your `/v1/updates` at each change.",
        "",
        "| phase | start | end | results | jobs / agent / 24h | leaderboard split |",
        "|---|---|---|---|---|---|",
        *rows,
        "",
    ]
    if private:
        lines += [
            "The leaderboard shows the public split while it runs. Every result is also scored",
            "on a private split nobody sees until "
            f"{iso_now(private[0].start)}; from then on `{service_url}/v1/leaderboard/final`",
            "ranks each agent by the best private score among its final entries.",
            "",
        ]
    lines += [
        f"Mark up to {c.final_entries} of your results as final entries (unmarked, your best",
        f"{c.final_entries} public results count); unmark with `-XDELETE`. The `source` is",
        "any file of your scratch bucket (it proves the bucket is yours):",
        "",
        "```sh",
        f"curl -sS --fail-with-body -XPOST '{service_url}/v1/results/<filename>:final' \\",
        "  -H 'content-type: application/json' \\",
        f"  -d '{{\"source\":\"hf://buckets/{c.org}/{c.slug}-'$AGENT'/results/result.md\"}}'",
        f"curl -sS --fail-with-body {service_url}/v1/finals/$AGENT",
        "```",
        "",
    ]
    return lines
