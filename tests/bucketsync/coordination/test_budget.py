"""The token-budgeted digest over real HTTP on the local store (issue 18, item 5):
`GET /v1/digest?budget_tokens=N` never sends more than N tokens (4 bytes each) of body,
keeps directives, then mentions, before channel chatter, counts exactly what it left out,
points at every cut item's whole, and leaves the plain digest as it was."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import httpx
import pytest
from fastapi.responses import JSONResponse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import ClientSession

from agenthub.bucketsync.agentside.watch import WatchClient, WatchError
from agenthub.bucketsync.core import frontmatter, naming
from agenthub.bucketsync.live import budget
from agenthub.bucketsync.live import digest as snapshot
from agenthub.bucketsync.storage.base import Batch
from tests.bucketsync.coordination.conftest import ORGANIZER, Site
from tests.bucketsync.test_collab_watch import Server, server
from tests.bucketsync.test_mcp import mcp_env, payload, with_mcp

__all__ = ["server"]

LONG = "A long report on the run. " * 80  # ~2 KB: over the per-item body cap


def digest(site: Site, tokens: int | None = None, **params: str) -> httpx.Response:
    query = {"as": "agent-1", **params}
    if tokens is not None:
        query["budget_tokens"] = str(tokens)
    return site.http.get("/v1/digest", params=query)


def packed(site: Site, tokens: int, **params: str) -> dict[str, Any]:
    answer = digest(site, tokens, **params)
    assert answer.status_code == 200, answer.text
    assert len(answer.content) <= tokens * budget.BYTES_PER_TOKEN
    body: dict[str, Any] = answer.json()
    return body


def post(site: Site, agent: str, body: str, **extra: Any) -> str:
    site.clock.advance(61)  # past the raw-post rate limit
    answer = site.world.raw(agent, body, **extra)
    assert answer.status_code == 201, answer.text
    return str(answer.json()["filename"])


def broadcast(site: Site, body: str) -> str:
    site.clock.advance(1)
    answer = site.http.post(
        "/v1/messages",
        json={"agent_id": f"human-{ORGANIZER}", "body": body, "broadcast": True},
        headers=site.world.auth(ORGANIZER),
    )
    assert answer.status_code == 201, answer.text
    return str(answer.json()["filename"])


def loud_channel(site: Site, name: str = "ideas") -> str:
    """Create `name` and have agent-1 follow it with notify: all; the board's announcement."""
    created = site.http.post(
        "/v1/channels",
        json={"name": name, "agent_id": f"human-{ORGANIZER}", "body": "a theme"},
        headers=site.world.auth(ORGANIZER),
    )
    assert created.status_code == 201, created.text
    assert site.world.put("agent-1", "sub.md", "subscribe").status_code == 201
    subscribed = site.http.post(
        f"/v1/channels/{name}/subscribe",
        json={"source": site.world.uri("agent-1", "sub.md"), "notify": "all"},
    )
    assert subscribed.status_code == 200, subscribed.text
    return str(created.json()["announcement"])


def filenames(body: dict[str, Any], section: str) -> list[str]:
    return [item["filename"] for item in body["sections"][section]]


def test_the_budgeted_digest_fits_its_budget_and_says_how_much_it_used(site: Site) -> None:
    for n in range(4):
        post(site, "agent-2", f"@agent-1 run {n}: {LONG}")

    for tokens in (300, 500, 1000, 5000):
        answer = digest(site, tokens)
        body = answer.json()

        assert answer.status_code == 200 and answer.headers["content-type"] == "application/json"
        assert len(answer.content) <= tokens * budget.BYTES_PER_TOKEN
        assert body["budget"] == {"tokens": tokens, "used": budget.tokens(len(answer.content))}


def test_mentions_are_kept_before_channel_chatter(site: Site) -> None:
    loud_channel(site)
    mention = post(site, "agent-3", "@agent-1 your sieve beats mine, can I reuse it?")
    chatter = [
        post(site, "agent-2", f"thinking out loud {n}: {LONG}", channel="ideas") for n in range(5)
    ]

    body = packed(site, 420)

    assert filenames(body, "mentions") == [mention]
    assert body["sections"]["mentions"][0]["reasons"] == ["mention"]
    assert body["omitted"]["mentions"] == 0
    # The chatter is newer, yet it gets only what is left, and the rest is counted.
    shown = filenames(body, "channels")
    assert shown == chatter[::-1][: len(shown)]
    assert body["omitted"]["channels"] == len(chatter) - len(shown) > 0
    assert all(item["reasons"] == ["channel:ideas"] for item in body["sections"]["channels"])


def test_unacked_directives_come_first_whatever_the_cursor(site: Site) -> None:
    directive = site.directive(f"Freeze the public split. {LONG}").json()["filename"]
    cursor = post(site, "agent-2", "@agent-1 an old one")
    mentions = [post(site, "agent-2", f"@agent-1 news {n}") for n in range(3)]

    floor = digest(site, 1, after=cursor).json()["error"]["minimum_tokens"]
    tight = packed(site, floor + 260, after=cursor)

    assert filenames(tight, "directives") == [directive]
    assert tight["sections"]["directives"][0]["reasons"] == ["directive"]
    assert tight["sections"]["directives"][0]["expand"] == f"/v1/directives/{directive}"
    assert tight["omitted"]["mentions"] == 3 - len(tight["sections"]["mentions"]) > 0
    assert site.ack("agent-1", directive).status_code == 200
    after_ack = packed(site, 4000, after=cursor)
    assert filenames(after_ack, "directives") == []
    assert filenames(after_ack, "mentions") == mentions[::-1]


def test_omitted_counts_are_exact_at_every_budget(site: Site) -> None:
    announcement = loud_channel(site)
    made = {
        "mentions": [post(site, "agent-2", f"@agent-1 look {n} {LONG[:300]}") for n in range(3)],
        "broadcasts": [broadcast(site, f"notice {n} {LONG[:200]}") for n in range(2)],
        "channels": [
            post(site, "agent-3", f"idea {n} {LONG[:250]}", channel="ideas") for n in range(4)
        ],
        "rest": [
            announcement,
            *(post(site, "agent-3", f"board {n} {LONG[:150]}") for n in range(5)),
        ],
    }
    expected = {name: 0 for name in budget.NAMES} | {k: len(v) for k, v in made.items()}
    floor = digest(site, 1).json()["error"]["minimum_tokens"]

    seen_partial = False
    for tokens in range(floor, floor + 3000, 97):
        body = packed(site, tokens)
        for name in budget.NAMES:
            shown = filenames(body, name)
            assert len(shown) + body["omitted"][name] == expected[name], (tokens, name)
            if name in made:
                assert shown == made[name][::-1][: len(shown)]
        # Strict priority: below a section with omissions nothing is shown.
        names = list(budget.NAMES)
        cut = next((i for i, n in enumerate(names) if body["omitted"][n]), len(names))
        assert all(not body["sections"][n] for n in names[cut + 1 :]), tokens
        seen_partial |= 0 < sum(body["omitted"].values()) < sum(expected.values())
    assert seen_partial
    assert all(count == 0 for count in packed(site, 40_000)["omitted"].values())


def test_expand_pointers_serve_each_cut_item_whole(site: Site) -> None:
    announcement = loud_channel(site)
    directive = site.directive(f"directive: {LONG}").json()["filename"]
    texts = {
        directive: f"directive: {LONG}",
        broadcast(site, f"broadcast: {LONG}"): f"broadcast: {LONG}",
        post(site, "agent-2", f"@agent-1 mention: {LONG}"): f"@agent-1 mention: {LONG}",
        post(site, "agent-2", f"channel: {LONG}", channel="ideas"): f"channel: {LONG}",
        post(site, "agent-3", f"@agent-1 in a channel: {LONG}", channel="ideas"): (
            f"@agent-1 in a channel: {LONG}"
        ),
        post(site, "agent-3", f"board: {LONG}"): f"board: {LONG}",
    }
    site.clock.advance(1)
    claim = site.claim("agent-2", "a segmented sieve with wheel factorization")
    texts[claim.json()["filename"]] = "what I will run\n"
    texts[announcement] = site.http.get(f"/v1/messages/{announcement}").json()["body"]

    body = packed(site, 40_000)

    items = {i["filename"]: i for section in body["sections"].values() for i in section}
    assert set(items) == set(texts)
    for filename, text in texts.items():
        item = items[filename]
        assert item["truncated"] is (len(text) > budget.BODY_TOKENS * budget.BYTES_PER_TOKEN)
        assert text.startswith(item["body"])
        whole = site.http.get(item["expand"])
        assert whole.status_code == 200, (item["expand"], whole.text)
        assert whole.json()["filename"] == filename
        assert whole.json()["body"].strip() == text.strip()
    assert items[directive]["expand"] == f"/v1/directives/{directive}"
    assert {i["expand"].split("/")[2] for i in items.values()} == {
        "directives",
        "messages",
        "channels",
        "claims",
    }


def test_a_body_is_cut_to_what_is_left_of_the_budget(site: Site) -> None:
    mention = post(site, "agent-2", "@agent-1 " + 'é"\\\n' * 400)  # multi-byte and escaped
    floor = digest(site, 1).json()["error"]["minimum_tokens"]

    body = packed(site, floor + 90)

    [item] = body["sections"]["mentions"]
    assert item["filename"] == mention and item["truncated"] is True
    assert len(item["body"]) > 0 and ("@agent-1 " + 'é"\\\n' * 400).startswith(item["body"])


def test_the_plain_digest_is_unchanged_byte_for_byte(site: Site) -> None:
    loud_channel(site)
    site.directive("Freeze the public split.")
    post(site, "agent-2", "@agent-1 hello")
    post(site, "agent-3", "chatter", channel="ideas")

    for params in ({"as": "agent-1"}, {}, {"as": "agent-2", "since": "2026-03-01T12:01:00Z"}):
        answer = site.http.get("/v1/digest", params=params)
        as_handle = params.get("as")
        composed = snapshot.digest(
            site.hub, as_handle=as_handle, since=params.get("since"), after=None
        )

        assert answer.content == JSONResponse(composed).body
        assert not {"budget", "sections", "omitted"} & set(answer.json())
        assert next(iter(answer.json())) == "directives"


def test_too_small_a_budget_is_a_422_naming_the_minimum(site: Site) -> None:
    post(site, "agent-2", "@agent-1 hello")

    refused = digest(site, 10)
    minimum = refused.json()["error"]["minimum_tokens"]

    assert refused.status_code == 422
    assert refused.json()["error"]["code"] == "BUDGET_TOO_SMALL"
    assert f"budget_tokens={minimum}" in refused.json()["error"]["hint"]
    assert digest(site, minimum - 1).status_code == 422
    at_floor = packed(site, minimum)
    assert at_floor["sections"]["mentions"] == [] and at_floor["omitted"]["mentions"] == 1
    assert digest(site, 0).json()["error"]["code"] == "INVALID_QUERY"


def test_the_cursor_moves_the_digest_past_what_it_saw(site: Site) -> None:
    first = post(site, "agent-2", "@agent-1 one")
    body = packed(site, 2000)
    assert body["cursor"] == first and filenames(body, "mentions") == [first]

    second = post(site, "agent-2", "@agent-1 two")
    later = packed(site, 2000, after=body["cursor"])

    assert filenames(later, "mentions") == [second] and later["cursor"] == second
    assert all(not later["sections"][name] for name in budget.NAMES if name != "mentions")


def test_sections_are_data_classified_by_reason_prefix() -> None:
    assert budget.section_of(["leaderboard:overtaken"]) == "landscape"
    assert budget.section_of(["verification:invalid"]) == "landscape"
    assert budget.section_of(["champion:changed"]) == "landscape"
    assert budget.section_of(["channel:ideas", "mention"]) == "mentions"
    assert budget.section_of(["claim-overlap"]) == "claims"
    assert budget.section_of(["something-new"]) == "rest"
    assert budget.section_of([]) == "rest"


def test_discovery_documents_the_budget(site: Site) -> None:
    described = site.http.get("/v1").json()
    conventions = described["conventions"]["digest_budget"]

    assert conventions["priority"] == list(budget.NAMES)
    assert "ceil(UTF-8 bytes" in conventions["tokens"]
    assert any("budget_tokens" in e["description"] for e in described["endpoints"])


# -- the property: random boards, random budgets ----------------------------------------

KINDS = ("board", "mention", "broadcast", "directive", "channel", "channel-mention", "claim")
SECTION_OF_KIND = {
    "board": "rest",
    "mention": "mentions",
    "broadcast": "broadcasts",
    "directive": "directives",
    "channel": "channels",
    "channel-mention": "mentions",
    "claim": "claims",
}
BODIES = st.text(
    st.characters(blacklist_categories=("Cs", "Cc")) | st.sampled_from('"\\\n'), max_size=1500
)


def write_board(site: Site, posts: list[tuple[str, str]]) -> tuple[dict[str, str], list[str]]:
    """Write `posts` (kind, body) into the central bucket the way the server lays them out,
    one second apart; returns each filename's section for agent-1, and the paths written."""
    moment = site.clock.now()
    adds: list[tuple[str, bytes]] = []
    sections: dict[str, str] = {}
    for n, (kind, body) in enumerate(posts):
        author = "human-boss" if kind in ("broadcast", "directive") else f"agent-{2 + n % 2}"
        stamp = naming.stamp(moment + timedelta(seconds=n + 1))
        filename = naming.message_filename(stamp, author)
        fm: dict[str, Any] = {
            "agent": author,
            "timestamp": naming.stamp_to_iso(stamp),
            "via": "bucket",
        }
        if kind == "claim":
            fm |= {"idea": f"idea {n}", "expires": "2099-01-01T00:00:00Z"}
            adds.append((naming.claim_path(filename), frontmatter.render(fm, body)))
        elif kind.startswith("channel"):
            data = frontmatter.render(fm | {"type": "agent", "channel": "ideas"}, body)
            adds.append((naming.channel_message_path("ideas", filename), data))
            if kind == "channel-mention":
                adds.append((naming.inbox_path("agent-1", filename), data))
        else:
            fm["type"] = "agent"
            if kind in ("broadcast", "directive"):
                fm |= {"broadcast": True} | ({"ack_required": True} if kind == "directive" else {})
            data = frontmatter.render(fm, body)
            adds.append((f"{naming.MESSAGE_BOARD}{filename}", data))
            if kind == "mention":
                adds.append((naming.inbox_path("agent-1", filename), data))
            if kind in ("broadcast", "directive"):
                adds.append((naming.broadcast_path(filename), data))
        sections[filename] = SECTION_OF_KIND[kind]
    if adds:
        site.hub.write_central(adds)
    # A server stamp is never ahead of the clock, and a digest holds what is (issue 31):
    # move the clock past the stamps written above.
    site.clock.advance(len(posts) + 1)
    return sections, [path for path, _data in adds]


def erase_board(site: Site, paths: list[str]) -> None:
    site.hub.store.write_batch(site.hub.settings.central_bucket, Batch(deletes=paths))
    for path in paths:
        site.hub.read_model.delete_through(path.split("/", 1)[0] + "/", path)


@pytest.fixture
def boarded(site: Site) -> tuple[Site, str]:
    return site, loud_channel(site)


@settings(
    max_examples=30,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    posts=st.lists(st.tuples(st.sampled_from(KINDS), BODIES), max_size=14),
    tokens=st.integers(min_value=1, max_value=3000),
    cursor_at=st.none() | st.integers(min_value=0, max_value=14),
)
def test_no_budgeted_digest_exceeds_its_budget(
    boarded: tuple[Site, str], posts: list[tuple[str, str]], tokens: int, cursor_at: int | None
) -> None:
    site, announcement = boarded
    sections, written = write_board(site, posts)
    try:
        ordered = sorted(sections)
        after = ordered[cursor_at] if cursor_at is not None and cursor_at < len(ordered) else None
        params = {"after": after} if after else {}

        answer = digest(site, tokens, **params)

        if answer.status_code == 422:
            minimum = answer.json()["error"]["minimum_tokens"]
            assert minimum > tokens
            answer, tokens = digest(site, minimum, **params), minimum
        assert answer.status_code == 200, answer.text
        assert len(answer.content) <= tokens * budget.BYTES_PER_TOKEN
        body = answer.json()
        # What the model says each section holds, newest first; directives ignore the cursor.
        expected: dict[str, list[str]] = {name: [] for name in budget.NAMES}
        for filename in sorted(sections, reverse=True):
            if after is None or filename > after or sections[filename] == "directives":
                expected[sections[filename]].append(filename)
        if after is None:
            expected["rest"].append(announcement)
        for name in budget.NAMES:
            shown = filenames(body, name)
            assert shown == expected[name][: len(shown)], name
            assert body["omitted"][name] == len(expected[name]) - len(shown), name
        cut = next((i for i, n in enumerate(budget.NAMES) if body["omitted"][n]), None)
        if cut is not None:
            assert not any(body["sections"][n] for n in budget.NAMES[cut + 1 :])
    finally:
        erase_board(site, written)


# -- from an agent's side: the MCP digest tool and WatchClient.digest --------------------


def test_mcp_digest_takes_a_budget_and_says_so(server: Server) -> None:
    world = server.world
    assert world.raw("agent-2", f"@agent-1 {LONG}").status_code == 201

    async def body(session: ClientSession) -> dict[str, Any]:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        small = payload(await session.call_tool("digest", {"budget_tokens": 250}))
        plain = payload(await session.call_tool("digest", {}))
        return {"tool": tools["digest"], "small": small, "plain": plain}

    seen = with_mcp(mcp_env(server), body)

    assert "budget_tokens" in seen["tool"].inputSchema["properties"]
    assert "budget_tokens" in (seen["tool"].description or "")
    small = seen["small"]
    assert small["budget"]["tokens"] == 250 and small["budget"]["used"] <= 250
    assert small["sections"]["mentions"][0]["truncated"] is True
    assert "sections" not in seen["plain"] and "directives" in seen["plain"]


def test_watch_client_digest_packs_from_its_cursor(server: Server) -> None:
    world = server.world
    client = WatchClient(server.base, "agent-1", state_dir=server.state)
    first = world.raw("agent-2", "@agent-1 first").json()["filename"]

    packed_once = client.digest(budget_tokens=1000)
    second = world.raw("agent-2", "@agent-1 second").json()["filename"]
    packed_twice = client.digest(budget_tokens=1000, after=packed_once["cursor"])
    with pytest.raises(WatchError) as refused:
        client.digest(budget_tokens=5)

    assert [i["filename"] for i in packed_once["sections"]["mentions"]] == [first]
    assert [i["filename"] for i in packed_twice["sections"]["mentions"]] == [second]
    assert refused.value.status == 422
    assert refused.value.body["error"]["minimum_tokens"] > 5
    assert "budget" not in client.digest()
    client.close()


def test_mcp_and_watch_client_follow_a_cut_items_expand_route(server: Server) -> None:
    world = server.world
    assert world.raw("agent-2", f"@agent-1 {LONG}").status_code == 201
    client = WatchClient(server.base, "agent-1")
    cut = client.digest(budget_tokens=250)["sections"]["mentions"][0]
    assert cut["truncated"] is True

    async def body(session: ClientSession) -> dict[str, Any]:
        whole = payload(await session.call_tool("expand", {"route": cut["expand"]}))
        refused = await session.call_tool("expand", {"route": "http://elsewhere/v1/x"})
        return {"whole": whole, "refused": refused}

    seen = with_mcp(mcp_env(server), body)

    assert seen["whole"]["body"].strip() == f"@agent-1 {LONG}".strip()
    assert seen["refused"].isError
    assert client.expand(cut["expand"])["body"] == seen["whole"]["body"]
    with pytest.raises(WatchError, match="not an expand route"):
        client.expand("//elsewhere/v1/x")
