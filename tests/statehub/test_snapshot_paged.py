"""The paged snapshot (additive to v1): one consistent image served in pages."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from agenthub.clock import FrozenClock
from agenthub.statehub import snapshot as module
from agenthub.statehub.rows import content_hash
from agenthub.statehub.store import Database
from tests.statehub.test_feed import busy_inbox, raw_delete, send, snapshot


def _pages(client: TestClient, page_size: int, between: Any = None) -> list[dict[str, Any]]:
    pages = [client.get("/messages/feed/snapshot", params={"page_size": page_size}).json()]
    while pages[-1]["next_page"]:
        if between is not None:
            between()
        response = client.get(
            "/messages/feed/snapshot",
            params={"page_size": page_size, "page": pages[-1]["next_page"]},
        )
        assert response.status_code == 200, response.text
        assert response.headers["cache-control"] == "no-store"
        pages.append(response.json())
    return pages


def _parts(pages: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    parts: dict[str, list[dict[str, Any]]] = {
        "messages": [], "receipts": [], "tombstones": [], "receipt_tombstones": []
    }  # fmt: skip
    for page in pages:
        for row in page["rows"]:
            parts[row["part"]].append(row["state"])
    return parts


def test_pages_concatenate_to_the_single_response_snapshot(
    client: TestClient, clock: FrozenClock, db: Database
) -> None:
    made = busy_inbox(client, clock)
    raw_delete(db, made["reply"]["id"])
    whole = snapshot(client)

    pages = _pages(client, page_size=2)
    parts = _parts(pages)

    assert len(pages) > 3
    for name in ("messages", "receipts", "tombstones", "receipt_tombstones"):
        assert parts[name] == whole[name]
    assert pages[-1]["content_hash"] == whole["content_hash"]
    assert pages[-1]["count"] == whole["count"]
    assert {p["cursor"] for p in pages} == {whole["cursor"]}
    assert len({p["snapshot_id"] for p in pages}) == 1


def test_writes_between_pages_do_not_enter_the_image(
    client: TestClient, clock: FrozenClock
) -> None:
    for _ in range(5):
        send(client, clock)
    before = snapshot(client)

    pages = _pages(client, page_size=2, between=lambda: send(client, clock))
    parts = _parts(pages)

    assert parts["messages"] == before["messages"]
    assert pages[-1]["content_hash"] == before["content_hash"]
    assert pages[-1]["content_hash"] == content_hash(
        parts["messages"], parts["receipts"], parts["tombstones"]
    )
    assert len(snapshot(client)["messages"]) > len(before["messages"])


def test_the_image_is_released_after_the_last_page(client: TestClient, clock: FrozenClock) -> None:
    send(client, clock)
    pages = _pages(client, page_size=1)

    response = client.get(
        "/messages/feed/snapshot", params={"page_size": 1, "page": pages[0]["next_page"]}
    )

    assert client.app.state.paged_snapshots.open_count == 0  # type: ignore[attr-defined]
    assert response.status_code == 409
    assert response.json()["resnapshot_required"] is True


def test_an_idle_image_is_released(client: TestClient, clock: FrozenClock) -> None:
    send(client, clock)
    send(client, clock)
    first = client.get("/messages/feed/snapshot", params={"page_size": 1}).json()
    paged = client.app.state.paged_snapshots  # type: ignore[attr-defined]
    assert paged.open_count == 1

    clock.advance(paged.idle_ttl_s + 1)
    paged.reap()

    assert paged.open_count == 0
    response = client.get("/messages/feed/snapshot", params={"page": first["next_page"]})
    assert response.status_code == 409


@pytest.mark.parametrize("token", ["garbage", "eyJzIjoxfQ", ""])
def test_a_malformed_page_token_is_422(client: TestClient, token: str) -> None:
    response = client.get("/messages/feed/snapshot", params={"page": token, "page_size": 5})
    assert response.status_code == 422
    assert "hint" in response.json()


@pytest.mark.parametrize("size", [0, 10_001])
def test_page_size_out_of_range_is_422(client: TestClient, size: int) -> None:
    response = client.get("/messages/feed/snapshot", params={"page_size": size})
    assert response.status_code == 422
    assert "hint" in response.json()


def _retrying_pages(client: TestClient, page_size: int, retry_at: int) -> list[dict[str, Any]]:
    """Pages in order, but page `retry_at` is asked for twice (a client retrying)."""
    pages = [client.get("/messages/feed/snapshot", params={"page_size": page_size}).json()]
    while pages[-1]["next_page"]:
        params = {"page_size": page_size, "page": pages[-1]["next_page"]}
        if len(pages) == retry_at:
            assert client.get("/messages/feed/snapshot", params=params).status_code == 200
        pages.append(client.get("/messages/feed/snapshot", params=params).json())
    return pages


def test_pages_taken_in_order_are_hashed_on_the_way(
    client: TestClient, clock: FrozenClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    busy_inbox(client, clock)
    whole = snapshot(client)

    def reread(*args: object) -> tuple[int, str]:
        raise AssertionError("the last page re-read the whole image")

    monkeypatch.setattr("agenthub.statehub.snapshot.image_hash", reread)
    pages = _pages(client, page_size=2)

    assert (pages[-1]["count"], pages[-1]["content_hash"]) == (
        whole["count"],
        whole["content_hash"],
    )


def test_a_page_taken_twice_still_hashes_the_image_once(
    client: TestClient, clock: FrozenClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    busy_inbox(client, clock)
    whole = snapshot(client)

    rereads: list[int] = []
    real = module.image_hash

    def counted(*args: Any) -> tuple[int, str]:
        rereads.append(1)
        return real(*args)

    monkeypatch.setattr(module, "image_hash", counted)
    pages = _retrying_pages(client, page_size=2, retry_at=2)

    # The retried page would have entered a running hash twice; the last page hashes
    # the pinned image again instead.
    assert rereads == [1]
    assert (pages[-1]["count"], pages[-1]["content_hash"]) == (
        whole["count"],
        whole["content_hash"],
    )
