"""A server freezes what its startup left alive, after collecting what it left as
garbage: later collections skip the frozen objects, and no garbage is kept forever.
Run in a child process: freezing this test run's own heap would keep its garbage."""

from __future__ import annotations

import subprocess
import sys

CHILD = """
import gc, weakref
from agenthub.heap import freeze_startup_objects
import agenthub.statehub.app  # a server's imports

class Node:
    pass

kept, dropped = Node(), Node()
dropped.self = dropped  # a cycle: only the collector frees it
gone = weakref.ref(dropped)
del dropped
gc.disable()  # no collection but the one under test
freeze_startup_objects()
print(gc.get_freeze_count(), gone() is None, any(o is kept for o in gc.get_objects()))
"""


def test_startup_objects_are_frozen_and_startup_garbage_is_collected_first() -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHILD], capture_output=True, text=True, check=True, timeout=60
    )
    frozen, garbage_collected, kept_tracked = done.stdout.split()

    assert int(frozen) > 10_000  # the imports' objects
    assert garbage_collected == "True"
    assert kept_tracked == "False"  # frozen objects are no longer in any generation
