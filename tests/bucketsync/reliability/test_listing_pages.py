"""`listing.page` against a naive model: following `next` from any first request walks
exactly the filtered window, page by page, and `next` is null only on the last page."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agenthub.bucketsync.core import listing
from agenthub.bucketsync.core.frontmatter import Document
from agenthub.bucketsync.core.readmodel import Record

AGENTS = ("ann", "bob", "cy")
TYPES = ("agent", "result")


def _key(second: int, agent: str) -> str:
    return f"20260101-00{second // 60:02d}{second % 60:02d}-000_{agent}.md"


@st.composite
def boards(draw: st.DrawFn) -> dict[str, str]:
    seconds = draw(st.lists(st.integers(0, 3599), unique=True, max_size=40))
    return {
        _key(second, draw(st.sampled_from(AGENTS))): draw(st.sampled_from(TYPES))
        for second in seconds
    }


def _page(board: dict[str, str], params: dict[str, str]) -> dict[str, Any]:
    keys = sorted(board)

    def load(paths: Sequence[str]) -> dict[str, Record]:
        return {
            path: Record(path, "h", 1, Document({"type": board[path]}, "body")) for path in paths
        }

    return listing.page(
        listing.Listed(keys=keys, paths={key: key for key in keys}, count=len(keys)),
        listing.parse_query(params),
        load=load,
        render=lambda key, _record: {"filename": key},
    )


@settings(max_examples=300, deadline=None)
@given(
    board=boards(),
    order=st.sampled_from(("asc", "desc")),
    limit=st.integers(1, 45),
    agent=st.none() | st.sampled_from(AGENTS),
    type_=st.none() | st.sampled_from(TYPES),
    after=st.none() | st.integers(0, 3600),
    before=st.none() | st.integers(0, 3600),
)
def test_pages_concatenate_to_the_filtered_window(
    board: dict[str, str],
    order: str,
    limit: int,
    agent: str | None,
    type_: str | None,
    after: int | None,
    before: int | None,
) -> None:
    params = {"order": order, "limit": str(limit)}
    if agent is not None:
        params["agent"] = agent
    if type_ is not None:
        params["type"] = type_
    # Cursors are filenames; "-999" sorts after every key of that second, "-" before it.
    if after is not None:
        params["after"] = _key(after, "ann").replace("-000_ann", "-999_zzz")
    if before is not None:
        params["before"] = _key(before, "ann").replace("-000_ann", "-_")
    window = sorted(
        key
        for key, kind in board.items()
        if (agent is None or key.endswith(f"_{agent}.md"))
        and (type_ is None or kind == type_)
        and ("after" not in params or key > params["after"])
        and ("before" not in params or key < params["before"])
    )
    # The walk goes up from `after` alone, down from `before` alone, else in `order`.
    ascending = "after" in params if ("after" in params) != ("before" in params) else order == "asc"
    expected = window if ascending else window[::-1]
    walked: list[str] = []
    for _ in range(len(window) + 2):
        result = _page(board, params)
        items: list[str] = result["items"]
        assert items == sorted(items, reverse=order == "desc")
        assert len(items) <= limit
        walked += sorted(items, reverse=not ascending)
        if result["next"] is None:
            break
        assert len(walked) < len(expected), "next given on the last page"
        params["after" if ascending else "before"] = result["next"]
    assert walked == expected


def test_newest_first_page_longer_than_half_the_board_keeps_every_item() -> None:
    board = {_key(second, "ann"): "agent" for second in range(30)}
    result = _page(board, {"order": "desc", "limit": "50"})
    assert len(result["items"]) == 30
    assert result["next"] is None
