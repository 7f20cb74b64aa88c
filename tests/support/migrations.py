"""Loading a migration file as a module, to compare its frozen DDL with the models'."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType


def load_migration(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"migration_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
