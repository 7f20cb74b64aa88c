"""`LocalUpload`: one file arriving in pieces at the local store (`storage.base.Upload`).

The pieces go to a temp file named `.tmp-{pid}-h{host}-up-…` (the pattern `LocalBucketStore.sweep`
removes once the process is gone) and are hashed as they arrive, so memory holds one piece
whatever the file's size; `commit` fsyncs the temp file and hands it with its hash to the
store, which renames it into `objects/` and links the path to it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Callable

from agenthub.bucketsync.errors import StorageUnavailable
from agenthub.bucketsync.storage.base import FileEntry


class LocalUpload:
    def __init__(
        self,
        label: str,
        temp: str,
        fd: int,
        *,
        place: Callable[[str], FileEntry],
        durable: bool,
    ) -> None:
        self._label, self._temp, self._fd = label, temp, fd
        self._place, self._durable = place, durable
        self._digest = hashlib.sha256()
        self.size = 0

    def write(self, chunk: bytes) -> None:
        if self._fd < 0:
            raise StorageUnavailable(f"the upload of {self._label} is closed")
        try:
            view = memoryview(chunk)
            while view:
                view = view[os.write(self._fd, view) :]
        except OSError as exc:
            self.abort()
            raise StorageUnavailable(f"write to {self._label} failed: {exc}") from exc
        self._digest.update(chunk)
        self.size += len(chunk)

    def commit(self) -> FileEntry:
        try:
            if self._durable:
                os.fsync(self._fd)
            self._close()
            return self._place(self._digest.hexdigest())
        except OSError as exc:
            self.abort()
            raise StorageUnavailable(f"write to {self._label} failed: {exc}") from exc
        except BaseException:
            self.abort()
            raise

    def abort(self) -> None:
        self._close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._temp)

    def _close(self) -> None:
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)
