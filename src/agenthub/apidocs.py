"""`/docs` (Swagger UI) and `/redoc` (ReDoc) served from the service itself, so both work
offline (FastAPI's defaults load them from a CDN). Their files ship in the
`fastapi-offline` package: Swagger UI 5 and ReDoc 2, both of which read the OpenAPI 3.1
documents FastAPI writes (Swagger UI 4 cannot). `/openapi.json` is untouched; nothing here
enters the schema."""

from __future__ import annotations

from importlib.resources import files

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS = "/docs-assets"
STATIC_DIR = str(files("fastapi_offline") / "static")


def serve_docs(app: FastAPI) -> None:
    """Add `/docs`, `/redoc` and their assets to an app built with `docs_url=None` and
    `redoc_url=None` (FastAPI's own pages would load from a CDN)."""
    if app.docs_url is not None or app.redoc_url is not None:
        raise ValueError("build the app with docs_url=None and redoc_url=None")
    app.mount(ASSETS, StaticFiles(directory=STATIC_DIR), name="docs-assets")
    openapi_url = app.openapi_url or "/openapi.json"

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=openapi_url,
            title=f"{app.title} - API",
            swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS}/favicon.png",
        )

    @app.get("/redoc", include_in_schema=False)
    async def redoc() -> HTMLResponse:
        return get_redoc_html(
            openapi_url=openapi_url,
            title=f"{app.title} - API",
            redoc_js_url=f"{ASSETS}/redoc.standalone.js",
            redoc_favicon_url=f"{ASSETS}/favicon.png",
            with_google_fonts=False,
        )
