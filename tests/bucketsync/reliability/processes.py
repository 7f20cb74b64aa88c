"""Real processes for kill tests and the restart figure: `agenthub bucketsync serve` in its
own process group (so `kill -9` reaches the supervisor and every worker at once), and CPU
burners that make a load average."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import subprocess
import sys
import time
import uuid
from multiprocessing.process import BaseProcess
from pathlib import Path
from types import TracebackType

import httpx
from bench._servers import register_agent

from agenthub.bucketsync.identity.local import LocalIdentity
from tests.bucketsync.test_multiworker import SRC, free_port


class ServeProcess:
    """`agenthub bucketsync serve` on one port across restarts, killable as a whole."""

    def __init__(
        self, env: dict[str, str], log: Path, *, workers: int = 1, extra: list[str] | None = None
    ) -> None:
        self.env = {**env, "PYTHONPATH": SRC + os.pathsep + env.get("PYTHONPATH", "")}
        self.log = log
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.argv = [
            sys.executable,
            "-m",
            "agenthub.cli",
            "bucketsync",
            "serve",
            "--port",
            str(self.port),
            "--workers",
            str(workers),
            *(extra or []),
        ]
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                self.argv,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def wait_healthy(self, timeout_s: float) -> float:
        """When (monotonic) `/v1/healthz` first answered 200."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                if httpx.get(f"{self.base}/v1/healthz", timeout=2).status_code == 200:
                    return time.monotonic()
            except httpx.HTTPError:
                pass
            assert self.process is not None
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"server did not answer healthz:\n{self.log.read_text()}")
            time.sleep(0.05)

    def wait_workers(self, count: int, timeout_s: float) -> None:
        """Until `count` workers have finished their start-up (as uvicorn logs it)."""
        deadline = time.monotonic() + timeout_s
        while self.log.read_text().count("Application startup complete.") < count:
            assert time.monotonic() < deadline, f"workers not up:\n{self.log.read_text()}"
            time.sleep(0.05)

    def post(self, agent: str, body: str, key: str, timeout_s: float = 30) -> httpx.Response:
        return httpx.post(
            f"{self.base}/v1/messages",
            json={"agent_id": agent, "body": body},
            headers={"Idempotency-Key": key},
            timeout=timeout_s,
        )

    def wait_written(self, agent: str, body: str, timeout_s: float) -> float:
        """When (monotonic) a board post was first acknowledged (retried with one key)."""
        key = uuid.uuid4().hex
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                if self.post(agent, body, key, timeout_s=5).status_code == 201:
                    return time.monotonic()
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"no post acknowledged:\n{self.log.read_text()}")
            time.sleep(0.05)

    def register(self, agent: str, *, org: str, slug: str) -> None:
        identity = LocalIdentity(Path(self.env["BUCKETSYNC_DATA_DIR"]) / "users.json", org=org)
        with httpx.Client(base_url=self.base, timeout=30) as client:
            register_agent(client, identity, agent, org=org, slug=slug)

    def kill(self) -> None:
        """`kill -9` of the whole server: the supervisor and every worker."""
        assert self.process is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.kill()


def _burn(own_session: bool) -> None:
    if own_session:
        os.setsid()
    while True:
        pass


class Burners:
    """`count` processes spinning on the CPU while the block runs."""

    def __init__(self, count: int, *, own_sessions: bool = False) -> None:
        self.count = count
        self.own_sessions = own_sessions
        self._processes: list[BaseProcess] = []

    def __enter__(self) -> Burners:
        context = multiprocessing.get_context("fork")
        for _ in range(self.count):
            process = context.Process(target=_burn, args=(self.own_sessions,), daemon=True)
            process.start()
            self._processes.append(process)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for process in self._processes:
            process.kill()
        for process in self._processes:
            process.join()
