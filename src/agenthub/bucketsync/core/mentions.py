"""Inbox recipients of a message: @-mentions in the body and the authors of `refs`.

The same extraction runs on the write path and in `backfill-inbox`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from agenthub.bucketsync.core.naming import is_human_handle, read_board_filename

# Not after a character that could end an email local part (`carlos@agent-1` is an
# address, not a mention), and the handle must end at a non-handle character.
MENTION_RE = re.compile(
    r"(?<![A-Za-z0-9._%+\-])@([a-z0-9](?:[a-z0-9-]{0,38}[a-z0-9])?)(?![A-Za-z0-9_-])"
)


def mentioned_handles(body: str) -> list[str]:
    return [match.group(1) for match in MENTION_RE.finditer(body)]


def normalize_refs(refs: Any) -> list[str]:
    """`refs` given as a comma/whitespace separated string or a list, read as a list (the
    file keeps the shape its author gave)."""
    if refs is None:
        return []
    if isinstance(refs, str):
        return [token for token in re.split(r"[\s,]+", refs) if token]
    if isinstance(refs, list | tuple):
        return [str(item).strip() for item in refs if str(item).strip()]
    return [str(refs)]


def ref_authors(refs: Iterable[str]) -> list[str]:
    authors = []
    for ref in refs:
        if not ref.endswith(".md"):
            continue
        _stamp, author = read_board_filename(ref.rsplit("/", 1)[-1]) or (None, None)
        if author is not None:
            authors.append(author)
    return authors


def recipients(
    *,
    author: str,
    body: str,
    refs: Iterable[str],
    is_registered: Callable[[str], bool],
    cap: int,
) -> list[str]:
    """Mentioned handles then refs authors, routable only, minus the author, deduped in order
    of appearance, at most `cap`."""
    found: list[str] = []
    for handle in [*mentioned_handles(body), *ref_authors(refs)]:
        if handle == author or handle in found:
            continue
        if not (is_human_handle(handle) or is_registered(handle)):
            continue
        found.append(handle)
        if len(found) >= cap:
            break
    return found


def unknown(*, author: str, body: str, is_registered: Callable[[str], bool]) -> list[str]:
    """The @-mentioned handles no inbox exists for (neither registered nor `human-*`), in
    order of appearance: what `recipients` drops, reported so a typo is not silent."""
    found: list[str] = []
    for handle in mentioned_handles(body):
        if handle == author or handle in found or is_human_handle(handle):
            continue
        if not is_registered(handle):
            found.append(handle)
    return found
