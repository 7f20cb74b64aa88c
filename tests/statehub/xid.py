"""Reading the feed under `xid` in tests: the servable bound is the cluster's oldest
running transaction, so a transaction open in any other database of the cluster (another
test worker's) can hold writes back from the feed for a moment. Tests wait for them."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

Page = dict[str, Any]


def once_served(
    read: Callable[[], Page], ready: Callable[[Page], bool], within_s: float = 30
) -> Page:
    """`read()`'s page once `ready(page)` (or the last one read after `within_s`)."""
    deadline = time.monotonic() + within_s
    while True:
        page = read()
        if ready(page) or time.monotonic() > deadline:
            return page
        time.sleep(0.05)
