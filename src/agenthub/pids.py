"""Process ids: whether the process that left something behind is still running."""

from __future__ import annotations

import os


def alive(pid: int) -> bool:
    """Whether a process with `pid` exists on this host (one we may not signal counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
