"""Run a document's fenced shell blocks in order, as a reader pasting them would: one
block at a time, with what earlier blocks exported carried over, `set -e`, and only the
environment the document tells the reader to set.

A command that runs until Ctrl-C (`LONG_RUNNING`: a `serve`, `hubcore follow`,
`challenge evaluate`, without `&` or `--once`) would hold the reader's terminal: it is
started in the background and probed until it is ready, then gets Ctrl-C (SIGINT) before
the block's next command, or at the end of its block, and must exit 0. One whose comment
says "leave it running" stays up for the sections after it (a reader's other terminal)
until the test stops it where the document says so."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import agenthub

FENCE = re.compile(r"^```(?:sh|bash|shell)\n(.*?)^```", re.M | re.S)
LONG_RUNNING = re.compile(
    r"\bagenthub (?:(?:statehub|hubcore|bucketsync|dashboard) serve|hubcore follow"
    r"|challenge evaluate)\b"
)
LEAVE_RUNNING = "leave it running"
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


def logical_lines(block: str) -> list[str]:
    """The block's lines, a line ending in a backslash joined with the next."""
    lines: list[str] = []
    pending = ""
    for line in block.splitlines():
        pending += line + "\n"
        if not line.endswith("\\"):
            lines.append(pending)
            pending = ""
    return lines + ([pending] if pending else [])


def is_long_running(line: str) -> bool:
    code = line.split(" #")[0].strip()
    return bool(LONG_RUNNING.search(code)) and "--once" not in code and not code.endswith("&")


def pieces(block: str) -> list[tuple[str, bool]]:
    """The block cut around its long-running commands (each a piece of its own), each
    piece with whether it is one."""
    found: list[tuple[str, bool]] = []
    script = ""
    for line in logical_lines(block):
        if is_long_running(line):
            found += [(script, False)] if script.strip() else []
            found.append((line, True))
            script = ""
        else:
            script += line
    return found + ([(script, False)] if script.strip() else [])


@dataclass
class Server:
    """A long-running command started in the background."""

    command: str
    process: subprocess.Popen[bytes]
    out: IO[bytes]

    def output(self) -> str:
        self.out.seek(0)
        return self.out.read().decode(errors="replace")

    def interrupt(self, timeout: float = 30) -> str:
        """Ctrl-C; the command must stop cleanly (exit 0)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        try:
            code = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise AssertionError(f"Ctrl-C did not stop:\n{self.command}\n{self.output()}") from None
        output = self.output()
        self.out.close()
        assert code == 0, f"exit {code} after Ctrl-C:\n{self.command}\n{output}"
        return output


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

    def prelude(self) -> list[str]:
        # Shell variables (ALICE=$(…)) and exports both outlive a block, as in a terminal.
        kept, exported = self.workdir / ".variables.sh", self.workdir / ".exported.sh"
        return [f"[ -f {kept} ] && . {kept}", f"[ -f {exported} ] && . {exported}", "set -e"]

    def run_block(
        self, block: str, ready: Callable[[Server], bool], *, timeout: float = 120
    ) -> tuple[str, list[Server]]:
        """Run one block, its long-running commands as the module docstring says; return
        what it printed and the servers it left running."""
        printed: list[str] = []
        running: list[Server] = []
        for piece, long_running in pieces(block):
            foreground = [s for s in running if LEAVE_RUNNING not in s.command]
            for server in foreground:  # the reader needs the prompt back: Ctrl-C
                printed.append(server.interrupt())
                running.remove(server)
            if long_running:
                running.append(self.start(piece, ready, timeout=timeout))
            else:
                printed.append(self.run(piece, timeout=timeout))
        for server in [s for s in running if LEAVE_RUNNING not in s.command]:
            printed.append(server.interrupt())
            running.remove(server)
        return "".join(printed), running

    def start(
        self, command: str, ready: Callable[[Server], bool], *, timeout: float = 120
    ) -> Server:
        """Start a long-running command in the background; return once `ready` says so."""
        # `env` runs a command with its `VAR=value` prefix, so `exec` leaves the command
        # itself as the process that gets Ctrl-C.
        script = "\n".join([*self.prelude(), f"exec env {command}"])
        out = tempfile.TemporaryFile()  # noqa: SIM115 (closed by Server.interrupt)
        process = subprocess.Popen(
            ["sh", "-c", script],
            cwd=self.workdir,
            env=self.base_env(),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        server = Server(command, process, out)
        deadline = time.monotonic() + timeout
        while not ready(server):
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise AssertionError(f"never ready:\n{command}\n{server.output()}")
            time.sleep(0.2)
        return server

    def run(self, block: str, *, timeout: float = 120) -> str:
        """Run one block; raise with its output when any command in it fails."""
        kept, exported = self.workdir / ".variables.sh", self.workdir / ".exported.sh"
        script = "\n".join(
            [
                *self.prelude(),
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
        # Wait until they are gone: a server still answering on its port would make the
        # next block's server on that port look ready before it has even started.
        for session in self.sessions:
            deadline = time.monotonic() + 30
            while group_alive(session):
                if time.monotonic() > deadline:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(session, signal.SIGKILL)
                time.sleep(0.05)
        self.sessions.clear()


def group_alive(group: int) -> bool:
    """Whether a process of the group is still running (a zombie counts as gone)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            # pid (comm) state ppid pgrp ...: comm may hold spaces, so split after ')'.
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == group and fields[0] != "Z":
                return True
    return False
