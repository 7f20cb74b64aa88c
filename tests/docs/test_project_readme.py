"""The project README, executed: after `agenthub up`, its Quick start step, State Hub's
change feed, and its bucket-sync organizer and agent sections run block by block in the
directory `up` ran in, with nothing set but what the README sets; then `up` is stopped, as
hub-core's section says, and hub-core's capture, import and read steps run (its server in
the background, stopped at the end). The ports `up` prints (8100/8200/8300 by default) are
the one substitution: parallel test runs cannot share fixed ports."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.docs.shell import CODE, Reader, section, shell_blocks

README = Path(__file__).resolve().parents[2] / "README.md"
SECTIONS = [
    "### Change feed (`statehub.inbox-feed.v1`)",
    "### Organizer: the challenge `up` started, and more users",
    "### Organizer: broadcasts and channels",
    "### Agent: register and post with the CLI",
    "### Coordination: claims, directives, landscape events, trust labels",
    "### Agent: channels and staying responsive",
]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Up:
    workdir: Path
    ports: dict[int, int]  # documented default -> the port this run uses
    process: subprocess.Popen[str]

    def stop(self) -> None:
        """Ctrl-C, as the README's "stop `up` first" asks."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            self.process.communicate(timeout=30)

    def localize(self, block: str) -> str:
        for default, port in self.ports.items():
            block = block.replace(f":{default}", f":{port}")
            block = block.replace(f"--port {default}", f"--port {port}")
        return block


@pytest.fixture
def up(tmp_path: Path) -> Iterator[Up]:
    ports = {8100: free_port(), 8200: free_port(), 8300: free_port()}
    process = subprocess.Popen(
        [sys.executable, "-m", "agenthub.cli", "up",
         "--statehub-port", str(ports[8100]), "--hubcore-port", str(ports[8200]),
         "--bucketsync-port", str(ports[8300])],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": CODE},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        while "Ctrl-C" not in (line := process.stdout.readline()):
            assert line or process.poll() is None, process.stderr and process.stderr.read()
        yield Up(tmp_path, ports, process)
    finally:
        Up(tmp_path, ports, process).stop()


def test_the_quick_start_and_the_bucketsync_sections_run_as_written(up: Up) -> None:
    readme = README.read_text()
    reader = Reader(up.workdir, {})
    quick = shell_blocks(section(readme, "## Quick start (Python 3.11+)"))
    statehub_step = next(b for b in quick if "/messages/" in b)

    out = reader.run(up.localize(statehub_step))

    assert '"to_agent":"operator"' in out.replace(" ", "") and "hello" in out

    outputs = [
        reader.run(up.localize(block))
        for heading in SECTIONS
        for block in shell_blocks(section(readme, heading))
    ]

    coordination = next(o for o in outputs if '"not_acked"' in o)
    roster = next(
        answer
        for answer in json_answers(coordination)
        if isinstance(answer, dict) and "not_acked" in answer
    )
    assert roster["acked"] == ["solver-a"] and roster["not_acked"] == ["solver-b"]
    watched = json.loads(outputs[-1].strip().splitlines()[-1])
    assert any("@solver-b" in item["body"] for item in watched["items"])
    assert (up.workdir / "collab_watch.sh").is_file()

    # hub-core's steps 1-3 (the live follower below them is what `up` already ran).
    up.stop()
    hubcore = section(readme, "## hub-core").split("### Following State Hub")[0]
    try:
        pilot = [reader.run(up.localize(block)) for block in shell_blocks(hubcore)]
    finally:
        reader.stop_background()
    # The broadcast State Hub's section sent reaches the pilot agent; every check passes.
    assert any(a.get("subject") == "heads up" for a in json_answers(pilot[-1])), pilot[-1]
    assert " passed, 0 failed" in pilot[-1], pilot[-1]


def json_answers(output: str) -> list[Any]:
    """Every JSON value a block printed, in order (curl prints its answers back to back)."""
    decoder, found, at = json.JSONDecoder(), [], 0
    while (at := output.find("{", at)) != -1:
        try:
            value, end = decoder.raw_decode(output, at)
        except ValueError:
            at += 1
            continue
        found.append(value)
        at = end
    return found
