"""`serve --workers N`: the uvicorn factory each worker builds its app with, and the
supervisor's preloading of what every worker imports before it forks them."""

from __future__ import annotations

import importlib
import logging

from fastapi import FastAPI

from agenthub.bucketsync.app import create_app
from agenthub.bucketsync.settings import BucketSyncSettings, load_settings
from agenthub.heap import freeze_startup_objects

log = logging.getLogger(__name__)


def app_from_environment() -> FastAPI:
    """The uvicorn factory for `serve --workers N` (each worker reads the environment,
    and freezes what it built before serving, as `serve` does for one worker). A worker
    that cannot build its app exits with uvicorn's start-up failure code, so the
    supervisor stops rather than respawning it forever."""
    from uvicorn.config import STARTUP_FAILURE

    try:
        app = create_app(load_settings())
    except Exception:
        log.exception("bucket-sync worker could not build its app")
        raise SystemExit(STARTUP_FAILURE) from None
    freeze_startup_objects()
    return app


def worker_modules(settings: BucketSyncSettings) -> list[str]:
    """The modules a worker of `settings` imports where its adapters are chosen
    (app.adapters, app.hub)."""
    names = ["agenthub.bucketsync.runners.local"]
    if settings.bus_url:
        names += [
            "agenthub.bucketsync.scaleout.bus",
            "agenthub.bucketsync.scaleout.presence",
            "agenthub.bucketsync.scaleout.state",
            "agenthub.bucketsync.scaleout.signins",
            "limits.storage",
        ]
    if settings.storage == "s3":
        names += ["agenthub.bucketsync.storage.s3", "agenthub.bucketsync.identity.stored"]
    if settings.storage == "hf":
        names += [
            "agenthub.bucketsync.storage.hf",
            "agenthub.bucketsync.storage.governor",
            "agenthub.bucketsync.storage.hffeed",
            "agenthub.bucketsync.identity.hf",
        ]
    if settings.runner_kind == "hf":
        names.append("agenthub.bucketsync.runners.hf")
    return names


def preload_workers(settings: BucketSyncSettings) -> None:
    """In `serve --workers N`'s supervisor, before it forks its workers: import what each
    worker would (this module, the app package with every route, the adapters of
    `settings`) and freeze it, so a worker, started or restarted, begins with it loaded
    and only builds its app. Builds nothing: no client, connection or thread exists to be
    copied into a worker."""
    for name in worker_modules(settings):
        importlib.import_module(name)
    freeze_startup_objects()
