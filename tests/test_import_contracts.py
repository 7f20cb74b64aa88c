"""The import contracts in pyproject.toml ([tool.importlinter]) hold: no sibling import
circles anywhere in agenthub, bucket-sync's layers, adapters picked only by the composition
root, and no vendor SDK in bucket-sync's kernel and slices."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_lint_imports_keeps_every_contract() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    result = subprocess.run(
        # The `lint-imports` entry point, run by this interpreter (importlinter.cli has no
        # __main__ guard, so `-m importlinter.cli` would exit 0 without checking anything).
        [
            sys.executable,
            "-c",
            "import sys; from importlinter.cli import lint_imports_command; "
            "sys.exit(lint_imports_command())",
            "--no-cache",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert " kept, 0 broken." in result.stdout, result.stdout
