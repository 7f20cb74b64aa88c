"""State Hub's OpenAPI tells a generated client what is valid (slug patterns, page
bounds) and what can go wrong (error statuses with their bodies); schemathesis holds the
served app to it: no server error, no answer outside the schema."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from agenthub.statehub.app import create_app
from agenthub.statehub.settings import StateHubSettings
from agenthub.statehub.slugs import SLUG_PATTERN
from tests.support.schemafuzz import fuzz
from tests.support.servers import live_server


@pytest.fixture
def settings(tmp_path: Path) -> StateHubSettings:
    return StateHubSettings(database_url=f"sqlite:///{tmp_path / 'sh.db'}", instance_label="oa")


@pytest.fixture
def openapi(settings: StateHubSettings) -> Iterator[dict[str, Any]]:
    with TestClient(create_app(settings)) as client:
        yield client.get("/openapi.json").json()


def parameter(openapi: dict[str, Any], path: str, method: str, name: str) -> dict[str, Any]:
    for param in openapi["paths"][path][method]["parameters"]:
        if param["name"] == name:
            schema: dict[str, Any] = param["schema"]
            # An optional parameter: the facts sit beside `anyOf` or in its first branch.
            return {**schema, **schema.get("anyOf", [{}])[0]}
    raise AssertionError(f"{method} {path} has no parameter {name}")


def test_slugs_carry_their_pattern(openapi: dict[str, Any]) -> None:
    create = openapi["components"]["schemas"]["MessageCreate"]["properties"]

    assert create["from_agent"]["pattern"] == SLUG_PATTERN
    assert create["to_agent"]["pattern"].startswith("^(?:\\*|")
    assert parameter(openapi, "/messages/{message_id}/ack", "post", "agent")["pattern"] == (
        SLUG_PATTERN
    )
    assert parameter(openapi, "/messages/", "get", "to_agent")["pattern"] == SLUG_PATTERN


def test_page_sizes_carry_their_bounds(openapi: dict[str, Any]) -> None:
    page_size = parameter(openapi, "/messages/feed/snapshot", "get", "page_size")
    limit = parameter(openapi, "/messages/feed", "get", "limit")

    assert (page_size["minimum"], page_size["maximum"]) == (1, 10_000)
    assert (limit["minimum"], limit["maximum"]) == (1, 5000)


@pytest.mark.parametrize(
    ("path", "method", "statuses"),
    [
        ("/messages/", "post", {"409", "422", "503"}),
        ("/messages/{message_id}", "get", {"404", "422", "503"}),
        ("/messages/{message_id}/reply", "post", {"404", "409", "422"}),
        ("/messages/feed", "get", {"400", "409", "410"}),
    ],
)
def test_domain_errors_are_documented_with_their_body(
    openapi: dict[str, Any], path: str, method: str, statuses: set[str]
) -> None:
    responses = openapi["paths"][path][method]["responses"]

    assert statuses <= set(responses)
    for status in statuses:
        schema = responses[status]["content"]["application/json"]["schema"]
        assert schema == {"$ref": "#/components/schemas/Problem"}


def test_schemathesis_finds_no_server_error_and_no_schema_violation(
    settings: StateHubSettings,
) -> None:
    with live_server(create_app(settings)) as base:
        assert fuzz(base, examples=15, fixed_query={"wait": 0}) == []
