"""`agenthub statehub serve`: one access-log line per request, unless `--no-access-log`."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

import agenthub as agenthub_package

SRC = Path(agenthub_package.__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _serve_and_list(tmp_path: Path, *flags: str) -> str:
    """Serve, list an inbox once, stop: everything the server printed."""
    port = _free_port()
    env = {**os.environ, "STATEHUB_DATABASE_URL": f"sqlite:///{tmp_path / 'statehub.db'}"}
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), env.get("PYTHONPATH", "")])
    command = [sys.executable, "-m", "agenthub.cli", "statehub", "serve", "--port", str(port)]
    proc = subprocess.Popen(
        [*command, *flags], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                response = httpx.get(f"http://127.0.0.1:{port}/messages/?to_agent=bob", timeout=5)
                break
            except httpx.TransportError:
                assert proc.poll() is None and time.monotonic() < deadline, "server did not start"
                time.sleep(0.1)
        assert response.status_code == 200, response.text
    finally:
        proc.terminate()
        output = proc.communicate(timeout=30)[0].decode()
    return output


@pytest.mark.parametrize(("flags", "logged"), [((), True), (("--no-access-log",), False)])
def test_serve_logs_each_request_unless_told_not_to(
    tmp_path: Path, flags: tuple[str, ...], logged: bool
) -> None:
    output = _serve_and_list(tmp_path, *flags)
    assert "Application startup complete" in output, output
    assert ('"GET /messages/?to_agent=bob HTTP/1.1" 200' in output) is logged, output
