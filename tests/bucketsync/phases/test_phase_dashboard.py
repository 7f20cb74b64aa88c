"""The dashboard in Chromium: the header counts the phase down second by second, and the
final leaderboard page stays sealed until the reveal, then shows the private split."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import httpx

from agenthub.bucketsync.app import create_app
from agenthub.bucketsync.identity.local import LocalIdentity
from agenthub.bucketsync.storage.base import Batch
from agenthub.bucketsync.storage.local import LocalBucketStore
from agenthub.clock import FrozenClock
from tests.bucketsync.conftest import ORG
from tests.bucketsync.dashboard.browser import chromium
from tests.bucketsync.phases.conftest import DEV_START, REVEAL, PhaseWorld, phase_settings
from tests.support.servers import live_server

TIMEOUT_MS = 10_000


def test_the_header_counts_down_and_the_final_page_opens_at_the_reveal(tmp_path: Path) -> None:
    settings = phase_settings(tmp_path / "data")
    clock = FrozenClock(DEV_START + timedelta(hours=1))
    store = LocalBucketStore(settings.data_dir, clock=clock)
    identity = LocalIdentity(settings.data_dir / "users.json", org=ORG)
    app = create_app(settings, store=store, identity=identity, clock=clock)
    with live_server(app) as base, httpx.Client(base_url=base, timeout=30) as client:
        world = PhaseWorld(client, app.state.hub, identity)  # type: ignore[arg-type]
        world.clock = clock
        store.write_batch(settings.audit_bucket, Batch(adds=[("private/x", b"1")]))
        world.agent("ada")
        world.result("ada", 0.61, 0.987654)
        world.evaluate()
        with chromium() as browser:
            page = browser.new_page(base_url=base)
            page.set_default_timeout(TIMEOUT_MS)
            page.goto("/dashboard#/final")
            page.wait_for_selector("#phase:not([hidden])")
            first = page.inner_text("#phase")
            page.wait_for_function(
                "text => document.querySelector('#phase').innerText !== text", arg=first
            )
            ticked = page.inner_text("#phase")
            sealed = page.inner_text("#view")

            world.at(REVEAL)
            page.reload()
            page.wait_for_selector("#view table tbody tr")
            revealed = page.inner_text("#phase")
            final_row = page.inner_text("#view table tbody tr")
            page.screenshot(path=str(tmp_path / "final.png"), full_page=True)

    # The server's clock stands at 10 h left; the page counts down from its read.
    assert re.match(r"Phase dev · (10h 0m 00s|9h 59m [45]\ds) left · results open", first)
    assert "private split sealed until 2026-03-03 00:00:00Z" in first
    assert re.match(r"Phase dev · 9h 59m [45]\ds left", ticked)  # it ticks between polls
    assert "Sealed until 2026-03-03 00:00:00Z" in sealed and "0.9877" not in sealed
    assert revealed.startswith("Phase final · ") and "private split revealed" in revealed
    assert "final leaderboard" in revealed
    assert final_row.split("\t")[:4] == ["1", "ada", "0.9877", "0.6100"]
