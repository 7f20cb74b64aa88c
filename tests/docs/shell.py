"""Run a document's fenced shell blocks in order, as a reader pasting them would: one
block at a time, with what earlier blocks exported carried over, `set -e`, and only the
environment the document tells the reader to set."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass, field
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
    # Each block runs in a session of its own: what it left running (`serve … &`) is
    # stopped with `stop_background`, as a reader closing the terminal would.
    sessions: list[int] = field(default_factory=list)

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
        # Files, not pipes: a server a block left in the background keeps them open.
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            process = subprocess.Popen(
                ["sh", "-c", script],
                cwd=self.workdir,
                env=self.base_env(),
                stdout=out,
                stderr=err,
                start_new_session=True,
            )
            self.sessions.append(process.pid)
            try:
                code = process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.stop_background()
                raise
            out.seek(0)
            err.seek(0)
            stdout, stderr = out.read().decode(), err.read().decode()
        if code != 0:
            raise AssertionError(
                f"a documented command failed (exit {code}):\n{block}\n"
                f"--- stdout\n{stdout}\n--- stderr\n{stderr}"
            )
        return stdout

    def stop_background(self) -> None:
        """Stop whatever the blocks left running (each block's process group)."""
        for session in self.sessions:
            with contextlib.suppress(ProcessLookupError):  # it ended by itself
                os.killpg(session, signal.SIGTERM)
        self.sessions.clear()
