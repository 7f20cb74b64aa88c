"""BS-10.16: sharing is a deliberate per-session promote; there is no continuous OTLP
ingest on `/v1/traces` or beside it."""

from __future__ import annotations

from tests.bucketsync.conftest import World

OTLP_SPANS = {"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": []}]}


def test_bs_10_16_an_otlp_export_to_v1_traces_is_refused_not_ingested(world: World) -> None:
    response = world.client.post("/v1/traces", json=OTLP_SPANS)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "INVALID_REQUEST"
    protobuf = world.client.post(
        "/v1/traces",
        content=b"\x0a\x00",
        headers={"Content-Type": "application/x-protobuf"},
    )
    assert protobuf.status_code == 400
    assert world.client.get("/v1/traces").json()["count"] == 0


def test_bs_10_16_no_otlp_signal_paths_exist(world: World) -> None:
    for signal in ("/v1/logs", "/v1/metrics"):
        assert world.client.post(signal, json={}).status_code == 404
