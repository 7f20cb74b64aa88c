"""Kill-test hooks for a real `agenthub bucketsync serve`: on PYTHONPATH, Python imports
this module at start in the server and in every worker it spawns, and it acts only when
the test's environment asks.

- `AGENTHUB_TEST_STALL_AUTHOR=name`, `AGENTHUB_TEST_STALL_MARKER=path`: the first board
  post by `name` stops after its board file and wake, before its journal entry is
  completed (the audit row and the answer recorded): it writes its worker's pid to `path` and sleeps, for
  the test to `kill -9` that worker there.
- `AGENTHUB_TEST_GATE_LEASE_ONLY=1`: the Redis idempotency gate never sees its holder's
  end, as before issue 31 (a dead worker's key is held until its lease runs out).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

if os.environ.get("AGENTHUB_TEST_STALL_AUTHOR"):
    from typing import Any

    from agenthub.bucketsync.core import journal
    from agenthub.bucketsync.core.hub import Hub

    _author = os.environ["AGENTHUB_TEST_STALL_AUTHOR"]
    _marker = Path(os.environ["AGENTHUB_TEST_STALL_MARKER"])
    _complete = journal.complete

    def _stalling_complete(hub: Hub, entry: journal.Entry, **options: Any) -> None:
        if entry.board_path.endswith(f"_{_author}.md"):
            try:
                claim = os.open(f"{_marker}.claim", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                pass
            else:
                os.close(claim)
                _marker.with_suffix(".tmp").write_text(str(os.getpid()))
                _marker.with_suffix(".tmp").rename(_marker)
                time.sleep(600)
        _complete(hub, entry, **options)

    journal.complete = _stalling_complete

if os.environ.get("AGENTHUB_TEST_GATE_LEASE_ONLY"):
    from agenthub.bucketsync.scaleout.state import RedisGate

    RedisGate._ended = staticmethod(lambda seen: False)  # type: ignore[method-assign]
