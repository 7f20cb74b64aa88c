"""Directives over real HTTP (issue 18, item 2): an organizer broadcast with
`ack_required: true`, pinned in every digest and `/v1/updates` of each registered agent
until that agent acks it, replaced by its superseder, with a who-has-acked roster."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tests.bucketsync.coordination.conftest import Site


def updates(site: Site, handle: str, **params: str) -> dict[str, Any]:
    answer = site.http.get("/v1/updates", params={"as": handle, **params})
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def test_a_directive_is_pinned_until_acked_then_unpinned(site: Site) -> None:
    posted = site.directive("Submit only through jobs:run from now on.")
    assert posted.status_code == 201, posted.text
    directive = posted.json()["filename"]
    assert posted.json()["broadcast"] is True and posted.json()["ack_required"] is True

    digest = site.http.get("/v1/digest", params={"as": "agent-1"}).json()
    assert next(iter(digest)) == "directives"  # pinned at the top
    assert [d["filename"] for d in digest["directives"]["items"]] == [directive]
    # Past the cursor, the next delivered page still carries it, first, as a directive.
    cursor = updates(site, "agent-1")["cursor"]
    assert cursor == directive
    site.clock.advance(1)
    mention = site.world.raw("agent-2", "@agent-1 see my run").json()["filename"]
    page = updates(site, "agent-1", after=cursor, expand="true", order="asc")
    assert [(i["filename"], i["reasons"]) for i in page["items"]] == [
        (directive, ["directive"]),
        (mention, ["mention"]),
    ]
    assert page["pinned"] == [directive] and page["cursor"] == mention

    acked = site.ack("agent-1", directive)
    assert acked.status_code == 200, acked.text
    assert acked.json()["changed"] is True
    assert acked.json()["path"] == f"acks/{directive.removesuffix('.md')}/agent-1.md"

    assert site.http.get("/v1/digest", params={"as": "agent-1"}).json()["directives"] == {
        "count": 0,
        "items": [],
    }
    site.clock.advance(1)
    later = site.world.raw("agent-2", "@agent-1 again").json()["filename"]
    page = updates(site, "agent-1", after=mention, expand="true")
    assert [i["filename"] for i in page["items"]] == [later] and page["pinned"] == []
    # Still pinned for everybody else.
    digest_2 = site.http.get("/v1/digest", params={"as": "agent-2"}).json()
    assert [d["filename"] for d in digest_2["directives"]["items"]] == [directive]


def test_a_superseded_directive_stops_being_pinned_and_names_its_replacement(
    site: Site,
) -> None:
    old = site.directive("Use the v1 eval set.").json()["filename"]
    site.clock.advance(1)
    new = site.directive("Use the v2 eval set instead.", supersedes=old)
    assert new.status_code == 201, new.text
    replacement = new.json()["filename"]

    pinned = site.http.get("/v1/digest", params={"as": "agent-1"}).json()["directives"]
    assert [d["filename"] for d in pinned["items"]] == [replacement]
    assert pinned["items"][0]["supersedes"] == old
    assert updates(site, "agent-1")["pinned"] == [replacement]
    state = site.http.get(f"/v1/directives/{old}").json()
    assert state["active"] is False and state["superseded_by"] == replacement
    active = site.http.get("/v1/directives", params={"active": "true"}).json()
    assert active["items"] == [replacement] and active["count"] == 2

    twice = site.directive("and v3", supersedes=old)
    assert twice.status_code == 409
    assert replacement in twice.json()["error"]["hint"]


def test_the_roster_names_who_has_and_has_not_acked(site: Site) -> None:
    directive = site.directive("Read the new rules.").json()["filename"]
    site.ack("agent-2", directive)

    again = site.ack("agent-2", directive)
    roster = site.http.get(f"/v1/directives/{directive}").json()

    assert again.status_code == 200 and again.json()["changed"] is False
    assert roster["acked"] == ["agent-2"]
    assert roster["not_acked"] == ["agent-1", "agent-3"]
    assert (roster["acked_count"], roster["not_acked_count"]) == (1, 2)
    site.world.agent("agent-late")  # agents who register later must ack too
    assert "agent-late" in site.http.get(f"/v1/directives/{directive}").json()["not_acked"]


def test_a_directive_reaches_a_parked_watcher_and_an_empty_page_does_not_repeat_it(
    site: Site,
) -> None:
    cursor = updates(site, "agent-3")["cursor"]
    woken: list[dict[str, Any]] = []

    def watch() -> None:
        params = {"wait": "20", "expand": "true"} | ({"after": cursor} if cursor else {})
        woken.append(updates(site, "agent-3", **params))

    watcher = threading.Thread(target=watch)
    watcher.start()
    site.parked()
    directive = site.directive("Stop all runs for maintenance.").json()["filename"]
    watcher.join(timeout=20)

    assert [(i["filename"], i["reasons"]) for i in woken[0]["items"]] == [
        (directive, ["directive"])
    ]
    # Nothing new since: the page stays empty (a watcher must not spin), pinned says why.
    quiet = updates(site, "agent-3", after=woken[0]["cursor"], wait="0")
    assert quiet["items"] == [] and quiet["pinned"] == [directive]


def test_only_organizers_post_directives(site: Site) -> None:
    site.world.user("carol")
    by_contributor = site.directive("do this", user="carol")
    by_agent = site.http.post("/v1/directives", json={"agent_id": "agent-1", "body": "do this"})
    spoofed = site.world.promote("agent-1", "d.md", "---\nack_required: true\n---\nack me")

    for refused in (by_contributor, by_agent, spoofed):
        assert refused.status_code == 403, refused.text
        assert refused.json()["error"]["code"] == "NOT_ORGANIZER"
    assert "POST /v1/directives" in spoofed.json()["error"]["hint"]
    assert site.http.get("/v1/directives").json()["count"] == 0


@pytest.mark.parametrize("kind", ["unknown", "plain-broadcast"])
def test_acking_what_is_not_a_directive_is_a_404(site: Site, kind: str) -> None:
    filename = "20260301-120000-000_human-boss.md"
    if kind == "plain-broadcast":
        plain = site.http.post(
            "/v1/messages",
            json={"agent_id": "human-boss", "body": "fyi", "broadcast": True},
            headers=site.world.auth("boss"),
        )
        filename = plain.json()["filename"]

    answer = site.ack("agent-1", filename)

    assert answer.status_code == 404
    assert "GET /v1/directives" in answer.json()["error"]["hint"]


def test_superseding_an_unknown_directive_is_a_404_and_posts_nothing(site: Site) -> None:
    answer = site.directive("replace it", supersedes="20260101-000000-000_human-boss.md")

    assert answer.status_code == 404
    assert site.http.get("/v1/messages").json()["count"] == 0


def test_directives_bind_agents_not_humans(site: Site) -> None:
    directive = site.directive("Agents: rerun with seed 7.").json()["filename"]

    human = site.http.get("/v1/digest", params={"as": "human-boss"}).json()["directives"]
    everyone = site.http.get("/v1/digest").json()["directives"]

    assert human == {"count": 0, "items": []}
    assert [d["filename"] for d in everyone["items"]] == [directive]


def test_a_pinned_directive_does_not_stop_a_long_poll_from_parking(site: Site) -> None:
    directive = site.directive("Read the rules.").json()["filename"]
    cursor = updates(site, "agent-1")["cursor"]
    answered: list[dict[str, Any]] = []
    watcher = threading.Thread(
        target=lambda: answered.append(
            updates(site, "agent-1", after=cursor, wait="20", expand="true")
        )
    )

    watcher.start()
    # Were the pinned directive an item of every page, this would answer at once and a
    # watcher would spin on it; it parks until something new arrives.
    site.parked()
    assert not answered
    site.clock.advance(1)
    mention = site.world.raw("agent-2", "@agent-1 ping").json()["filename"]
    watcher.join(timeout=20)

    assert [i["filename"] for i in answered[0]["items"]] == [directive, mention]


def test_concurrent_acks_are_all_kept(site: Site) -> None:
    for index in range(4, 10):
        site.world.agent(f"agent-{index}")
    directive = site.directive("Everyone ack.").json()["filename"]
    agents = [f"agent-{index}" for index in range(1, 10)]
    for agent in agents:
        assert site.world.put(agent, "ack.md", "ok").status_code == 201

    def ack(agent: str) -> int:
        answer = site.http.post(
            f"/v1/directives/{directive}/ack", json={"source": site.world.uri(agent, "ack.md")}
        )
        return answer.status_code

    with ThreadPoolExecutor(max_workers=9) as pool:
        codes = list(pool.map(ack, agents))

    # One marker per agent, no shared roster file: nobody's ack overwrites another's.
    assert codes == [200] * 9
    roster = site.http.get(f"/v1/directives/{directive}").json()
    assert roster["acked"] == sorted(agents) and roster["not_acked"] == []
