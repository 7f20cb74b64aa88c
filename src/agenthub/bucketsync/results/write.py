"""Promoting results (`{source}` only) and reading them with verification inline."""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any

from agenthub.bucketsync.core import frontmatter, listing, naming
from agenthub.bucketsync.core.hub import CallerInfo, Hub
from agenthub.bucketsync.core.records import render_record, stamped_index
from agenthub.bucketsync.core.sources import claim_source, promote_stamped, read_source
from agenthub.bucketsync.errors import InvalidFrontmatter, NotFound
from agenthub.bucketsync.phases.schedule import require_results_open
from agenthub.bucketsync.results import embargo, lineage, pins, standings
from agenthub.bucketsync.results.baseline import gate_baseline
from agenthub.bucketsync.results.verification import mark_pending, verification_index

log = logging.getLogger(__name__)

RESULT_STATUSES = ("agent-run", "negative")


def result_problems(
    fm: Mapping[str, Any], *, required: list[str], score_field: str
) -> list[dict[str, str]]:
    """Every problem of a result's fields (`field`, `message`, `hint`), in field order:
    required fields present, the score a positive number, status agent-run|negative."""
    problems: list[dict[str, str]] = []

    def problem(name: str, message: str, hint: str) -> None:
        problems.append({"field": name, "message": message, "hint": hint})

    for name in required:
        if name not in fm or fm[name] is None:
            problem(
                name, f"result frontmatter is missing {name!r}", "required: " + ", ".join(required)
            )
    score = fm.get(score_field)  # a missing score is reported above, when it is required
    if score is not None and (
        isinstance(score, bool) or not isinstance(score, int | float) or not math.isfinite(score)
    ):
        problem(
            score_field, f"{score_field!r} must be a number, got {score!r}", f"{score_field}: 0.93"
        )
    elif score is not None and score <= 0:
        problem(
            score_field, f"{score_field!r} must be positive, got {score!r}", f"{score_field}: 0.93"
        )
    status = fm.get("status")
    if status is not None and status not in RESULT_STATUSES:
        problem(
            "status",
            f"status must be one of {', '.join(RESULT_STATUSES)}, got {status!r}",
            "status: agent-run",
        )
    for name in required:
        if name in (score_field, "status"):
            continue
        value = fm.get(name)
        if isinstance(value, str) and not value.strip():
            problem(name, f"{name!r} must not be empty", f"give a value for {name}")
    return problems


def raise_problems(problems: list[dict[str, str]]) -> None:
    if problems:
        first = problems[0]
        raise InvalidFrontmatter(first["message"], hint=first["hint"], problems=problems)


def _submission_problem(
    hub: Hub, author: str, fm: Mapping[str, Any]
) -> tuple[dict[str, Any] | None, list[dict[str, str]]]:
    """The pin of the submission the result names, and the problem when it names one that
    is not there (a typo in `artifacts:` is found now, not by the verifier later). A result
    that names no submission is accepted: the verifier tells its author if it needs one."""
    named = [k for k in pins.SUBMISSION_KEYS if fm.get(k) is not None]
    if not named:
        return None, []
    key = named[0]
    if not isinstance(fm[key], str):
        got = fm[key]
        return None, [
            {
                "field": key,
                "message": f"{key!r} must be a folder, got {got!r}",
                "hint": f"{key}: hf://buckets/{hub.settings.scratch_bucket(author)}/submission/",
            }
        ]
    pin, problem = pins.pin_or_problem(hub, author, fm)
    if pin is not None:
        return pin, []
    sync = f"agenthub buckets sync ./submission hf://buckets/{hub.settings.scratch_bucket(author)}/submission/"
    return None, [
        {
            "field": key,
            "message": f"{key}: {fm[key]} names no submission: {problem}",
            "hint": f"upload the submission first ({sync}), or correct {key}: to a folder "
            "of your scratch bucket that holds it",
        }
    ]


def promote_result(
    hub: Hub, source_uri: str, *, caller_info: CallerInfo, authorization: str | None = None
) -> dict[str, Any]:
    """`POST /v1/results`; `authorization` only matters to a `baseline: true` result."""
    require_results_open(hub.settings, hub.clock.now())  # the phase hook: 409 PHASE_CLOSED
    source = claim_source(hub, source_uri)
    data = read_source(hub, source, source_uri)
    document = frontmatter.parse_strict(data)
    problems = result_problems(
        document.frontmatter,
        required=hub.settings.result_fields,
        score_field=hub.settings.score_field,
    )
    pin, submission = _submission_problem(hub, source.agent_id, document.frontmatter)
    raise_problems(
        problems + submission + lineage.problems(hub, source.agent_id, document.frontmatter)
    )
    fields = gate_baseline(
        hub,
        {k: v for k, v in document.frontmatter.items() if k not in ("agent", "timestamp", "via")},
        source.agent_id,
        authorization,
    )

    def ahead(filename: str) -> list[tuple[str, bytes]]:
        # A self-reference or a cycle shows only once the result has its filename.
        raise_problems(lineage.closing_problems(hub, filename, document.frontmatter))
        # The pin goes in the result's batch, ahead of it: never visible without it.
        return [(pins.pin_path(filename), pins.encode(pin))] if pin is not None else []

    filename, path = promote_stamped(
        hub,
        source,
        data,
        folder=naming.RESULTS,
        fields=fields,
        body=document.body,
        before=ahead,
        route="/v1/results",
        caller_info=caller_info,
        answer=_answer,
    )
    mark_pending(hub, filename)
    standings.after_result(
        hub, filename, built_on=lineage.credited(hub, source.agent_id, document.frontmatter)
    )
    for listener in hub.result_listeners:
        try:
            listener(filename)
        except Exception:  # BS-4.59: promotion never fails because of a listener
            log.exception("result listener failed for %s", filename)
    return _answer(filename, path)


def _answer(filename: str, path: str) -> dict[str, Any]:
    """The 201 body of a result (journaled: a retry after a crash is answered with it)."""
    return {"filename": filename, "via": "bucket", "path": path}


def _render(hub: Hub, record: Any, index: Mapping[str, str]) -> dict[str, Any]:
    shown = render_record(record) | {"verification": index.get(record.filename, "pending")}
    return embargo.record(hub, shown)


def list_results(hub: Hub, params: Mapping[str, str]) -> dict[str, Any]:
    query = listing.parse_query(params, expand_max=hub.settings.expand_max_limit)
    listed = hub.read_model.derived(naming.RESULTS, "stamped", stamped_index(naming.RESULTS))
    index = verification_index(hub)
    if query.verification is not None:
        keys = [k for k in listed.keys if index.get(k, "pending") in query.verification]
        listed = listing.Listed(keys=keys, paths=listed.paths, count=listed.count)
    if query.q is not None and embargo.active(hub):  # withheld text must not match either
        keys = embargo.visible(hub, list(listed.keys))
        listed = listing.Listed(keys=keys, paths=listed.paths, count=listed.count)
    return listing.page(
        listed,
        query,
        load=lambda ps: hub.read_model.records(ps, naming.RESULTS),
        render=lambda _key, record: _render(hub, record, index),
    )


def get_result(hub: Hub, filename: str) -> dict[str, Any]:
    record = None
    if naming.parse_stamped_filename(filename) is not None:
        record = hub.read_model.record(f"{naming.RESULTS}{filename}", naming.RESULTS)
    if record is None:
        raise NotFound(f"no result {filename!r}", hint="list them with GET /v1/results")
    shown = render_record(record) | {
        "verification": verification_index(hub).get(filename, "pending"),
        "pin": pins.read_pin(hub, filename),
    }
    return embargo.record(hub, shown)
