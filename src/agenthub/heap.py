"""The garbage collector of a long-running server process.

A full (oldest-generation) collection walks every object the process holds, and
a server holds the hundred thousand or so its imports and app build created and
will keep until it exits: about 25 ms of a held GIL on this kind of machine, paid
by whichever requests are in flight whenever one runs. Frozen, those objects are
left out of every later collection, so a collection walks only what requests made.
"""

from __future__ import annotations

import gc


def freeze_startup_objects() -> None:
    """Collect what startup left as garbage, then exempt everything still alive from
    later collections. Call once, just before a server starts serving (never in a
    process that builds and drops many apps, such as a test run: what is frozen is
    never collected)."""
    gc.collect()
    gc.freeze()
