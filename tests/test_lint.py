"""The tree is lint-clean and type-clean: the same commands CI and the README use."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=240
    )


def test_ruff_check_passes() -> None:
    targets = [name for name in ("src", "tests", "bench") if (ROOT / name).is_dir()]

    result = run("ruff", "check", *targets)

    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_strict_passes_on_src() -> None:
    # Files and strictness come from [tool.mypy] in pyproject.toml.
    result = run("mypy")

    assert result.returncode == 0, result.stdout + result.stderr
