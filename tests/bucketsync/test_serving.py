"""A served app's startup heap is left out of the cyclic collector's full passes."""

from __future__ import annotations

import gc
from pathlib import Path

from agenthub.bucketsync.app import create_app, for_serving
from tests.bucketsync.conftest import make_settings


def test_what_startup_built_is_frozen_and_what_came_after_is_not(tmp_path: Path) -> None:
    app = create_app(make_settings(tmp_path / "data"))
    try:
        assert for_serving(app) is app
        later = [app]  # built after: the collector still tracks it
        tracked = gc.get_objects()
        assert not any(o is app for o in tracked)
        assert any(o is later for o in tracked)
    finally:
        gc.unfreeze()  # the rest of this test process collects as before
