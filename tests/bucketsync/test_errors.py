"""The uniform error body (§6), for domain, request-shape and routing errors."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from agenthub.bucketsync.errors import StorageUnavailable
from agenthub.bucketsync.storage.base import FileEntry
from tests.bucketsync.conftest import World

JSON = {"Content-Type": "application/json"}


def error_of(response: Any, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"}
    assert body["error"]["code"] == code
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    return body["error"]  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("method", "url", "kwargs"),
    [
        (
            "post",
            "/v1/messages",
            {"content": b"not json", "headers": {"Content-Type": "application/json"}},
        ),
        ("post", "/v1/messages", {"json": ["a", "list"]}),
        ("post", "/v1/messages", {"json": {"agent_id": 5, "body": {"x": 1}}}),
        ("post", "/v1/messages", {"json": {"source": "x", "unknown": 1}}),
        ("post", "/v1/agents/register", {"json": {}}),
        ("post", "/v1/agents/register", {"json": {"agent_id": "a", "tools": "notalist"}}),
    ],
)
def test_bs_6_1_request_shape_errors_use_the_uniform_body(
    world: World, method: str, url: str, kwargs: dict[str, Any]
) -> None:
    response = getattr(world.client, method)(url, **kwargs)
    error = error_of(response, 400, "INVALID_REQUEST")
    assert error["hint"]


def test_bs_6_1_unknown_routes_and_methods_use_the_uniform_body(world: World) -> None:
    error_of(world.client.get("/v1/nope"), 404, "NOT_FOUND")
    error_of(world.client.delete("/v1/messages"), 405, "METHOD_NOT_ALLOWED")


def test_bs_6_2_400_codes(world: World) -> None:
    world.agent("agent-1")
    error_of(world.client.post("/v1/messages", json={"source": "x"}), 400, "INVALID_PATH")
    error_of(world.client.get("/v1/messages?limit=0"), 400, "INVALID_QUERY")
    error_of(world.promote("agent-1", "m.md", "---\nbad: [\n---\n"), 400, "INVALID_FRONTMATTER")
    error_of(world.client.post("/v1/messages", json={}), 400, "BODY_OR_SOURCE_REQUIRED")


def test_bs_6_3_401(world: World) -> None:
    error_of(world.client.post("/v1/agents/register", json={"agent_id": "a"}), 401, "UNAUTHORIZED")


def test_bs_6_4_403_codes(world: World) -> None:
    world.user("alice")
    world._owner = {**world._owner, "agent-1": "alice"}
    world.create_bucket("agent-1", "alice")
    error_of(world.register("agent-1", "alice"), 403, "BUCKET_NOT_OWNED_BY_CALLER")
    world.user("bob")
    error_of(
        world.client.post(
            "/v1/messages", json={"agent_id": "human-alice", "body": "x"}, headers=world.auth("bob")
        ),
        403,
        "IDENTITY_MISMATCH",
    )


def test_bs_6_5_404_codes(world: World) -> None:
    world.agent("agent-1")
    error_of(world.client.get("/v1/agents/agent-9"), 404, "NOT_REGISTERED")
    error_of(world.client.get("/v1/messages/20260101-000000-000_x.md"), 404, "NOT_FOUND")
    error_of(
        world.client.post("/v1/messages", json={"source": world.uri("agent-1", "n.md")}),
        404,
        "SOURCE_NOT_FOUND",
    )


def test_bs_4_19_jobs_run_is_404_jobs_disabled(world: World) -> None:
    error_of(world.client.post("/v1/jobs:run", json={}), 404, "JOBS_DISABLED")
    listed = [e["path"] for e in world.client.get("/v1").json()["endpoints"]]
    assert "/v1/jobs:run" not in listed


def test_bs_6_6_409_codes(world: World) -> None:
    world.agent("agent-1", "alice")
    error_of(world.register("agent-1", "alice"), 409, "AGENT_ID_TAKEN")
    world.promote("agent-1", "m.md", "x")
    error_of(
        world.client.post("/v1/messages", json={"source": world.uri("agent-1", "m.md")}),
        409,
        "ALREADY_PROMOTED",
    )


def test_bs_6_7_412_hint_is_the_create_command(world: World) -> None:
    world.user("alice")
    error = error_of(world.register("agent-1", "alice"), 412, "BUCKET_MISSING")
    assert error["hint"] == "agenthub buckets create acme/chal-agent-1"


def test_bs_6_9_429_has_retry_after(world: World) -> None:
    world.agent("agent-1")
    for i in range(5):
        world.raw("agent-1", str(i))
    response = world.raw("agent-1", "over")
    error_of(response, 429, "RATE_LIMITED")
    assert int(response.headers["Retry-After"]) >= 1


class BrokenStore:
    """The real store, except that every read fails like an unreachable backend."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.broken = False

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            if self.broken:
                raise StorageUnavailable("backend unreachable")
            return attr(*args, **kwargs)

        return call


def test_bs_6_12_storage_failure_is_a_retryable_503_never_a_false_404(world: World) -> None:
    world.agent("agent-1")
    broken = BrokenStore(world.hub.store)
    world.hub.store = broken
    world.hub.read_model._store = broken
    world.hub.clock.advance(world.hub.settings.listing_ttl_s + 1)  # type: ignore[attr-defined]
    broken.broken = True
    for response in (
        world.client.get("/v1/messages"),
        world.client.get("/v1/agents/agent-1"),
        world.client.get("/v1/inbox/agent-1"),
        world.client.post("/v1/messages", json={"source": world.uri("agent-1", "m.md")}),
    ):
        error = error_of(response, 503, "STORAGE_UNAVAILABLE")
        assert error["message"]
        assert response.headers["Retry-After"]


def test_bs_6_1_unexpected_failures_use_the_uniform_body(world: World) -> None:
    def explode(_folder: str) -> dict[str, FileEntry]:
        raise RuntimeError("a bug")

    world.hub.read_model.entries = explode  # type: ignore[method-assign, assignment]
    client = TestClient(world.client.app, raise_server_exceptions=False)
    response = client.get("/v1/messages")
    error = error_of(response, 500, "INTERNAL")
    assert "a bug" not in error["message"]
