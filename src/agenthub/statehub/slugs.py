"""Agent slugs: what a sender or recipient name may look like."""

from __future__ import annotations

import re

BROADCAST = "*"
SLUG_PATTERN = r"^[a-z0-9](?:[a-z0-9._-]{0,62}[a-z0-9])?$"
_SLUG_RE = re.compile(SLUG_PATTERN)
SLUG_HINT = (
    "agent slugs are 1-64 characters of lowercase letters, digits, '.', '_' or '-', "
    "starting and ending with a letter or digit"
)


def is_slug(value: str) -> bool:
    return bool(_SLUG_RE.fullmatch(value))


def is_recipient(value: str) -> bool:
    """A recipient is an agent slug or `*` (broadcast)."""
    return value == BROADCAST or is_slug(value)
