"""Wire shapes of hub-core.

`MessageRead` is State Hub's own list shape, imported rather than restated, so a
reader can switch between the two services without changing its parser.
"""

from __future__ import annotations

from agenthub.statehub.schemas import SLUG_SCHEMA, MessageRead

__all__ = ["SLUG_SCHEMA", "MessageRead"]
