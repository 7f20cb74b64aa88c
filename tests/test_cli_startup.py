"""`agenthub buckets …`, which an agent runs over and over, imports only what it needs:
the root command builds each service's commands when the command line names them."""

from __future__ import annotations

import subprocess
import sys

from tests.docs.shell import CODE

PROBE = """
import sys
from typer.testing import CliRunner
from agenthub.cli import app
result = CliRunner().invoke(app, {args!r})
assert result.exit_code == 0, result.output
print(" ".join(sorted(m for m in sys.modules if m.startswith("agenthub."))))
"""


def loaded(*args: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(args=list(args))],
        capture_output=True, text=True, check=True, env={"PYTHONPATH": CODE},
    )  # fmt: skip
    return set(done.stdout.split())


def test_buckets_loads_neither_hubcore_nor_the_deploy_code() -> None:
    modules = loaded("buckets", "--help")
    assert "agenthub.bucketsync.agentside.buckets" in modules
    assert not {m for m in modules if m.startswith(("agenthub.hubcore", "agenthub.challenge"))}


def test_the_root_help_still_lists_every_service() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "agenthub.cli", "--help"],
        capture_output=True, text=True, check=True, env={"PYTHONPATH": CODE, "COLUMNS": "100"},
    )  # fmt: skip
    commands = [line.split()[0] for line in done.stdout.split("Commands:")[1].splitlines()[1:]]
    assert commands == [
        "up", "statehub", "hubcore", "bucketsync", "buckets", "challenge", "dashboard",
    ]  # fmt: skip
