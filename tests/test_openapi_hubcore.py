"""hub-core's OpenAPI documents its errors and the slug pattern; every error is JSON in
its shape; 405 names the allowed methods; schemathesis finds no server error and no
answer outside the schema."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from agenthub.hubcore.app import create_app
from agenthub.hubcore.settings import HubCoreSettings
from agenthub.statehub.slugs import SLUG_PATTERN
from tests.support.schemafuzz import fuzz
from tests.support.servers import live_server

TOKEN = "openapi-operator-token"
INBOX = "/ports/projections/statehub-inbox"


@pytest.fixture
def settings(tmp_path: Path) -> HubCoreSettings:
    return HubCoreSettings(
        database_url=f"sqlite:///{tmp_path / 'hc.db'}",
        inbox_reads=True,
        operator_token=TOKEN,
        inbox_agent="state-hub",
    )


@pytest.fixture
def client(settings: HubCoreSettings) -> Iterator[TestClient]:
    with TestClient(create_app(settings)) as test_client:
        yield test_client


def test_the_inbox_read_documents_its_errors_and_the_slug_pattern(client: TestClient) -> None:
    operation = client.get("/openapi.json").json()["paths"][INBOX]["get"]
    params = {p["name"]: p["schema"] for p in operation["parameters"]}

    assert {"401", "403", "404", "422", "503"} <= set(operation["responses"])
    assert params["to_agent"]["pattern"] == SLUG_PATTERN


@pytest.mark.parametrize(
    ("method", "path", "allow"), [("DELETE", "/healthz", "GET"), ("PUT", INBOX, "GET")]
)
def test_a_wrong_method_is_a_json_405_with_allow(
    client: TestClient, method: str, path: str, allow: str
) -> None:
    response = client.request(method, path)

    assert response.status_code == 405
    assert response.headers["allow"] == allow
    assert response.json()["code"] == "method_not_allowed"


@pytest.mark.parametrize("value", ["NaN", "1e999", "-Infinity"])
def test_unsendable_query_input_is_a_json_422(client: TestClient, value: str) -> None:
    response = client.get(
        INBOX,
        params={"to_agent": "state-hub", "limit": value},
        headers={"Authorization": f"Bearer {TOKEN}"},
    )

    assert response.status_code == 422
    body: dict[str, Any] = response.json()
    assert body["code"] == "invalid_request"


def test_an_unknown_route_is_a_json_404(client: TestClient) -> None:
    response = client.get("/nowhere")

    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


def test_schemathesis_finds_no_server_error_and_no_schema_violation(
    settings: HubCoreSettings,
) -> None:
    with live_server(create_app(settings)) as base:
        assert fuzz(base, examples=15, headers={"Authorization": f"Bearer {TOKEN}"}) == []
