"""`/state/health` and the instance label: generated once, stored, stable across restarts."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text

from agenthub.db import make_engine
from agenthub.statehub import migrate
from agenthub.statehub.app import create_app
from agenthub.statehub.instance import stored_instance_label
from agenthub.statehub.settings import StateHubSettings
from agenthub.statehub.store import Database


def health_of(settings: StateHubSettings) -> dict[str, object]:
    with TestClient(create_app(settings)) as client:
        response = client.get("/state/health")
    assert response.status_code == 200
    body: dict[str, object] = response.json()
    return body


def test_health_reports_status_label_and_database(client: TestClient, engine: Engine) -> None:
    body = client.get("/state/health").json()

    assert body["status"] == "ok"
    assert body["instance_label"] == "test-hub"
    assert body["database"] == engine.dialect.name
    assert "high_water" in body


def test_instance_label_is_generated_on_first_start(empty_database_url: str) -> None:
    label = health_of(StateHubSettings(database_url=empty_database_url))["instance_label"]

    assert isinstance(label, str)
    assert re.fullmatch(r"statehub-[0-9a-f]{16}", label)


def test_instance_label_survives_a_restart(empty_database_url: str) -> None:
    settings = StateHubSettings(database_url=empty_database_url)
    first = health_of(settings)["instance_label"]

    second = health_of(settings)["instance_label"]

    assert second == first


def test_instance_label_is_kept_in_the_database(empty_database_url: str) -> None:
    label = health_of(StateHubSettings(database_url=empty_database_url))["instance_label"]

    engine = make_engine(empty_database_url)
    try:
        with engine.connect() as conn:
            stored: str = conn.execute(
                text("select value from statehub_meta where key = 'instance_label'")
            ).scalar_one()
    finally:
        engine.dispose()
    assert stored == label


def test_each_database_gets_its_own_label(tmp_path: Path) -> None:
    labels = {
        health_of(StateHubSettings(database_url=f"sqlite:///{tmp_path / name}"))["instance_label"]
        for name in ("a.db", "b.db")
    }

    assert len(labels) == 2


def test_statehub_instance_label_overrides_the_stored_one(
    empty_database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    generated = health_of(StateHubSettings(database_url=empty_database_url))["instance_label"]
    monkeypatch.setenv("STATEHUB_INSTANCE_LABEL", "hub-eu-1")
    monkeypatch.setenv("STATEHUB_DATABASE_URL", empty_database_url)

    overridden = health_of(StateHubSettings())["instance_label"]

    assert overridden == "hub-eu-1"
    monkeypatch.delenv("STATEHUB_INSTANCE_LABEL")
    assert health_of(StateHubSettings())["instance_label"] == generated


def test_workers_starting_at_once_agree_on_one_label(empty_database_url: str) -> None:
    engine = make_engine(empty_database_url)
    try:
        migrate.upgrade(engine)
        db = Database(engine)
        labels: list[str] = []
        barrier = threading.Barrier(4)

        def start() -> None:
            barrier.wait()
            labels.append(stored_instance_label(db))

        threads = [threading.Thread(target=start) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
    finally:
        engine.dispose()

    assert len(labels) == 4
    assert len(set(labels)) == 1
