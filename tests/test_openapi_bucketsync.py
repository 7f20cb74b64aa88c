"""bucket-sync's OpenAPI documents its error body and statuses on every route; 405 names
the allowed methods; schemathesis finds no server error and no answer outside the schema."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from agenthub.bucketsync.app import create_app
from agenthub.bucketsync.identity.local import LocalIdentity
from tests.bucketsync.conftest import ORG, make_settings
from tests.support.schemafuzz import fuzz
from tests.support.servers import live_server


@pytest.fixture
def app_and_token(tmp_path: Path) -> tuple[FastAPI, str]:
    settings = make_settings(tmp_path / "data")
    identity = LocalIdentity(settings.data_dir / "users.json", org=ORG)
    token = identity.add_user("olive", role="admin")
    return create_app(settings, identity=identity), token


@pytest.fixture
def client(app_and_token: tuple[FastAPI, str]) -> Iterator[TestClient]:
    with TestClient(app_and_token[0]) as test_client:
        yield test_client


def test_every_route_documents_the_error_body(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]

    for path, operations in paths.items():
        for method, operation in operations.items():
            responses = operation["responses"]
            assert {"400", "401", "404", "503"} <= set(responses), f"{method} {path}"
            schema = responses["404"]["content"]["application/json"]["schema"]
            assert schema == {"$ref": "#/components/schemas/ErrorBody"}


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [("DELETE", "/v1/messages", "GET, POST"), ("PUT", "/v1/agents/register", "GET, POST")],
)
def test_a_wrong_method_is_a_405_with_allow(
    client: TestClient, method: str, path: str, allow: str
) -> None:
    response = client.request(method, path)

    assert response.status_code == 405
    assert response.headers["allow"] == allow
    assert response.json()["error"]["code"] == "METHOD_NOT_ALLOWED"


def test_schemathesis_finds_no_server_error_and_no_schema_violation(
    app_and_token: tuple[FastAPI, str],
) -> None:
    app, token = app_and_token
    with live_server(app) as base:
        assert fuzz(base, examples=6, headers={"Authorization": f"Bearer {token}"}) == []
