"""Run a document's fenced shell blocks in order, as a reader pasting them would: one
block at a time, with what earlier blocks exported carried over, `set -e`, and only the
environment the document tells the reader to set."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import agenthub

FENCE = re.compile(r"^```(?:sh|bash|shell)\n(.*?)^```", re.M | re.S)
# The code under test: `agenthub` on PATH runs this checkout, wherever the shell is.
CODE = str(Path(agenthub.__file__).resolve().parents[1])


# Variables the shell sets itself; restoring them would confuse the next block.
SHELL_OWN = "^(PPID|IFS|OPTIND|PS1|PS2|PS4|PWD|OLDPWD|LINENO|HOME|PATH|_)="


def shell_blocks(markdown: str) -> list[str]:
    """The fenced sh/bash/shell blocks of a markdown document, in order."""
    return [match.group(1) for match in FENCE.finditer(markdown)]


def section(markdown: str, heading: str) -> str:
    """The text under `heading` (a whole `#…` line) up to the next heading of its level
    or above (a `#` comment inside a fenced block is not a heading)."""
    lines = markdown.splitlines()
    start = lines.index(heading)
    level = len(heading) - len(heading.lstrip("#"))
    fenced = False
    end = len(lines)
    for i in range(start + 1, len(lines)):
        if lines[i].startswith("```"):
            fenced = not fenced
        depth = len(lines[i]) - len(lines[i].lstrip("#"))
        if not fenced and 0 < depth <= level and lines[i][depth : depth + 1] == " ":
            end = i
            break
    return "\n".join(lines[start:end]) + "\n"


@dataclass
class Reader:
    """A shell session in `workdir`; `env` is what the document told the reader to set."""

    workdir: Path
    env: dict[str, str]

    def base_env(self) -> dict[str, str]:
        agenthub_bin = shutil.which("agenthub")
        assert agenthub_bin is not None, "the agenthub command must be installed"
        path = os.pathsep.join(
            [str(Path(agenthub_bin).parent), "/usr/local/bin", "/usr/bin", "/bin"]
        )
        return {"PATH": path, "HOME": str(self.workdir), "PYTHONPATH": CODE, **self.env}

    def run(self, block: str, *, timeout: float = 60) -> str:
        """Run one block; raise with its output when any command in it fails."""
        # Shell variables (ALICE=$(…)) and exports both outlive a block, as in a terminal.
        kept = self.workdir / ".variables.sh"
        exported = self.workdir / ".exported.sh"
        script = "\n".join(
            [
                f"[ -f {kept} ] && . {kept}",
                f"[ -f {exported} ] && . {exported}",
                "set -e",
                block,
                f"set | grep -E '^[A-Za-z_][A-Za-z0-9_]*=' | grep -vE '{SHELL_OWN}' > {kept}",
                f"export -p > {exported}",
                "",
            ]
        )
        done = subprocess.run(
            ["sh", "-c", script],
            cwd=self.workdir,
            env=self.base_env(),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if done.returncode != 0:
            raise AssertionError(
                f"a documented command failed (exit {done.returncode}):\n{block}\n"
                f"--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
            )
        return done.stdout
