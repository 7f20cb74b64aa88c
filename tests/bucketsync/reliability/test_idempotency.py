"""`Idempotency-Key` on POST: one answer per key and body, 409 for another body, one
execution for concurrent duplicates, and the answer survives a restart — as does the
promotion dedup."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from agenthub.bucketsync.app import create_app
from agenthub.bucketsync.core import journal
from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.errors import StorageUnavailable
from agenthub.bucketsync.identity.local import LocalIdentity
from agenthub.bucketsync.storage.base import Batch
from agenthub.bucketsync.storage.local import LocalBucketStore
from agenthub.clock import FrozenClock
from tests.bucketsync.conftest import ORG, World, make_settings


def board(world: World) -> list[str]:
    items: list[str] = world.client.get("/v1/messages", params={"limit": 100}).json()["items"]
    return items


def post(world: World, key: str, body: str = "hello") -> tuple[int, dict[str, object]]:
    response = world.client.post(
        "/v1/messages",
        json={"agent_id": "agent-1", "body": body},
        headers={"Idempotency-Key": key},
    )
    return response.status_code, response.json()


def test_same_key_and_body_get_the_first_answer(world: World) -> None:
    world.agent("agent-1")
    first = post(world, "k-1")
    again = world.client.post(
        "/v1/messages",
        json={"agent_id": "agent-1", "body": "hello"},
        headers={"Idempotency-Key": "k-1"},
    )
    assert first[0] == 201
    assert (again.status_code, again.json()) == first
    assert again.headers["Idempotent-Replayed"] == "true"
    assert len(board(world)) == 1


def test_same_key_with_another_body_is_409(world: World) -> None:
    world.agent("agent-1")
    assert post(world, "k-1")[0] == 201
    status, body = post(world, "k-1", body="something else")
    assert status == 409
    assert body["error"]["code"] == "CONFLICT"  # type: ignore[index]
    assert len(board(world)) == 1


def test_without_a_key_every_post_counts(world: World) -> None:
    world.agent("agent-1")
    for _ in range(2):
        assert world.raw("agent-1", "hello").status_code == 201
    assert len(board(world)) == 2


def test_a_failed_request_does_not_burn_the_key(world: World) -> None:
    world.agent("agent-1")
    refused = world.client.post(
        "/v1/messages", json={"agent_id": "agent-9", "body": "x"}, headers={"Idempotency-Key": "k"}
    )
    assert refused.status_code == 404
    again = world.client.post(
        "/v1/messages", json={"agent_id": "agent-9", "body": "x"}, headers={"Idempotency-Key": "k"}
    )
    assert again.status_code == 404


def test_concurrent_duplicates_are_executed_once(world: World) -> None:
    world.agent("agent-1")
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _i: post(world, "same", body="once"), range(8)))
    assert {status for status, _ in answers} == {201}
    assert len({str(body) for _, body in answers}) == 1
    assert len(board(world)) == 1


def restarted(tmp_path: Path) -> TestClient:
    settings = make_settings(tmp_path / "data")
    clock = FrozenClock()
    app = create_app(
        settings,
        store=LocalBucketStore(settings.data_dir, clock=clock),
        identity=LocalIdentity(settings.data_dir / "users.json", org=ORG),
        clock=clock,
    )
    return TestClient(app)


def test_the_answer_and_the_dedup_survive_a_restart(tmp_path: Path) -> None:
    with restarted(tmp_path) as client:
        world = World(client, client.app.state.hub, client.app.state.hub.identity)  # type: ignore[attr-defined]
        world.agent("agent-1")
        first = post(world, "k-1")
        promoted = world.promote("agent-1", "note.md", "a note")
        assert promoted.status_code == 201
    with restarted(tmp_path) as client:
        world = World(client, client.app.state.hub, client.app.state.hub.identity)  # type: ignore[attr-defined]
        assert post(world, "k-1") == first
        again = client.post("/v1/messages", json={"source": world.uri("agent-1", "note.md")})
        assert again.status_code == 409
        assert again.json()["error"]["filename"] == promoted.json()["filename"]
        assert len(board(world)) == 2


def test_an_abandoned_post_whose_board_file_landed_is_completed_at_start(
    tmp_path: Path,
) -> None:
    with restarted(tmp_path) as client:
        world = World(client, client.app.state.hub, client.app.state.hub.identity)  # type: ignore[attr-defined]
        world.agent("agent-1")
        world.agent("agent-2")
        hub = world.hub
        # A post killed after its board file: the journal entry is all that is left.
        entry = journal.Entry(
            write_id=hub.audit.new_write_id(),
            board_path="message_board/20260101-000000-000_agent-1.md",
            derived=[("inbox/agent-2/20260101-000000-000_agent-1.md", b"hi @agent-2\n")],
            audit_row=hub.audit.row(
                agent_id="agent-1",
                route="/v1/messages",
                via="raw",
                source=None,
                target_path="message_board/20260101-000000-000_agent-1.md",
                size=12,
                status_code=201,
            ),
            answer={"filename": "20260101-000000-000_agent-1.md"},
            pid=1 << 22,  # no such process
            host=journal.owner()[1],
            at=hub.clock.now().timestamp(),
        )
        entry.audit_row["write_id"] = entry.write_id
        journal.begin(hub, entry)
        hub.write_central([(entry.board_path, b"hi @agent-2\n")])
        orphan = journal.Entry(
            **{
                **entry.__dict__,
                "write_id": hub.audit.new_write_id(),
                "board_path": "message_board/20260101-000000-001_agent-1.md",
                "derived": [("inbox/agent-2/20260101-000000-001_agent-1.md", b"x")],
            }
        )
        journal.begin(hub, orphan)
        hub.store.write_batch(hub.central, Batch(adds=orphan.derived))
    with restarted(tmp_path) as client:
        hub = client.app.state.hub  # type: ignore[attr-defined]
        assert hub.store.read(hub.central, entry.derived[0][0]) is not None
        assert hub.store.read(hub.central, orphan.derived[0][0]) is None
        assert hub.audit.has_row(f"{hub.clock.now():%Y%m}", entry.write_id)
        assert hub.store.list(hub.settings.audit_bucket, journal.JOURNAL) == []


def test_a_refusing_audit_bucket_never_fails_a_post(world: World) -> None:
    world.agent("agent-1")
    store = world.hub.store
    original = store.write_batch

    def refusing(bucket: str, batch: Batch) -> None:
        if bucket == world.hub.settings.audit_bucket:
            raise StorageUnavailable("audit bucket down")
        original(bucket, batch)

    store.write_batch = refusing  # type: ignore[method-assign]
    assert post(world, "k-1")[0] == 201
    assert len(board(world)) == 1
    assert world.hub.audit.failures >= 1


RESULT = "---\nscore: 0.9\nmethod: m\nstatus: agent-run\ndescription: d\n---\nran it\n"
CLAIM = "---\nidea: label smoothing 0.1 on the baseline\nttl_hours: 6\n---\ntrying it\n"
# The journaled promotions: (route, the file promoted, its central folder).
JOURNALED = {
    "result": ("/v1/results", RESULT, "results/"),
    "claim": ("/v1/claims", CLAIM, "claims/"),
}


class Killed(Exception):
    """The process dying between a record and its answer being recorded."""


def killed_before_its_answer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str) -> str:
    """POST a `kind` with key r-1 whose process 'dies' right after the record, audit row
    and dedup landed, before the journal completes (the answer is not recorded); returns
    the source URI to retry with."""
    route, text, folder = JOURNALED[kind]
    with restarted(tmp_path) as client:
        world = World(client, client.app.state.hub, client.app.state.hub.identity)  # type: ignore[attr-defined]
        world.agent("agent-1")
        assert world.put("agent-1", "r.md", text).status_code == 201
        uri = world.uri("agent-1", "r.md")

        begin = journal.begin

        def die(hub: Hub, entry: journal.Entry, *, audit: bool = False) -> None:
            # This process lives on: its entry is made to name one that has ended.
            begin(hub, replace(entry, pid=1 << 22, holder=""))
            raise Killed

        with monkeypatch.context() as patched:
            patched.setattr(journal, "complete", die)
            with pytest.raises(Killed):
                client.post(route, json={"source": uri}, headers={"Idempotency-Key": "r-1"})
        assert stored_in(world.hub, folder)
    return uri


def stored_in(hub: Hub, folder: str) -> list[str]:
    return [f.path for f in hub.store.list(hub.central, folder) if f.path.endswith(".md")]


def retried_after_restart(
    tmp_path: Path, uri: str, kind: str
) -> tuple[int, dict[str, object], list[str]]:
    route, _text, folder = JOURNALED[kind]
    with restarted(tmp_path) as client:
        hub = client.app.state.hub  # type: ignore[attr-defined]
        retry = client.post(route, json={"source": uri}, headers={"Idempotency-Key": "r-1"})
        return retry.status_code, retry.json(), stored_in(hub, folder)


def test_a_result_whose_answer_a_crash_lost_is_replayed_after_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri = killed_before_its_answer(tmp_path, monkeypatch, "result")

    status, body, stored = retried_after_restart(tmp_path, uri, "result")

    assert status == 201, body
    assert stored == [f"results/{body['filename']}"]
    assert body == {"filename": body["filename"], "via": "bucket", "path": stored[0]}


def test_a_claim_whose_answer_a_crash_lost_is_replayed_after_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri = killed_before_its_answer(tmp_path, monkeypatch, "claim")

    status, body, stored = retried_after_restart(tmp_path, uri, "claim")

    assert status == 201, body
    assert stored == [f"claims/{body['filename']}"]
    assert body["path"] == stored[0] and body["via"] == "bucket"
    assert {"expires_at", "near_duplicates", "overlap_owners"} <= body.keys()


@pytest.mark.parametrize("kind", sorted(JOURNALED))
def test_broken_variant_an_unjournaled_promotion_is_not_answered_after_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """Without its journal entry (results before issue 31, claims until now) the same
    crash leaves nothing to answer the retry with: it runs again, or is refused as a
    repeat, instead of getting the first answer."""
    monkeypatch.setattr(journal, "begin", lambda _hub, _entry: None)
    uri = killed_before_its_answer(tmp_path, monkeypatch, kind)
    monkeypatch.undo()

    status, _body, stored = retried_after_restart(tmp_path, uri, kind)

    assert (status, len(stored)) != (201, 1)
