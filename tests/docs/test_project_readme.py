"""The project README, executed top to bottom in the directory `up` ran in, with nothing
set but what the README sets: every shell block a user runs against the services, in
order. `up` starts (the Quick start), and is stopped where State Hub's section says "stop
`up` first"; from there on the servers are the README's own (`serve`, `follow`,
`challenge evaluate`), run as `tests/docs/shell.py` says: in the background, probed, and
Ctrl-C'd, or left running where the README says so.

What is substituted, and nothing else:
- the ports: `up` prints 8100/8200/8300 by default and `dashboard serve` takes 8400;
  parallel test runs cannot share fixed ports, so each `:PORT` and `--port PORT` of a
  block is rewritten to this run's free port (`Up.localize`);
- the checkout: the README runs from a clone, so the temporary directory standing in for
  it links the repository's `examples/`;
- "inside Claude Code": the traces section needs an agent session, so the test writes a
  small Claude Code transcript under `$HOME/.claude/` and sets `CLAUDE_CODE_SESSION_ID`,
  as the harness would.

Not run: the Quick start's `pip install` (the test runs this checkout) and the suite and
benchmark commands (they are the suite and the benchmarks)."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.docs.shell import CODE, Reader, Server, section, shell_blocks

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
SESSION = "5b1c7a52-readme-session"
HEALTH = {
    "statehub serve": "/state/health",
    "hubcore serve": "/healthz",
    "bucketsync serve": "/v1/healthz",
    "dashboard serve": "/dashboard/config.json",
}


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
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    ports = {8100: free_port(), 8200: free_port(), 8300: free_port(), 8400: free_port()}
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


def ready(server: Server) -> bool:
    """A `serve` answers its health route; a follower or evaluator has said it started."""
    for kind, path in HEALTH.items():
        if f"agenthub {kind}" in server.command:
            port = re.search(r"--port (\d+)", server.command)
            assert port, f"a README serve without --port cannot run beside others: {server}"
            try:
                url = f"http://127.0.0.1:{port.group(1)}{path}"
                return httpx.get(url, timeout=5).status_code == 200
            except httpx.TransportError:
                return False
    if "hubcore follow" in server.command:
        return "following " in server.output()
    return "pending examined" in server.output()  # challenge evaluate: one pass done


@dataclass
class Session:
    """The README's reader: runs blocks in order, keeps the servers they leave running."""

    up: Up
    reader: Reader
    running: list[Server]

    def blocks(self, text: str) -> list[str]:
        outputs = []
        for block in shell_blocks(text):
            output, left = self.reader.run_block(self.up.localize(block), ready)
            outputs.append(output)
            self.running += left
        return outputs

    def stop(self, kind: str) -> str:
        """Ctrl-C the server of `kind` left running, where the README says to stop it."""
        [server] = [s for s in self.running if f"agenthub {kind}" in s.command]
        self.running.remove(server)
        return server.interrupt()

    def close(self) -> None:
        self.reader.stop_background()
        for server in self.running:
            server.process.kill()


@pytest.fixture
def session(up: Up) -> Iterator[Session]:
    reading = Session(up, Reader(up.workdir, {}), [])
    try:
        yield reading
    finally:
        reading.close()


# The whole README: ~40 CLI calls, five servers, a benchmark job and its re-run. About a
# minute on an idle machine; several on a machine shared by a full test run.
@pytest.mark.timeout(600)
def test_the_readme_runs_top_to_bottom(session: Session) -> None:
    readme, up = README.read_text(), session.up
    part = {heading: section(readme, heading) for heading in headings(readme)}

    # Quick start: `up` runs (the fixture); the first message goes through State Hub.
    [quick] = [b for b in shell_blocks(part["## Quick start (Python 3.11+)"]) if "8100" in b]
    out = session.reader.run(up.localize(quick))
    assert '"to_agent":"operator"' in out.replace(" ", "") and "hello" in out

    # State Hub on its own ("stop `up` first"), then its change feed.
    up.stop()
    [migrated] = session.blocks(part["## State Hub"].split("### Change feed")[0])
    assert "database at revision" in migrated
    feed = session.blocks(part["### Change feed (`statehub.inbox-feed.v1`)"])
    assert any("cursor" in answer for answer in json_answers(feed[0]))

    # hub-core: capture, import and the pilot's reads (its server left in the background).
    pilot = session.blocks(part["## hub-core"].split("### Following")[0])
    assert any(a.get("subject") == "heads up" for a in json_answers(pilot[-1])), pilot[-1]
    assert " passed, 0 failed" in pilot[-1], pilot[-1]
    # "Stop the pilot's server first", then follow: serve, follow, follow --once.
    session.reader.stop_background()
    [follow] = session.blocks(part["### Following State Hub (live replication)"])
    assert "stopped" in follow and "caught up at" in follow, follow
    assert "Context impl" not in follow  # Alembic's INFO lines stay out of the log

    # Run a challenge: init (a re-run over `up`'s), serve (left running), evaluate.
    init, evaluate = session.blocks(part["## Run a challenge"])
    assert "nothing to do" in init and "pending examined" in evaluate, init + evaluate
    # bucket-sync's organizer and agent sections, against that serve.
    for heading in [
        "### Organizer: the challenge `up` started, and more users",
        "### Organizer: broadcasts and channels",
        "### Humans: the dashboard",
        "### Agent: register and post with the CLI",
    ]:
        session.blocks(part[heading])

    # The scoring loop restarts bucket-sync with jobs ("stop the bucket-sync on 8300").
    session.stop("bucketsync serve")
    [loop] = session.blocks(part["### Example challenge: the scoring loop end to end"])
    *_, board, inbox = json_answers(loop)
    assert [(r["agent"], r["verification"]) for r in board["rows"]] == [("solver-a", "valid")]
    assert any(i["agent"] == "verifier" and "**valid**" in i["body"] for i in inbox["items"])
    # The re-run's log is where the dashboard shows it to an organizer (and to nobody else).
    tokens = json.loads((up.workdir / "var" / "bucketsync-tokens.json").read_text())
    url = f"http://127.0.0.1:{up.ports[8300]}/dashboard/moderation/job-log/"
    logged = url + board["rows"][0]["filename"]
    for user, status in (("organizer", 200), ("alice", 403)):
        auth = {"Authorization": f"Bearer {tokens[user]}"}
        assert httpx.get(logged, headers=auth, timeout=30).status_code == status

    # Traces, run "inside Claude Code".
    claude_code_session(up.workdir)
    session.reader.env["CLAUDE_CODE_SESSION_ID"] = SESSION
    [traces] = session.blocks(part["### Agent: share a session's usage (traces & stats)"])
    assert SESSION in traces and '"tool_calls"' in traces, traces

    coordination = session.blocks(
        part["### Coordination: claims, directives, landscape events, trust labels"]
    )
    roster = next(
        answer
        for answer in json_answers("".join(coordination))
        if isinstance(answer, dict) and "not_acked" in answer
    )
    assert roster["acked"] == ["solver-a"] and roster["not_acked"] == ["solver-b"]
    channels = session.blocks(part["### Agent: channels and staying responsive"])
    watched = json.loads(channels[-1].strip().splitlines()[-1])
    assert any("@solver-b" in item["body"] for item in watched["items"])
    assert (up.workdir / "collab_watch.sh").is_file()


def headings(markdown: str) -> list[str]:
    """Every heading line outside fenced blocks."""
    found, fenced = [], False
    for line in markdown.splitlines():
        fenced ^= line.startswith("```")
        if not fenced and re.match(r"#+ ", line):
            found.append(line)
    return found


def claude_code_session(home: Path) -> None:
    """A Claude Code transcript where the harness keeps it: two responses, one tool call."""
    project = home / ".claude" / "projects" / "-work-readme"
    project.mkdir(parents=True)
    lines = [
        {
            "type": "assistant",
            "sessionId": SESSION,
            "requestId": f"req_{n}",
            "timestamp": f"2026-01-01T00:00:0{n}Z",
            "message": {
                "id": f"msg_{n}",
                "model": "claude-sonnet-4-5",
                "usage": {"input_tokens": 10 * n, "output_tokens": 5},
                "content": [{"type": "tool_use", "id": f"tool_{n}", "name": "Bash"}][: n - 1],
            },
        }
        for n in (1, 2)
    ]
    (project / f"{SESSION}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


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
