"""Dashboard sign-ins shared by every worker (BUCKETSYNC_BUS_URL): two apps on one Redis,
like two workers or two hosts behind one address. A sign-in started on one finishes on the
other, the session is valid on both, and signing out on one ends it on both. Without the
bus each worker keeps its own: the broken variant, where the other worker knows nothing."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from agenthub.bucketsync.dashboard.routes import SESSION_COOKIE, STATE_COOKIE
from agenthub.clock import FrozenClock
from tests.bucketsync.conftest import make_settings
from tests.bucketsync.dashboard.test_dashboard_oauth import (
    OAUTH,
    LocalAuthServer,
    Site,
    failure_of,
    open_site,
)
from tests.support.redisdb import drop_prefix, require_redis, unique_prefix

pytestmark = pytest.mark.redis


def two_sites(tmp_path: Path, clock: FrozenClock, **bus: str) -> Iterator[tuple[Site, Site]]:
    settings = make_settings(tmp_path / "data", **OAUTH, **bus)
    auth = LocalAuthServer()
    with ExitStack() as stack:
        yield open_site(stack, settings, auth, clock), open_site(stack, settings, auth, clock)


@pytest.fixture
def shared(tmp_path: Path, clock: FrozenClock) -> Iterator[tuple[Site, Site]]:
    url, prefix = require_redis(), unique_prefix()
    try:
        yield from two_sites(tmp_path, clock, BUCKETSYNC_BUS_URL=url, BUCKETSYNC_BUS_PREFIX=prefix)
    finally:
        drop_prefix(url, prefix)


def finish_on(site: Site, state: str, code: str, cookie_state: str) -> str:
    site.client.cookies.set(STATE_COOKIE, cookie_state, path="/dashboard/oauth")
    response = site.callback(code=code, state=state)
    assert response.headers["location"] == "/dashboard", response.headers["location"]
    sid = response.cookies.get(SESSION_COOKIE)
    assert sid
    return str(sid)


def me_with(site: Site, sid: str) -> int:
    site.client.cookies.set(SESSION_COOKIE, sid, path="/dashboard")
    return site.client.get("/dashboard/api/v1/me").status_code


def test_a_sign_in_started_on_one_worker_is_valid_on_both(shared: tuple[Site, Site]) -> None:
    a, b = shared
    code = a.grant("dora")
    state = a.login()
    sid = finish_on(b, state, code, state)
    assert me_with(a, sid) == 200 and me_with(b, sid) == 200
    a.client.cookies.set(SESSION_COOKIE, sid, path="/dashboard")
    assert a.client.post("/dashboard/oauth/logout").json() == {"signed_out": True}
    assert me_with(b, sid) == 401


def test_a_state_is_used_once_across_workers(shared: tuple[Site, Site]) -> None:
    a, b = shared
    state = a.login()
    finish_on(b, state, a.grant("erin"), state)
    a.client.cookies.set(STATE_COOKIE, state, path="/dashboard/oauth")
    assert "already used" in failure_of(a.callback(code=a.grant("erin"), state=state))


def test_broken_variant_without_the_bus_the_other_worker_knows_no_sign_in(
    tmp_path: Path, clock: FrozenClock
) -> None:
    for a, b in two_sites(tmp_path, clock):
        state = a.login()
        b.client.cookies.set(STATE_COOKIE, state, path="/dashboard/oauth")
        assert "expired or was already used" in failure_of(
            b.callback(code=a.grant("fay"), state=state)
        )
