"""Files on local disk for the local store: atomic replacement (temp + fsync + rename, the
temp named `.tmp-{pid}-{thread}-…` so `LocalBucketStore.sweep` knows whose it is), and
reading, hashing and copying in pieces so memory never grows with a file's size."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import threading
from collections.abc import Callable, Iterator
from typing import BinaryIO

# The piece size of hashing and copying: memory per operation, whatever the file's size.
PIECE = 1 << 20


def make_parent(path: str) -> str:
    """Create `path`'s directory if it is missing; returns it."""
    parent = os.path.dirname(path)
    if not os.path.isdir(parent):
        os.makedirs(parent, exist_ok=True)
    return parent


def temp_beside(path: str) -> str:
    head, name = os.path.split(path)
    return os.path.join(head, f".tmp-{os.getpid()}-{threading.get_ident()}-{name}")


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
