"""Process ids: whether the process that left something behind is still running.

`alive(pid)` answers for a bare pid on this host. `Holder` names a process so that it can
be told apart from a later process given the same pid, and from a process on another
machine: what a lock or lease records so that others can see its holder died.
`ProcessLock` is a lock file that frees itself when its holder ends.
"""

from __future__ import annotations

import fcntl
import os
import socket
from dataclasses import dataclass
from pathlib import Path


def alive(pid: int) -> bool:
    """Whether a process with `pid` exists on this host (one we may not signal counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _boot_id() -> str:
    # Changes at every boot, so a pid recorded before a reboot is never taken for a live one.
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _started(pid: int) -> str:
    """The start time of `pid` in clock ticks since boot ("" where /proc is absent)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return "gone"
    except OSError:
        return ""
    # Field 22; the command name (field 2) may itself hold spaces and parentheses.
    return stat.rpartition(")")[2].split()[19]


@dataclass(frozen=True)
class Holder:
    """One process on one machine, written as `host/boot/pid/started`."""

    host: str
    boot: str
    pid: int
    started: str

    @classmethod
    def me(cls) -> Holder:
        pid = os.getpid()
        if _ME and _ME[0].pid == pid:  # a forked child is another holder
            return _ME[0]
        holder = cls(socket.gethostname(), _boot_id(), pid, _started(pid))
        _ME[:] = [holder]
        return holder

    @classmethod
    def parse(cls, text: str) -> Holder | None:
        parts = text.rsplit("/", 3)
        if len(parts) != 4 or not parts[2].isdigit():
            return None
        host, boot, pid, started = parts
        return cls(host, boot, int(pid), started)

    def __str__(self) -> str:
        return f"{self.host}/{self.boot}/{self.pid}/{self.started}"

    def gone(self) -> bool | None:
        """True when this process has ended, False while it runs, None when that cannot be
        told from here (another machine, or no /proc)."""
        me = Holder.me()
        if self.host != me.host or self.boot != me.boot or not self.boot:
            return None
        if not alive(self.pid):
            return True
        started = _started(self.pid)
        if started == "gone":
            return True
        if not started or not self.started:
            return None
        return started != self.started


_ME: list[Holder] = []


class ProcessLock:
    """A lock file held for the rest of this process's life: the kernel releases an `flock`
    when its holder ends, `kill -9` included, so no stale pidfile is left to clean. Taken
    shared (several holders that can work together) or exclusive (one holder alone)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def take(self, *, shared: bool) -> int | None:
        """Hold the lock; None on success, else the pid that last took it (0 if unknown)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except BlockingIOError:
            held_by = os.pread(fd, 32, 0).decode(errors="replace").strip()
            os.close(fd)
            return int(held_by) if held_by.isdigit() else 0
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._fd = fd
        return None
