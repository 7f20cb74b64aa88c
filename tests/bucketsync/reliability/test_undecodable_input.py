"""Input no file can hold — a lone surrogate, a non-finite number — is a 4xx JSON error."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.bucketsync.conftest import World


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param('{"agent_id":"agent-1","body":"a\\ud800b"}', id="body"),
        pytest.param('{"agent_id":"agent-1","body":"x","type":"\\udc00"}', id="type"),
        pytest.param('{"agent_id":"agent-1","body":"x","refs":["\\ud800"]}', id="refs"),
        pytest.param('{"agent_id":"agent-1","body":NaN}', id="nan"),
        pytest.param('{"agent_id":"agent-1","body":"x","refs":[1e999]}', id="overflow"),
    ],
)
def test_raw_post_with_undecodable_text_is_a_json_400(world: World, payload: str) -> None:
    world.agent("agent-1")
    client = TestClient(world.client.app, raise_server_exceptions=False)
    response = client.post(
        "/v1/messages", content=payload.encode(), headers={"content-type": "application/json"}
    )
    assert response.status_code == 400
    assert response.headers["content-type"] == "application/json"
    assert response.json()["error"]["code"] == "INVALID_REQUEST"
    assert world.client.get("/v1/messages").json()["items"] == []
