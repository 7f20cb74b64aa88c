"""A service started from a command line, the way a container starts it: `argv` in a
subprocess with exactly the environment given, its output in a log file, stopped with
SIGTERM then SIGKILL (its whole process group: uvicorn's workers too)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def running(
    argv: Sequence[str], env: Mapping[str, str], *, cwd: Path, log: Path
) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as out:
        process = subprocess.Popen(
            list(argv),
            env=dict(env),
            cwd=cwd,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            yield process
        finally:
            stop(process)


def stop(process: subprocess.Popen[bytes], grace_s: float = 10.0) -> None:
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(5)


def wait_healthy(
    url: str, process: subprocess.Popen[bytes], log: Path, *, timeout_s: float = 90.0
) -> httpx.Response:
    """Poll `url` until it answers 200; fail with the service's log if it exits or never
    does."""
    deadline = time.monotonic() + timeout_s
    last = "no answer"
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"exited {process.returncode}:\n{log.read_text()[-3000:]}")
        try:
            response = httpx.get(url, timeout=5)
            if response.status_code == 200:
                return response
            last = f"{response.status_code} {response.text[:300]}"
        except httpx.HTTPError as exc:
            last = repr(exc)
        time.sleep(0.3)
    raise AssertionError(f"{url} not healthy in {timeout_s} s ({last}):\n{log.read_text()[-3000:]}")
