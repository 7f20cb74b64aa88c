"""The verification job's log on a result's detail page (issue 28, item 7): an organizer
sees its tail and opens the whole log, in Chromium at 1280 and 390 px; a contributor and
an anonymous reader get none of it (the re-run saw the private eval set, seed §4/§8), on
bucket-sync's own dashboard and through a standalone `dashboard serve`.

The log is where the verifier's watcher writes it, `job_logs.txt` under
`{VERIFICATION_RUNS_PREFIX}{filename}/` in the audit bucket (`scoring.watcher.finish`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from agenthub.bucketsync.dashboard.app import create_dashboard_app
from agenthub.bucketsync.scoring.runs import LOGS_FILE
from agenthub.bucketsync.storage.base import Batch
from tests.bucketsync.conftest import World
from tests.bucketsync.dashboard.browser import chromium, live_world
from tests.bucketsync.dashboard.test_dashboard_browser import PHONE, Site, post_result
from tests.support.servers import live_server

DESKTOP = {"width": 1280, "height": 900}
PAGE = {"X-Agenthub-Dashboard": "1"}
SECRET = "private case 7919 -> True"  # what a harness may echo from the private eval set
LOG = "".join(f"line {n}: {SECRET if n == 1 else 'ok'}\n" for n in range(1, 101))


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    root = tmp_path_factory.mktemp("joblog")
    with chromium() as browser, live_world(root / "data", LISTING_TTL_S="0") as (base, world):
        settings = world.hub.settings
        world.user("boss", role="admin")
        world.user("carol", role="contributor")
        world.agent("alpha")
        post_result(world, "alpha", "r/1.md", 0.5)
        post_result(world, "alpha", "r/2.md", 0.4)  # never re-run: no log
        logged = verified(world)
        run = f"{settings.verification_runs_prefix}{logged}/{LOGS_FILE}"
        world.hub.store.write_batch(settings.audit_bucket, Batch(adds=[(run, LOG.encode())]))
        shots = root / "shots"
        shots.mkdir()
        yield Site(base, world, shots, browser)


def verified(world: World) -> str:
    """The result the verifier re-ran (the better one)."""
    name: str = world.client.get("/v1/leaderboard").json()["rows"][0]["filename"]
    return name


def unverified(world: World) -> str:
    names = world.client.get("/v1/results").json()["items"]
    [name] = [n for n in names if n != verified(world)]
    return str(name)


def open_result(site: Site, viewport: dict[str, int], user: str | None, name: str) -> Any:
    page = site.page(viewport)
    page.goto("/dashboard")
    if user:
        page.fill("input[name=token]", site.world.tokens[user])
        page.click("form.signin button[type=submit]")
        page.wait_for_selector(f"[data-testid=signed-in]:has-text('human-{user}')")
    page.goto(f"/dashboard#/result/{name}")
    page.wait_for_selector("#result [data-field=score]")
    return page


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1280", "390"])
def test_an_organizer_reads_the_tail_and_opens_the_whole_log(
    site: Site, viewport: dict[str, int]
) -> None:
    page = open_result(site, viewport, "boss", verified(site.world))
    log = page.locator("[data-testid=job-log]")
    log.wait_for()
    assert log.inner_text().splitlines() == LOG.splitlines()[-40:]
    assert "verification_runs/" in page.inner_text("#job-log")
    assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]
    site.shot(page, f"job-log-{viewport['width']}")
    page.click("#job-log a.whole-log")
    page.wait_for_selector(f"[data-testid=job-log]:has-text('{SECRET}')")
    assert log.inner_text().splitlines() == LOG.splitlines()
    assert "the whole log" in page.inner_text("#job-log")


def test_a_result_never_re_run_says_it_has_no_log(site: Site) -> None:
    page = open_result(site, DESKTOP, "boss", unverified(site.world))
    page.wait_for_selector("#job-log:has-text('No verification job log')")


@pytest.mark.parametrize("user", ["carol", None], ids=["contributor", "anonymous"])
def test_nobody_but_an_organizer_gets_the_log(site: Site, user: str | None) -> None:
    name = verified(site.world)
    page = open_result(site, PHONE, user, name)
    page.wait_for_selector("#job-log:has-text('organizers only')")
    assert SECRET not in page.content()
    # The route itself, asked with the page's own credentials, refuses and says nothing.
    answer = page.evaluate(
        """async (name) => { const token = sessionStorage.getItem('agenthub.dashboard.token');
        const r = await fetch('/dashboard/moderation/job-log/' + name + '?whole=true',
          {headers: token ? {Authorization: 'Bearer ' + token} : {}});
        return [r.status, await r.text()]; }""",
        name,
    )
    assert answer[0] == (403 if user else 401) and SECRET not in answer[1]


def test_the_standalone_dashboard_serves_the_log_to_the_organizer_only(site: Site) -> None:
    world, name = site.world, verified(site.world)
    with (
        live_server(create_dashboard_app(site.base)) as base,
        httpx.Client(base_url=base, timeout=30) as dashboard,
    ):
        tail = dashboard.get(f"/dashboard/moderation/job-log/{name}", headers=world.auth("boss"))
        assert tail.status_code == 200, tail.text
        assert (tail.json()["size"], tail.json()["complete"]) == (len(LOG), False)
        whole = dashboard.get(
            f"/dashboard/moderation/job-log/{name}",
            params={"whole": "true"},
            headers=world.auth("boss"),
        )
        assert whole.text == LOG and whole.headers["content-type"].startswith("text/plain")
        refused = dashboard.get(
            f"/dashboard/moderation/job-log/{name}", headers={**PAGE, **world.auth("carol")}
        )
        assert refused.status_code == 403 and SECRET not in refused.text
        bad = dashboard.get("/dashboard/moderation/job-log/..%2Fsecret", headers=world.auth("boss"))
        assert bad.status_code in (400, 404) and SECRET not in bad.text
