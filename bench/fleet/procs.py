"""The soak's server processes: State Hub and hub-core restartable on their ports (as
`tests/…/processes.ServeProcess` runs bucket-sync), the worker processes of a
`serve --workers N` supervisor, and /proc samples of RSS and open fds per process."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from tests.bucketsync.reliability.processes import ServeProcess


class Service(ServeProcess):
    """`agenthub <name> serve` on one port across restarts, killable with -9 as a whole."""

    def __init__(self, name: str, env: dict[str, str], log: Path, health: str) -> None:
        super().__init__(env, log)
        self.name = name
        self.health = health
        self.argv = [sys.executable, "-m", "agenthub.cli", name, "serve", "--port", str(self.port)]

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    def wait_ready(self, timeout_s: float, ready: Callable[[httpx.Response], bool]) -> float:
        """When (monotonic) the health route first satisfied `ready`."""
        deadline = time.monotonic() + timeout_s
        while True:
            with contextlib.suppress(httpx.HTTPError, ValueError):
                if ready(httpx.get(self.base + self.health, timeout=2)):
                    return time.monotonic()
            assert self.process is not None
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} did not come up:\n{self.log.read_text()[-3000:]}")
            time.sleep(0.1)


def children(pid: int) -> list[int]:
    """Processes whose parent is `pid`, leaving out multiprocessing's resource tracker."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid and b"resource_tracker" not in cmdline:
            found.append(int(entry))
    return sorted(found)


@dataclass
class Samples:
    role: str
    born: float
    # (t, RSS MB, fds other than sockets, sockets, sockets in CLOSE_WAIT)
    points: list[tuple[float, float, int, int, int]] = field(default_factory=list)


CLOSE_WAIT = "08"


def closed_by_peer() -> set[str]:
    """Inodes of the TCP sockets whose peer has closed and whose owner has not: what a
    server that forgets to close a connection leaves behind."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                if fields[3] == CLOSE_WAIT:
                    found.add(f"socket:[{fields[9]}]")
    return found


def sample(pid: int, close_wait: set[str]) -> tuple[float, int, int, int] | None:
    """RSS, open fds that are not sockets, sockets (client connections come and go with
    the fleet, moving to a worker when another dies), and sockets left in CLOSE_WAIT."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        links = []
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                links.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
    except OSError:
        return None
    sockets = sum(1 for link in links if link.startswith("socket:"))
    lingering = sum(1 for link in links if link in close_wait)
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024, len(links) - sockets, sockets, lingering
    return None


class Sampler(threading.Thread):
    """Every `every_s`, RSS and fds of each process `pids()` names (pid -> role)."""

    def __init__(self, pids: Callable[[], dict[int, str]], every_s: float = 2.0) -> None:
        super().__init__(daemon=True, name="sampler")
        self.pids = pids
        self.every_s = every_s
        self.samples: dict[int, Samples] = {}
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.wait(self.every_s):
            self.once()

    def once(self) -> None:
        now = time.monotonic()
        close_wait = closed_by_peer()
        for pid, role in self.pids().items():
            point = sample(pid, close_wait)
            if point is not None:
                self.samples.setdefault(pid, Samples(role, now)).points.append((now, *point))

    def stop(self, settle_s: float = 3.0) -> None:
        """Stop, and take a last sample once the fleet's hung-up connections had
        `settle_s` to be closed by the servers."""
        self.stopping.set()
        self.join(timeout=10)
        time.sleep(settle_s)
        self.once()
