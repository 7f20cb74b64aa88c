"""Named mutual-exclusion locks for the read-modify-writes that must not interleave: the
verification index, the job-quota ledger, the scoring queue, journal recovery (the seed §4
check→act→record sequence among them). Failing to get a lock in time is a retryable 503 —
never a silent run without it.

A held lock is a `Lease`. Every store write a holder makes goes through `lease.write(fn)`,
which runs `fn` only while this holder is still the lock's current holder, so a holder
whose lease ended (a stalled process, a slow Hub call) cannot overwrite what the next
holder wrote:

- `LocalLocks` (no bus): a thread lock, and with a `directory` also an `flock` on
  `{directory}/{name}.lock`, so a CLI (`verify reconcile`, `challenge evaluate`) beside a
  bus-less server on the same data directory is serialized with it. The kernel frees an
  flock with its holder, so there is no lease to outlive: `write` just runs.
- `scaleout.state.RedisLocks` (the bus): a Redis lock with a lease, and a FENCING TOKEN
  from a per-name Redis counter incremented at each acquisition (so tokens only grow).
  `write` first renews the lease (refused with `StaleLease` if another holder owns the
  lock) and then, where the store is a directory on this machine, passes the token to the
  `FileFences` of that directory (below), which refuses a stale token atomically with the
  write. Without a file fence (the store is the Hub, which has no conditional write), the
  guarantee is by bound: `Leased` (how app/hub.py wraps them) ends every Hub call made while
  the lock is held before the lease does (`deadlines.within`), and the renewal before each
  write proves the holder still owns the lock, so no write lands after another holder's.

`FileFences` — why a token file, and why it is claimed at acquisition: a per-name file
`{directory}/{name}.fence` holds the highest token admitted. A holder claims its token
there (under `flock`) right after acquiring the lock, before it reads what it will
change, and each fenced write runs under the same `flock` after checking that the file
still holds the holder's own token. Claiming at acquisition matters: if the check were at
write only, a stale holder could write after the new holder had read, and the new holder
would then overwrite the stale holder's change without having seen it. With the claim,
a stale holder's write either lands before the new holder's claim (so the new holder
reads it) or is refused (the file names a newer token); never in between.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Protocol, TypeVar

from agenthub.bucketsync.deadlines import within
from agenthub.bucketsync.errors import StorageUnavailable

T = TypeVar("T")

_POLL_S = 0.02


def busy(name: str) -> StorageUnavailable:
    return StorageUnavailable(
        f"the {name} lock is busy; nothing was done", hint="retry in a few seconds"
    )


class StaleLease(StorageUnavailable):
    """A holder's lease ended and another holder took the lock: its write is refused."""

    def __init__(self, name: str, token: int) -> None:
        super().__init__(
            f"the {name} lock passed to another holder before this write "
            f"(lease {token} expired); nothing was written",
            hint="retry: the request is read and applied again under the lock",
        )
        self.lock_name = name
        self.token = token


class Lease(Protocol):
    """A held lock: its name and fencing token (growing with each acquisition)."""

    name: str
    token: int

    def renew(self) -> None:
        """Make sure this holder still holds the lock, for a full lease from now; raise
        `StaleLease` if it does not (then nothing more may be written)."""
        ...

    def write(self, write: Callable[[], T]) -> T:
        """Run one store write `write` as this lock's current holder; `StaleLease`, and
        nothing written, if a newer holder has taken the lock."""
        ...


class Locks(Protocol):
    def hold(self, name: str, *, wait_s: float = 30.0) -> AbstractContextManager[Lease]:
        """Hold lock `name` for the block, waiting up to `wait_s` for it."""
        ...


def lock_file_name(name: str) -> str:
    """A lock's name as a file name ("verification index" → "verification-index")."""
    return re.sub(r"[^A-Za-z0-9_.]+", "-", name).strip("-.") or "lock"


class Unfenced:
    """The lease of a lock nobody else can take while it is held (a thread lock, an flock
    the kernel frees only with its holder): `write` just runs."""

    def __init__(self, name: str, token: int = 0) -> None:
        self.name = name
        self.token = token

    def renew(self) -> None:
        return None

    def write(self, write: Callable[[], T]) -> T:
        return write()


def _open(directory: Path, name: str, kind: str) -> int:
    """Open (creating) `{directory}/{name}.{kind}`, the file a lock or fence is held on."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        return os.open(directory / f"{lock_file_name(name)}.{kind}", os.O_RDWR | os.O_CREAT)
    except OSError as exc:
        raise StorageUnavailable(
            f"the {name} {kind} file cannot be opened: {exc}", hint="retry in a few seconds"
        ) from exc


def _flock(fd: int, deadline: float) -> bool:
    """Take an exclusive flock on `fd`, polling until `deadline` (monotonic)."""
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
        if time.monotonic() >= deadline:
            return False
        time.sleep(_POLL_S)


class LocalLocks:
    """Thread locks; with `directory`, also an flock per name there (one data directory,
    several processes)."""

    def __init__(self, directory: Path | None = None) -> None:
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}
        self._directory = directory
        self._tokens: dict[str, int] = {}

    @contextmanager
    def hold(self, name: str, *, wait_s: float = 30.0) -> Iterator[Lease]:
        deadline = time.monotonic() + wait_s
        with self._guard:
            lock = self._locks.setdefault(name, threading.Lock())
        if not lock.acquire(timeout=wait_s):
            raise busy(name)
        try:
            with self._guard:
                token = self._tokens[name] = self._tokens.get(name, 0) + 1
            if self._directory is None:
                yield Unfenced(name, token)
                return
            with self._file_lock(name, deadline):
                yield Unfenced(name, token)
        finally:
            lock.release()

    @contextmanager
    def _file_lock(self, name: str, deadline: float) -> Iterator[None]:
        assert self._directory is not None
        fd = _open(self._directory, name, "lock")
        try:
            if not _flock(fd, deadline):
                raise busy(name)
            yield
        finally:
            os.close(fd)  # frees the flock


class FileFences:
    """Fencing tokens in `{directory}/{name}.fence`, checked under an flock together with
    the write they admit (see the module docstring)."""

    WAIT_S = 30.0

    def __init__(self, directory: Path) -> None:
        self._directory = directory

    @contextmanager
    def admit(self, name: str, token: int) -> Iterator[None]:
        """Hold the fence of `name` for the block if `token` is not older than the newest
        token admitted (recording `token` as the newest); `StaleLease` otherwise."""
        fd = _open(self._directory, name, "fence")
        try:
            if not _flock(fd, time.monotonic() + self.WAIT_S):
                raise busy(name)
            raw = os.pread(fd, 64, 0).strip()
            newest = int(raw) if raw.isdigit() else 0
            if token < newest:
                raise StaleLease(name, token)
            if token > newest:
                os.ftruncate(fd, 0)
                os.pwrite(fd, str(token).encode(), 0)
            yield
        finally:
            os.close(fd)

    def claim(self, name: str, token: int) -> None:
        """Record `token` as the newest holder of `name` at once, before the holder reads
        anything, so a stale holder's later write is refused (`StaleLease` if `token` is
        already stale)."""
        with self.admit(name, token):
            return


class Leased:
    """`inner` locks whose lease (`lease_s`) bounds every backend call made while one is
    held (`deadlines.within`): a Hub call cannot still run after the lease let the next
    holder in. `margin_s` leaves time to write what the holder computed."""

    def __init__(self, inner: Locks, *, lease_s: float, margin_s: float = 10.0) -> None:
        self._inner = inner
        self._budget_s = max(1.0, lease_s - margin_s)

    @contextmanager
    def hold(self, name: str, *, wait_s: float = 30.0) -> Iterator[Lease]:
        with self._inner.hold(name, wait_s=wait_s) as lease, within(self._budget_s):
            yield lease
