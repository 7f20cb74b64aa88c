"""The tree is lint-clean, formatted and type-clean: the same commands CI and the README use."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINTED = [name for name in ("src", "tests", "bench") if (ROOT / name).is_dir()]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=240
    )


def test_ruff_check_passes() -> None:
    result = run("ruff", "check", *LINTED)

    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_check_passes() -> None:
    result = run("ruff", "format", "--check", *LINTED)

    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_covers_src_and_tests() -> None:
    # A bare `mypy` checks what [tool.mypy] names; narrowing it would silently skip code.
    with (ROOT / "pyproject.toml").open("rb") as f:
        files = tomllib.load(f)["tool"]["mypy"]["files"]

    assert set(files) >= {"src", "tests"}


def test_mypy_strict_passes_on_src_and_tests() -> None:
    # Files and strictness come from [tool.mypy] in pyproject.toml.
    result = run("mypy")

    assert result.returncode == 0, result.stdout + result.stderr
