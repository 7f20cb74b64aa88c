"""The audit log (§8): one JSON line per write, two-org vs single-org, never fatal."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from agenthub.bucketsync.app import create_app
from agenthub.bucketsync.errors import StorageUnavailable
from agenthub.bucketsync.identity.local import LocalIdentity
from agenthub.bucketsync.storage.local import LocalBucketStore
from agenthub.clock import FrozenClock
from tests.bucketsync.conftest import ORG, World, make_settings


def audit_rows(world: World) -> list[dict[str, Any]]:
    data = world.hub.store.read(world.hub.settings.audit_bucket, world.hub.audit.path_for_now())
    return [json.loads(line) for line in (data or b"").decode().splitlines()]


def test_bs_8_1_one_record_per_write_with_route_fields(world: World) -> None:
    world.agent("agent-1")
    world.agent("agent-2")
    world.promote("agent-1", "m.md", "hi @agent-2")
    rows = audit_rows(world)
    assert [row["route"] for row in rows] == [
        "/v1/agents/register",
        "/v1/agents/register",
        "/v1/messages",
    ]
    row = rows[-1]
    for key in ("ts", "agent_id", "route", "via", "source", "target_path", "bytes", "status_code"):
        assert key in row
    assert row["mentions_delivered"] == ["agent-2"]
    assert row["source"] == world.uri("agent-1", "m.md")
    assert row["status_code"] == 201


def test_bs_1_21_bs_8_2_log_lives_in_the_audit_bucket_by_month(world: World) -> None:
    world.agent("agent-1")
    assert world.hub.audit.path_for_now() == "audit/202603.jsonl"
    assert world.hub.store.read(world.hub.central, "audit/202603.jsonl") is None
    info = world.hub.store.info(world.hub.settings.audit_bucket)
    assert info is not None and info.private


def test_bs_4_37_bs_8_3_two_org_mode_records_caller_ip_and_user_agent(world: World) -> None:
    world.agent("agent-1")
    world.client.post(
        "/v1/messages", json={"agent_id": "agent-1", "body": "x"}, headers={"User-Agent": "probe/1"}
    )
    row = audit_rows(world)[-1]
    assert row["caller_ip"] == "testclient"
    assert row["user_agent"] == "probe/1"


def test_bs_8_4_single_org_mode_omits_caller_details(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "d", AUDIT_BUCKET=f"{ORG}/chal-audit")
    assert not settings.audit_two_org
    clock = FrozenClock()
    app = create_app(
        settings,
        store=LocalBucketStore(settings.data_dir, clock=clock),
        identity=LocalIdentity(settings.data_dir / "users.json", org=ORG),
        clock=clock,
    )
    with TestClient(app) as client:
        world = World(client, app.state.hub, app.state.hub.identity)
        world.agent("agent-1")
        world.raw("agent-1", "x")
        rows = audit_rows(world)
    assert rows and all("caller_ip" not in r and "user_agent" not in r for r in rows)


def test_bs_8_5_audit_failure_never_fails_the_request_and_is_counted(world: World) -> None:
    world.agent("agent-1")
    store = world.hub.store
    assert isinstance(store, LocalBucketStore)
    original = store.append

    def failing(bucket: str, path: str, data: bytes) -> None:
        if bucket == world.hub.settings.audit_bucket:
            raise StorageUnavailable("audit bucket down")
        original(bucket, path, data)

    store.append = failing  # type: ignore[method-assign]
    response = world.raw("agent-1", "still delivered")
    assert response.status_code == 201
    assert world.hub.audit.failures == 1
    assert "audit bucket down" in (world.hub.audit.last_error or "")
    health = world.client.get("/v1/healthz").json()
    assert health["audit"]["failures"] == 1


def test_bs_8_2_concurrent_appends_are_serialized_none_lost(world: World) -> None:
    from concurrent.futures import ThreadPoolExecutor

    audit = world.hub.audit
    before = len(audit_rows(world))

    def write(index: int) -> bool:
        return audit.record(
            agent_id=f"a{index}",
            route="/t",
            via="raw",
            source=None,
            target_path="x",
            size=1,
            status_code=201,
        )

    with ThreadPoolExecutor(max_workers=16) as pool:
        assert all(pool.map(write, range(64)))
    assert len(audit_rows(world)) == before + 64


def test_audit_appends_read_the_month_file_once(world: World) -> None:
    world.agent("agent-1")
    reads: list[str] = []
    store = world.hub.audit._store
    original = store.read

    def counting(bucket: str, path: str) -> bytes | None:
        if bucket == world.hub.settings.audit_bucket:
            reads.append(path)
        return original(bucket, path)

    store.read = counting  # type: ignore[method-assign]
    for index in range(5):
        world.raw("agent-1", f"m{index}")
    assert reads == []  # the registration's append already made the file known
    assert len(audit_rows(world)) == 6
