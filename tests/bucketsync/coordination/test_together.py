"""Items 3-5 of issue 18 together, over real HTTP on the local store: a landscape event
lands in the budgeted digest's `landscape` section (below mentions, above claims), and a
post's `reach` names the watcher a landscape long-poll keeps parked."""

from __future__ import annotations

from tests.bucketsync.coordination.conftest import Site
from tests.bucketsync.coordination.test_budget import filenames, packed, post
from tests.bucketsync.coordination.test_landscape import parked_updates, result


def test_an_overtaken_owner_finds_the_event_in_the_budgeted_digest_below_mentions(
    site: Site,
) -> None:
    result(site, "agent-1", 0.80)
    result(site, "agent-2", 0.90)
    mention = post(site, "agent-3", "@agent-1 your run is behind now")

    body = packed(site, 4000)

    landscape = body["sections"]["landscape"]
    # agent-1's first crown, then the write that passed it and took the crown: one event
    # file per write, its reasons every kind it carries.
    assert sorted(item["reasons"] for item in landscape) == [
        ["champion:changed"],
        ["leaderboard:overtaken", "champion:changed"],
    ]
    assert filenames(body, "mentions") == [mention]
    order = list(body["sections"])
    assert order.index("mentions") < order.index("landscape") < order.index("claims")


def test_a_post_reaches_the_owner_parked_on_landscape_updates_as_woken(site: Site) -> None:
    result(site, "agent-1", 0.80)
    watcher, woken = parked_updates(site, "agent-1")

    site.clock.advance(61)
    answer = site.world.raw("agent-2", "@agent-1 look at the board")
    watcher.join(timeout=15)

    assert answer.status_code == 201, answer.text
    assert answer.json()["reach"]["woken"] == ["agent-1"]
    assert [item["reasons"] for item in woken[0]["items"]] == [["mention"]]
