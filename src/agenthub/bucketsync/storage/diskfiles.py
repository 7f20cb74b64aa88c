"""Files on local disk for the local store: atomic replacement (temp + fsync + rename, the
temp named `.tmp-{pid}-h{host}-…` so `LocalBucketStore.sweep` knows whose it is), and
reading, hashing and copying in pieces so memory never grows with a file's size.

A temp names its host as well as its process: on a data directory shared between machines
(NFS), a pid means nothing on another host, so the sweep at start-up removes only this
host's temps of dead processes, and another host's only once they are a day old (a writer
on it may be alive: a 5 GB upload in progress, say)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import socket
import threading
from collections.abc import Callable, Iterator
from typing import BinaryIO

from agenthub import pids

# The piece size of hashing and copying: memory per operation, whatever the file's size.
PIECE = 1 << 20


def make_parent(path: str) -> str:
    """Create `path`'s directory if it is missing; returns it."""
    parent = os.path.dirname(path)
    if not os.path.isdir(parent):
        os.makedirs(parent, exist_ok=True)
    return parent


# Another host's temp is left alone this long (its writer may be alive; we cannot tell).
FOREIGN_TEMP_S = 24 * 3600.0
_HOST = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]
_TEMP = re.compile(r"^\.tmp-(\d+)-(?:h([0-9a-f]{8})-)?")


def temp_prefix() -> str:
    """The start of every temp name this process gives: `.tmp-{pid}-h{host}-`."""
    return f".tmp-{os.getpid()}-h{_HOST}-"


def temp_beside(path: str) -> str:
    head, name = os.path.split(path)
    return os.path.join(head, f"{temp_prefix()}{threading.get_ident()}-{name}")


def abandoned(name: str, mtime: float, *, cutoff: float, now: float) -> bool:
    """Whether the temp file `name` (modified at `mtime`) was left by a writer that is gone:
    this host's and its process dead, another host's and a day old, or unnamed and older
    than `cutoff`. Names without a host (an earlier version's) count as this host's."""
    match = _TEMP.match(name)
    if match is None:
        return mtime < cutoff
    host = match.group(2)
    if host is not None and host != _HOST:
        return mtime < now - FOREIGN_TEMP_S
    return not pids.alive(int(match.group(1)))


def read_file(path: str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read()


def hash_file(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while piece := handle.read(PIECE):
            digest.update(piece)
    return digest.hexdigest()


def pieces(handle: BinaryIO, chunk_size: int) -> Iterator[bytes]:
    """`handle`'s bytes in pieces; closes it when done (or abandoned)."""
    try:
        while piece := handle.read(chunk_size):
            yield piece
    finally:
        handle.close()


def fsync_dir(path: str) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_fd(fd: int, data: bytes, *, durable: bool) -> None:
    """Write all of `data` to `fd` (fsynced when durable) and close it."""
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(target: str, data: bytes, *, durable: bool) -> None:
    _replace(
        target,
        lambda tmp: write_fd(
            os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), data, durable=durable
        ),
        durable=durable,
    )


def atomic_copy(source: str, target: str, *, durable: bool) -> None:
    """`atomic_write` of another file's content, read in pieces."""

    def fill(tmp: str) -> None:
        with open(source, "rb") as src, open(tmp, "wb") as dst:
            shutil.copyfileobj(src, dst, PIECE)
            if durable:
                dst.flush()
                os.fsync(dst.fileno())

    _replace(target, fill, durable=durable)


def _replace(target: str, fill: Callable[[str], None], *, durable: bool) -> None:
    parent = make_parent(target)
    # Named for this process and thread (`sweep` knows the pattern): one thread writes
    # one file at a time, so the name is free, whatever else writes the same target.
    tmp = temp_beside(target)
    try:
        fill(tmp)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    if durable:
        fsync_dir(parent)


def stat_if_present(path: str | os.PathLike[str]) -> os.stat_result | None:
    """`path`'s stat, or None when it is gone (a live write renamed or removed it)."""
    try:
        return os.stat(path)
    except FileNotFoundError:
        return None
