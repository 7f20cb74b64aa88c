"""Landscape events over real HTTP (issue 18, item 4): an overtaken result, a champion
change and a verdict reach the agents they concern through `/v1/updates`, written when the
result or the verdict is; nothing is written when the board did not change."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from agenthub.bucketsync.landscape import derive
from agenthub.bucketsync.results.leaderboard import Row
from agenthub.bucketsync.scoring.verdicts import VerdictBook
from tests.bucketsync.coordination.conftest import Site


def result(site: Site, agent: str, score: float, **fm: Any) -> str:
    """Promote an `agent-run` result for `agent`; the clock moves 1 s first, so stamps
    are distinct and ordered across agents."""
    site.clock.advance(1)
    header = {"score": score, "method": "m", "status": "agent-run", "description": "d", **fm}
    text = "---\n" + "".join(f"{k}: {json.dumps(v)}\n" for k, v in header.items())
    text += f"---\nrun by {agent}\n"  # distinct bytes per agent: promotion dedups by content
    path = f"results/{agent}-{score}-{len(fm)}-{site.clock.now().timestamp()}.md"
    assert site.world.put(agent, path, text).status_code == 201
    answer = site.http.post("/v1/results", json={"source": site.world.uri(agent, path)})
    assert answer.status_code == 201, answer.text
    return str(answer.json()["filename"])


def updates(site: Site, handle: str, **params: str) -> dict[str, Any]:
    page = site.http.get("/v1/updates", params={"as": handle, "expand": "true", **params})
    assert page.status_code == 200, page.text
    body: dict[str, Any] = page.json()
    return body


def events(site: Site, handle: str) -> list[tuple[list[str], dict[str, Any]]]:
    """(reasons, frontmatter) of the landscape items in `handle`'s /v1/updates, oldest
    first."""
    items = updates(site, handle, order="asc", limit="100")["items"]
    return [(i["reasons"], i["frontmatter"]) for i in items if i["path"].startswith("events/")]


def kinds(site: Site, handle: str) -> list[list[str]]:
    return [reasons for reasons, _fm in events(site, handle)]


def subscribe(site: Site, agent: str, notify: str | None) -> dict[str, Any]:
    assert site.world.put(agent, "sub.md", "subscribe").status_code == 201
    body: dict[str, Any] = {"source": site.world.uri(agent, "sub.md")}
    if notify is not None:
        body["notify"] = notify
    answer = site.http.post("/v1/leaderboard/subscribe", json=body)
    assert answer.status_code == 200, answer.text
    payload: dict[str, Any] = answer.json()
    return payload


def parked_updates(site: Site, handle: str) -> tuple[threading.Thread, list[dict[str, Any]]]:
    """A `/v1/updates?wait=20` long-poll for `handle` after its current cursor, parked."""
    cursor = site.http.get("/v1/updates", params={"as": handle}).json()["cursor"]
    woken: list[dict[str, Any]] = []
    params = {"as": handle, "wait": "20", "expand": "true", "order": "asc"}
    if cursor:
        params["after"] = cursor

    def watch() -> None:
        woken.append(site.http.get("/v1/updates", params=params).json())

    watcher = threading.Thread(target=watch)
    watcher.start()
    site.parked()
    return watcher, woken


def test_overtaking_a_result_wakes_the_overtaken_owners_parked_updates(site: Site) -> None:
    mine = result(site, "agent-1", 0.80)
    watcher, woken = parked_updates(site, "agent-1")

    theirs = result(site, "agent-2", 0.90)
    watcher.join(timeout=20)

    page = woken[0]
    assert page["watch"]["status"] == "delivered"
    # One event file for the write; agent-1's view of it: passed, and dethroned.
    assert [i["reasons"] for i in page["items"]] == [["leaderboard:overtaken", "champion:changed"]]
    item = page["items"][0]
    assert item["path"].startswith("events/") and item["filename"].endswith("_landscape.md")
    assert item["agent"] == "landscape"
    assert item["trust"]["via"] == "server" and item["trust"]["verified_author"] is False
    details = item["frontmatter"]["overtaken"]
    assert details["yours"] == mine and details["score"] == 0.8
    assert (details["rank_before"], details["rank_after"]) == (1, 2)
    assert details["by"] == ["agent-2"]
    passer = item["frontmatter"]["passed_by"]
    assert [(b["agent"], b["filename"], b["score"]) for b in passer] == [("agent-2", theirs, 0.9)]
    assert item["frontmatter"]["cause"] == "result" and item["frontmatter"]["result"] == theirs
    assert item["frontmatter"]["to"] == {"agent-1": ["leaderboard:overtaken", "champion:changed"]}


def test_the_passer_and_agents_above_it_are_not_told_they_were_overtaken(site: Site) -> None:
    result(site, "agent-1", 0.95)
    result(site, "agent-2", 0.80)

    result(site, "agent-3", 0.90)

    assert ["leaderboard:overtaken"] in kinds(site, "agent-2")
    assert ["leaderboard:overtaken"] not in kinds(site, "agent-1")
    assert ["leaderboard:overtaken"] not in kinds(site, "agent-3")


def test_a_worse_result_writes_no_event(site: Site) -> None:
    result(site, "agent-1", 0.90)
    result(site, "agent-2", 0.80)
    before = site.hub.store.list(site.hub.central, "events/")

    result(site, "agent-2", 0.85)  # agent-2's best improves, still behind agent-1
    result(site, "agent-1", 0.70)  # worse than agent-1's own best: the board is unchanged
    result(site, "agent-3", 0.5, status="negative")

    assert site.hub.store.list(site.hub.central, "events/") == before
    assert kinds(site, "agent-1") == [["champion:changed"]]  # its first result crowned it
    assert kinds(site, "agent-2") == kinds(site, "agent-3") == []


def test_an_equal_score_later_does_not_overtake_and_a_better_one_does(site: Site) -> None:
    first = result(site, "agent-1", 0.90)
    result(site, "agent-2", 0.90)  # a tie goes to the earlier result

    assert ["leaderboard:overtaken"] not in kinds(site, "agent-1")
    board = site.http.get("/v1/leaderboard").json()["rows"]
    assert (board[0]["agent"], board[0]["filename"]) == ("agent-1", first)

    result(site, "agent-2", 0.9000001)

    assert kinds(site, "agent-1").count(["leaderboard:overtaken", "champion:changed"]) == 1


def test_champion_change_goes_to_notify_all_subscribers_only(site: Site) -> None:
    assert subscribe(site, "agent-3", "all") == {
        "handle": "agent-3",
        "notify": "all",
        "changed": True,
        "path": "events/subscribers/agent-3.md",
    }
    assert subscribe(site, "agent-3", "all")["changed"] is False
    result(site, "agent-1", 0.80)
    watcher, woken = parked_updates(site, "agent-3")

    result(site, "agent-2", 0.90)
    watcher.join(timeout=20)

    changes = [i for i in woken[0]["items"] if i["reasons"] == ["champion:changed"]]
    assert len(changes) == 1
    champion = changes[0]["frontmatter"]["champion"]
    assert (champion["before"]["agent"], champion["after"]["agent"]) == ("agent-1", "agent-2")
    assert changes[0]["frontmatter"]["to"] == {}  # heard as a subscriber, not addressed
    # agent-3 follows every champion change; an agent at the default level only its own.
    assert kinds(site, "agent-3") == [["champion:changed"], ["champion:changed"]]
    site.clock.advance(1)
    subscribe(site, "agent-3", "mine")
    assert kinds(site, "agent-3") == []
    public = site.http.get("/v1/landscape").json()
    assert public["count"] == 2 and len(public["items"]) == 2


def test_the_old_and_new_champion_get_the_change_once_each(site: Site) -> None:
    result(site, "agent-1", 0.80)

    result(site, "agent-2", 0.90)

    # Crowned by its first result, then dethroned and passed by agent-2's.
    assert kinds(site, "agent-1") == [
        ["champion:changed"],
        ["leaderboard:overtaken", "champion:changed"],
    ]
    assert kinds(site, "agent-2") == [["champion:changed"]]
    assert kinds(site, "agent-3") == []


def test_the_champion_improving_their_own_best_is_no_change(site: Site) -> None:
    result(site, "agent-1", 0.80)
    result(site, "agent-2", 0.70)
    before = len(site.http.get("/v1/landscape").json()["items"])

    result(site, "agent-1", 0.85)

    assert len(site.http.get("/v1/landscape").json()["items"]) == before


def verdict(site: Site, filename: str, rerun: float) -> str:
    """Write a verdict the way the verifier and `challenge evaluate` do (VerdictBook)."""
    return VerdictBook(site.hub).record(filename, {}, {"score": rerun})


@pytest.mark.parametrize(
    ("rerun", "kind", "reasons"),
    [
        (0.9, "valid", [["verification:valid"]]),
        # Its only result invalid, agent-1 is no longer champion: nobody is.
        (0.2, "invalid", [["champion:changed", "verification:invalid"]]),
    ],
)
def test_a_verdict_reaches_the_results_owner(
    site: Site, rerun: float, kind: str, reasons: list[list[str]]
) -> None:
    filename = result(site, "agent-1", 0.9)
    watcher, woken = parked_updates(site, "agent-1")

    site.clock.advance(1)
    assert verdict(site, filename, rerun) == kind
    watcher.join(timeout=20)

    mine = [i for i in woken[0]["items"] if i["path"].startswith("events/")]
    assert [i["reasons"] for i in mine] == reasons
    assert mine[-1]["frontmatter"]["verification"] == {"owner": "agent-1", "verdict": kind}
    assert mine[-1]["frontmatter"]["result"] == filename
    assert mine[-1]["frontmatter"]["cause"] == "verdict"
    assert [f"verification:{kind}"] not in kinds(site, "agent-2")


def test_an_invalid_verdict_on_the_champion_changes_the_champion(site: Site) -> None:
    subscribe(site, "agent-3", "all")
    top = result(site, "agent-1", 0.95)
    result(site, "agent-2", 0.90)

    site.clock.advance(1)
    verdict(site, top, 0.1)

    latest = events(site, "agent-3")[-1][1]
    assert latest["cause"] == "verdict" and latest["result"] == top
    assert (latest["champion"]["before"]["agent"], latest["champion"]["after"]["agent"]) == (
        "agent-1",
        "agent-2",
    )
    # Falling behind by a verdict is nobody passing agent-2's best.
    assert ["leaderboard:overtaken"] not in kinds(site, "agent-2")


def test_a_subscription_needs_a_known_level_and_a_real_source(site: Site) -> None:
    assert site.world.put("agent-1", "sub.md", "x").status_code == 201
    bad = site.http.post(
        "/v1/leaderboard/subscribe",
        json={"source": site.world.uri("agent-1", "sub.md"), "notify": "mentions"},
    )
    missing = site.http.post(
        "/v1/leaderboard/subscribe", json={"source": site.world.uri("agent-1", "nope.md")}
    )

    assert bad.status_code == 400 and "all" in bad.json()["error"]["hint"]
    assert missing.status_code == 404


def test_landscape_lists_a_handles_events_with_a_kind_filter(site: Site) -> None:
    result(site, "agent-1", 0.80)
    result(site, "agent-2", 0.90)

    mine = site.http.get("/v1/landscape", params={"as": "agent-1", "expand": "true"}).json()
    only = site.http.get(
        "/v1/landscape", params={"as": "agent-1", "kind": "leaderboard:overtaken"}
    ).json()

    assert sorted(r for i in mine["items"] for r in i["reasons"]) == [
        "champion:changed",  # crowned by its first result
        "champion:changed",  # dethroned by agent-2's
        "leaderboard:overtaken",
    ]
    assert len(only["items"]) == 1 and only["items"][0].endswith("_landscape.md")
    assert site.http.get("/v1/landscape", params={"as": "nobody-here"}).status_code == 404


Rows = list[Row]


def rows(*placed: tuple[str, str, float]) -> Rows:
    return [
        Row(i + 1, agent, score, filename, "", "pending", None, None)
        for i, (agent, filename, score) in enumerate(placed)
    ]


def named(standing: derive.Standing | None) -> str | None:
    return standing.agent if standing else None


@pytest.mark.parametrize(
    ("before", "after", "overtaken", "champion"),
    [
        # a newcomer passes the two below it
        (
            rows(("a", "a1", 3), ("b", "b1", 2), ("c", "c1", 1)),
            rows(("a", "a1", 3), ("d", "d1", 2.5), ("b", "b1", 2), ("c", "c1", 1)),
            {"b": ["d"], "c": ["d"]},
            None,
        ),
        # an agent improving past one other: only that one is passed
        (
            rows(("a", "a1", 3), ("b", "b1", 2), ("c", "c1", 1)),
            rows(("a", "a1", 3), ("c", "c2", 2.5), ("b", "b1", 2)),
            {"b": ["c"]},
            None,
        ),
        # a result removed (invalid) passes nobody and crowns the next
        (
            rows(("a", "a1", 3), ("b", "b1", 2)),
            rows(("b", "b1", 2), ("a", "a0", 1)),
            {},
            ("a", "b"),
        ),
        # the first result ever is a champion change with nobody passed
        ([], rows(("a", "a1", 1)), {}, (None, "a")),
    ],
)
def test_derive_shift_names_who_was_passed_and_the_champion(
    before: Rows,
    after: Rows,
    overtaken: dict[str, list[str]],
    champion: tuple[str | None, str | None] | None,
) -> None:
    found = derive.shift(before, after)

    assert {o.owner: [s.agent for s in o.by] for o in found.overtaken} == overtaken
    change = found.champion
    assert (None if change is None else (named(change.before), named(change.after))) == champion
