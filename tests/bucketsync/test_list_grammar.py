"""The shared list grammar and the digest (§7)."""

from __future__ import annotations

from typing import Any

import pytest

from agenthub.bucketsync.core.limiter import Rate
from tests.bucketsync.conftest import World, in_process_limiter, message


@pytest.fixture
def board(world: World) -> list[str]:
    """Six messages, one second apart, from three agents (oldest first)."""
    for agent in ("agent-1", "agent-2", "agent-3"):
        world.agent(agent)
    names = []
    plan = [
        ("agent-1", "alpha question", "question"),
        ("agent-2", "beta note", "note"),
        ("agent-3", "gamma Question", "question"),
        ("agent-1", "delta", "note"),
        ("agent-2", "epsilon @agent-1", "note"),
        ("agent-3", "zeta", "question"),
    ]
    for index, (agent, body, kind) in enumerate(plan):
        if index % 2:
            response = world.raw(agent, body, type=kind)
        else:
            response = world.promote(agent, f"m{index}.md", message(body, type=kind))
        names.append(response.json()["filename"])
        world.hub.clock.advance(1)  # type: ignore[attr-defined]
    return names


def get(world: World, query: str) -> dict:  # type: ignore[type-arg]
    response = world.client.get(f"/v1/messages?{query}")
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


def test_bs_4_6_board_list_and_detail(world: World, board: list[str]) -> None:
    page = get(world, "limit=100")
    assert page["items"] == board[::-1]
    detail = world.client.get(f"/v1/messages/{board[0]}").json()
    assert detail["agent"] == "agent-1" and detail["body"] == "alpha question\n"
    missing = world.client.get("/v1/messages/20990101-000000-000_agent-1.md")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "NOT_FOUND"
    traversal = world.client.get("/v1/messages/..%2Fagents%2Fagent-1.md")
    assert traversal.status_code == 404


def test_bs_7_9_since_until_iso_or_compact_inclusive(world: World, board: list[str]) -> None:
    assert get(world, "since=2026-03-01T12:00:02Z&order=asc")["items"] == board[2:]
    assert get(world, "until=20260301-120001-000&order=asc")["items"] == board[:2]
    assert (
        get(world, "since=20260301-120001&until=20260301-120003&order=asc")["items"] == (board[1:4])
    )
    assert get(world, "until=20260301&limit=100")["matched"] == 6
    bad = world.client.get("/v1/messages?since=yesterday")
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "INVALID_QUERY"


def test_bs_7_10_agent_type_via_filters(world: World, board: list[str]) -> None:
    assert get(world, "agent=agent-1&order=asc")["items"] == [board[0], board[3]]
    assert get(world, "type=question&order=asc")["items"] == [board[0], board[2], board[5]]
    assert get(world, "via=raw&order=asc")["items"] == [board[1], board[3], board[5]]
    bad = world.client.get("/v1/messages?agent=Not_Valid")
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "INVALID_QUERY"


def test_bs_7_11_unknown_verification_state_is_invalid_query(world: World) -> None:
    bad = world.client.get("/v1/messages?verification=pending,maybe")
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "INVALID_QUERY"


def test_bs_7_12_q_is_case_insensitive_over_body_and_frontmatter(
    world: World, board: list[str]
) -> None:
    assert get(world, "q=QUESTION&order=asc")["items"] == [board[0], board[2], board[5]]
    assert get(world, "q=GAMMA")["items"] == [board[2]]


def test_bs_7_13_expand_gives_records_capped_at_expand_max(world: World, board: list[str]) -> None:
    page = get(world, "expand=true&limit=2")
    assert [item["filename"] for item in page["items"]] == board[:-3:-1]
    assert set(page["items"][0]) == {
        "filename",
        "path",
        "agent",
        "timestamp",
        "frontmatter",
        "body",
        "reasons",  # null except on /v1/updates (BS-13.18)
        "trust",  # {via, verified_author, lint} on every delivered record (issue 18)
    }
    world.hub.settings.expand_max_limit = 3
    assert len(get(world, "expand=true&limit=100")["items"]) == 3
    assert len(get(world, "limit=100")["items"]) == 6


def test_bs_7_14_defaults_limit_10_desc_and_agents_asc_unlimited(world: World) -> None:
    world.agent("agent-b")
    world.agent("agent-a")
    for index in range(12):
        world.raw("agent-a" if index < 5 else "agent-b", f"m{index}")
        world.hub.clock.advance(30)  # type: ignore[attr-defined]
    page = get(world, "")
    assert len(page["items"]) == 10 and page["items"] == sorted(page["items"], reverse=True)
    assert world.client.get("/v1/agents").json()["items"] == ["agent-a.md", "agent-b.md"]
    bad = world.client.get("/v1/messages?order=sideways")
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "INVALID_QUERY"


def test_bs_7_15_exclusive_cursors_and_next(world: World, board: list[str]) -> None:
    first = get(world, "limit=4")
    assert first["items"] == board[:1:-1]
    assert first["next"] == board[2]
    second = get(world, f"limit=4&before={first['next']}")
    assert second["items"] == board[1::-1]
    assert second["next"] is None
    forward = get(world, f"limit=2&after={board[1]}")
    assert forward["items"] == [board[3], board[2]]
    assert forward["next"] == board[3]
    rest = get(world, f"limit=10&order=asc&after={forward['next']}")
    assert rest["items"] == board[4:] and rest["next"] is None


def test_bs_7_16_count_is_folder_total_matched_is_post_filter(
    world: World, board: list[str]
) -> None:
    page = get(world, f"type=question&limit=1&after={board[0]}")
    assert page["count"] == 6
    assert page["matched"] == 3  # not trimmed by the cursor or the limit


def test_bs_7_17_cursor_is_the_newest_filename_on_the_page(world: World, board: list[str]) -> None:
    for query in ("limit=3", "limit=3&order=asc", "limit=3&expand=true"):
        page = get(world, query)
        names = [i if isinstance(i, str) else i["filename"] for i in page["items"]]
        assert page["cursor"] == max(names)
    assert get(world, f"after={board[-1]}")["cursor"] is None


def test_bs_7_18_agents_filters_and_agentinfo(world: World) -> None:
    world.agent("agent-1", "alice")
    world.agent("agent-2", "bob")
    world.register("agent-2", "bob", model="special", harness="codex", force=True)
    assert world.client.get("/v1/agents?hf_user=alice").json()["items"] == ["agent-1.md"]
    assert world.client.get("/v1/agents?model=special").json()["items"] == ["agent-2.md"]
    assert world.client.get("/v1/agents?harness=codex").json()["items"] == ["agent-2.md"]
    assert world.client.get("/v1/agents?q=SPECIAL").json()["items"] == ["agent-2.md"]
    expanded = world.client.get("/v1/agents?expand=true&hf_user=bob").json()["items"][0]
    assert expanded["agent_id"] == "agent-2" and expanded["model"] == "special"


def test_bs_4_14_inbox_supports_the_list_grammar(world: World, board: list[str]) -> None:
    page = world.client.get("/v1/inbox/agent-1?expand=true&q=epsilon").json()
    assert [item["filename"] for item in page["items"]] == [board[4]]
    assert page["count"] == 1 and page["matched"] == 1


def test_bs_4_15_bs_7_35_digest_shape_and_since(world: World, board: list[str]) -> None:
    digest = world.client.get("/v1/digest").json()
    assert digest["agents"]["count"] == 3
    assert len(digest["agents"]["newest"]) == 3
    assert [item["filename"] for item in digest["messages"]["items"]] == board[::-1]
    assert digest["inbox"] is None
    assert digest["generated_at"].startswith("2026-03-01T12:00:06")
    since = world.client.get("/v1/digest?since=20260301-120004").json()
    assert [item["filename"] for item in since["messages"]["items"]] == board[:3:-1]


def test_bs_7_35_recent_messages_are_capped_at_20(world: World) -> None:
    world.agent("agent-1")
    limiter = in_process_limiter(world.hub.limiters.raw_messages)
    limiter._rates = [Rate(100, rate.period_s) for rate in limiter._rates]  # room for 25 posts
    for index in range(25):
        world.raw("agent-1", f"m{index}")
    digest = world.client.get("/v1/digest").json()
    assert digest["messages"]["count"] == 25
    assert len(digest["messages"]["items"]) == 20


def test_bs_7_36_digest_inbox_for_as(world: World, board: list[str]) -> None:
    digest = world.client.get("/v1/digest?as=agent-1").json()
    assert digest["inbox"]["count"] == 1
    assert [item["filename"] for item in digest["inbox"]["items"]] == [board[4]]
    assert world.client.get("/v1/digest?as=human-zed").json()["inbox"] == {"count": 0, "items": []}
    missing = world.client.get("/v1/digest?as=ghost")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "NOT_REGISTERED"


def test_bs_7_37_digest_reads_only_the_read_model(world: World, board: list[str]) -> None:
    world.client.get("/v1/digest?as=agent-1")
    store = world.hub.store
    before = (store.list_calls, store.read_many_calls)  # type: ignore[attr-defined]
    calls: list[str] = []
    original_read = store.read

    def counted_read(*args: Any, **kwargs: Any) -> bytes | None:
        calls.append("read")
        return original_read(*args, **kwargs)

    store.read = counted_read  # type: ignore[method-assign]
    world.client.get("/v1/digest?as=agent-1")
    assert (store.list_calls, store.read_many_calls) == before  # type: ignore[attr-defined]
    assert calls == []


def test_repeated_content_filter_is_memoized_and_writes_invalidate_it(
    world: World, board: list[str]
) -> None:
    calls: list[int] = []
    original = world.hub.read_model.records

    def counting(paths, folder):  # type: ignore[no-untyped-def]
        paths = list(paths)
        calls.append(len(paths))
        return original(paths, folder)

    world.hub.read_model.records = counting  # type: ignore[method-assign]
    assert get(world, "q=needle")["matched"] == 0
    scans = len(calls)
    assert get(world, "q=NEEDLE")["matched"] == 0
    assert len(calls) == scans  # same filter, same listing version: no rescan
    world.raw("agent-1", "a needle in the haystack")
    assert get(world, "q=needle")["matched"] == 1
