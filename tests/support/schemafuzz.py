"""Schemathesis against a served app: every operation of its `/openapi.json` gets a small
budget of generated requests; any server error or answer outside the schema is collected."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import FailureGroup
from schemathesis.core.result import Err
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

# A generous ceiling on each request: the suite runs beside other servers and processes,
# and a slow answer is not what these checks are about (a hang still fails, at 60 s).
REQUEST_TIMEOUT_S = 60

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


def fuzz(
    base_url: str,
    *,
    examples: int = 25,
    headers: dict[str, str] | None = None,
    skip: Iterable[str] = (),
    fixed_query: Mapping[str, Any] | None = None,
) -> list[str]:
    """Run every operation `examples` times; the failures, one line each. `fixed_query`
    pins parameters wherever they appear (a long-poll wait, so no request parks)."""
    schema = schemathesis.openapi.from_url(f"{base_url}/openapi.json", timeout=REQUEST_TIMEOUT_S)
    failures: list[str] = []
    skipped = set(skip)
    for result in schema.get_all_operations():
        if isinstance(result, Err):
            failures.append(f"schema: {result.err()}")
            continue
        operation = result.ok()
        if operation.label in skipped:
            continue

        @given(case=operation.as_strategy())
        @settings(
            max_examples=examples,
            deadline=None,
            database=None,
            derandomize=True,
            phases=[Phase.explicit, Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        def run(case: schemathesis.Case[Any]) -> None:
            for name, value in (fixed_query or {}).items():
                if case.query and name in case.query:
                    case.query[name] = value
            try:
                case.call_and_validate(
                    base_url=base_url, headers=headers, checks=CHECKS, timeout=REQUEST_TIMEOUT_S
                )
            except (Exception, FailureGroup) as exc:  # collect: one report for all operations
                failures.append(f"{case.operation.label}: {type(exc).__name__}: {str(exc)[:400]}")

        run()
    return failures
