"""`/docs` on every service works offline: Swagger UI's files come from the service, not
a CDN, and `/openapi.json` gains nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from agenthub.bucketsync.app import create_app as create_bucketsync
from agenthub.bucketsync.dashboard.app import create_dashboard_app
from agenthub.hubcore.app import create_app as create_hubcore
from agenthub.hubcore.settings import HubCoreSettings
from agenthub.statehub.app import create_app as create_statehub
from agenthub.statehub.settings import StateHubSettings
from tests.bucketsync.conftest import make_settings

SERVICES = ["statehub", "hubcore", "bucketsync", "dashboard"]


def build(service: str, tmp_path: Path) -> FastAPI:
    if service == "statehub":
        return create_statehub(StateHubSettings(database_url=f"sqlite:///{tmp_path / 's.db'}"))
    if service == "hubcore":
        return create_hubcore(HubCoreSettings(database_url=f"sqlite:///{tmp_path / 'h.db'}"))
    if service == "bucketsync":
        return create_bucketsync(make_settings(tmp_path / "data"))
    return create_dashboard_app("http://127.0.0.1:9")


@pytest.mark.parametrize("service", SERVICES)
def test_docs_load_swagger_ui_from_the_service_itself(service: str, tmp_path: Path) -> None:
    client = TestClient(build(service, tmp_path))

    page = client.get("/docs")

    assert page.status_code == 200
    assert "/docs-assets/swagger-ui-bundle.js" in page.text
    assert "cdn." not in page.text and "https://" not in page.text
    script = client.get("/docs-assets/swagger-ui-bundle.js")
    assert script.status_code == 200 and "SwaggerUIBundle" in script.text
    assert client.get("/docs-assets/swagger-ui.css").status_code == 200
    paths = client.get("/openapi.json").json()["paths"]
    assert not [p for p in paths if p.startswith("/docs")]
