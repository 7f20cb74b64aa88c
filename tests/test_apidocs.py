"""`/docs` and `/redoc` on every service work offline: their files come from the service,
not a CDN, `/openapi.json` gains nothing, and in a real browser that may reach nothing but
the service, every operation of the OpenAPI 3.1 document is rendered (issue 28)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from agenthub.apidocs import serve_docs
from agenthub.bucketsync.app import create_app as create_bucketsync
from agenthub.bucketsync.dashboard.app import create_dashboard_app
from agenthub.hubcore.app import create_app as create_hubcore
from agenthub.hubcore.settings import HubCoreSettings
from agenthub.statehub.app import create_app as create_statehub
from agenthub.statehub.settings import StateHubSettings
from tests.bucketsync.conftest import make_settings
from tests.bucketsync.dashboard.browser import chromium
from tests.support.servers import live_server

SERVICES = ["statehub", "hubcore", "bucketsync", "dashboard"]
# The dashboard's own routes are pages, not API: its document has no operations.
DOCUMENTED = ["statehub", "hubcore", "bucketsync"]
METHODS = {"get", "put", "post", "delete", "patch", "head", "options", "trace"}
TIMEOUT_MS = 20_000
REDOC_BADGE = "https://cdn.redoc.ly/redoc/logo-mini.svg"


def build(service: str, tmp_path: Path) -> FastAPI:
    if service == "statehub":
        return create_statehub(StateHubSettings(database_url=f"sqlite:///{tmp_path / 's.db'}"))
    if service == "hubcore":
        return create_hubcore(HubCoreSettings(database_url=f"sqlite:///{tmp_path / 'h.db'}"))
    if service == "bucketsync":
        return create_bucketsync(make_settings(tmp_path / "data"))
    return create_dashboard_app("http://127.0.0.1:9")


def operations(schema: dict[str, Any]) -> set[tuple[str, str]]:
    return {
        (method.upper(), path)
        for path, item in schema["paths"].items()
        for method in item
        if method in METHODS
    }


@pytest.mark.parametrize("service", SERVICES)
def test_docs_load_their_files_from_the_service_itself(service: str, tmp_path: Path) -> None:
    client = TestClient(build(service, tmp_path))

    for page_url, script in (
        ("/docs", "/docs-assets/swagger-ui-bundle.js"),
        ("/redoc", "/docs-assets/redoc.standalone.js"),
    ):
        page = client.get(page_url)
        assert page.status_code == 200
        assert script in page.text
        assert "cdn." not in page.text and "https://" not in page.text
        assert client.get(script).status_code == 200
    assert "SwaggerUIBundle" in client.get("/docs-assets/swagger-ui-bundle.js").text
    assert client.get("/docs-assets/swagger-ui.css").status_code == 200
    schema = client.get("/openapi.json").json()
    assert schema["openapi"].startswith("3.1")
    assert not [p for p in schema["paths"] if p.startswith(("/docs", "/redoc"))]


def test_an_app_with_fastapis_cdn_pages_is_refused() -> None:
    with pytest.raises(ValueError, match="redoc_url=None"):
        serve_docs(FastAPI(docs_url=None))


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as launched:
        yield launched


def offline_page(browser: Any, base: str) -> tuple[Any, list[str]]:
    """A page that may load nothing but `base`: every other request is aborted and noted."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(TIMEOUT_MS)
    elsewhere: list[str] = []

    def only_the_service(route: Any) -> None:
        url = route.request.url
        if url.startswith(base + "/") or url.startswith("data:") or url.startswith("blob:"):
            route.continue_()
        else:
            elsewhere.append(url)
            route.abort()

    context.route("**/*", only_the_service)
    return context.new_page(), elsewhere


@pytest.mark.parametrize("service", DOCUMENTED)
def test_swagger_ui_renders_every_operation_offline(
    service: str, tmp_path: Path, browser: Any
) -> None:
    app = build(service, tmp_path)
    with live_server(app) as base:
        expected = operations(TestClient(app).get("/openapi.json").json())
        page, elsewhere = offline_page(browser, base)
        page.goto(f"{base}/docs")
        page.wait_for_selector(".opblock-summary-path", state="attached")
        rendered = page.eval_on_selector_all(
            ".opblock",
            """blocks => blocks.map(b => [
                    b.querySelector('.opblock-summary-method').textContent.trim(),
                    b.querySelector('.opblock-summary-path').getAttribute('data-path')])""",
        )
        text = page.inner_text("body")
        page.screenshot(path=str(tmp_path / f"{service}-docs.png"), full_page=False)
        page.context.close()

    assert "Unable to render this definition" not in text
    assert {(method, path) for method, path in rendered} == expected
    assert len(rendered) == len(expected)
    assert expected  # every service documents at least one operation
    assert elsewhere == []


@pytest.mark.parametrize("service", DOCUMENTED)
def test_redoc_renders_every_operation_offline(service: str, tmp_path: Path, browser: Any) -> None:
    app = build(service, tmp_path)
    with live_server(app) as base:
        schema = TestClient(app).get("/openapi.json").json()
        expected_ids = [
            op["operationId"]
            for item in schema["paths"].values()
            for method, op in item.items()
            if method in METHODS
        ]
        page, elsewhere = offline_page(browser, base)
        page.goto(f"{base}/redoc")
        page.wait_for_selector("[data-section-id*='operation/']", state="attached")
        sections = page.eval_on_selector_all(
            "[data-section-id*='operation/']", "s => s.map(e => e.getAttribute('data-section-id'))"
        )
        text = page.inner_text("body")
        page.context.close()

    assert "Something went wrong" not in text
    assert {section.rsplit("operation/", 1)[1] for section in sections} == set(expected_ids)
    some_path = sorted(operations(schema))[0][1]
    assert some_path in text
    # ReDoc's "API docs by Redocly" badge is an image it links from its vendor; offline it
    # is a broken image in the sidebar's footer, nothing of the document is missing.
    assert [url for url in elsewhere if url != REDOC_BADGE] == []


def test_the_dashboards_docs_render_its_empty_document_offline(
    tmp_path: Path, browser: Any
) -> None:
    with live_server(build("dashboard", tmp_path)) as base:
        page, elsewhere = offline_page(browser, base)
        page.goto(f"{base}/docs")
        page.wait_for_selector("text=No operations defined in spec!")
        title = page.inner_text(".info .title")
        page.context.close()

    assert title.startswith("agenthub dashboard")
    assert elsewhere == []
