"""Taskforces on agent-collabs' wire, against a real server on loopback: for each request
agent-collabs' route tests make (`backend/tests/test_taskforces_api.py`, the digest's
block), the status, the error code and the body. Plus what every write of ours has (the
audit row, Idempotency-Key replay, rate-limit headers) and the README invariant."""

from __future__ import annotations

from typing import Any

from agenthub.bucketsync.taskforces.write import marker
from agenthub.clock import FrozenClock
from tests.bucketsync.compat.shapes import (
    LISTING,
    TASKFORCE_CREATED,
    TASKFORCE_DETAIL,
    TASKFORCE_DIGEST,
    TASKFORCE_POSTED,
    TASKFORCE_SUMMARY,
    has,
)
from tests.bucketsync.conftest import World, message

KR = "kernel-research"
README = "# Kernel Research\n\nMaking attention kernels go fast."


def create(world: World, name: str = KR, agent: str = "agent-1", body: str = README) -> Any:
    return world.client.post("/v1/taskforces", json={"name": name, "agent_id": agent, "body": body})


def note(world: World, agent: str, body: str, name: str = KR) -> Any:
    return world.client.post(f"/v1/taskforces/{name}/files", json={"agent_id": agent, "body": body})


def named(world: World, agent: str, path: str, data: str, dest_path: str) -> Any:
    assert world.put(agent, path, data).status_code == 201
    return world.client.post(
        f"/v1/taskforces/{KR}/files",
        json={"source": world.uri(agent, path), "dest_path": dest_path},
    )


def error_code(response: Any, status: int) -> str:
    assert response.status_code == status, response.text
    code: str = response.json()["error"]["code"]
    return code


def central(world: World, path: str) -> str:
    data = world.hub.store.read(world.hub.central, path)
    assert data is not None, path
    return data.decode()


# -- creation ---------------------------------------------------------------------------------


def test_creating_writes_the_readme_and_announces_nothing(served: World) -> None:
    served.agent("agent-1")
    created = create(served)
    assert created.status_code == 201
    assert created.json() == {
        "name": KR,
        "via": "raw",
        "path": f"taskforces/{KR}/README.md",
        "created": True,
    }
    has(created.json(), TASKFORCE_CREATED)
    readme = central(served, f"taskforces/{KR}/README.md")
    assert "creator: agent-1" in readme and f"taskforce: {KR}" in readme
    assert "Making attention kernels go fast." in readme
    assert served.client.get("/v1/messages").json()["count"] == 0


def test_a_readme_from_the_bucket_keeps_its_keys_but_not_a_spoofed_creator(
    served: World,
) -> None:
    served.agent("agent-1")
    served.put("agent-1", "tf/readme.md", message("All things kernels.", title="K", creator="x"))
    created = served.client.post(
        "/v1/taskforces", json={"name": KR, "source": served.uri("agent-1", "tf/readme.md")}
    )
    assert created.status_code == 201 and created.json()["via"] == "bucket"
    readme = central(served, f"taskforces/{KR}/README.md")
    assert "title: K" in readme and "creator: agent-1" in readme
    assert "creator: x" not in readme


def test_creating_needs_a_registered_agent_and_a_valid_name(served: World) -> None:
    assert error_code(create(served), 404) == "NOT_REGISTERED"
    served.agent("agent-1")
    assert error_code(create(served, name="-bad-"), 400) == "INVALID_PATH"
    upper = create(served, name="Kernels")
    assert error_code(upper, 400) == "INVALID_PATH"
    assert "'kernels'" in upper.json()["error"]["hint"]


def test_only_the_creator_updates_the_readme(served: World, clock: FrozenClock) -> None:
    served.agent("agent-1")
    served.agent("agent-2")
    assert create(served).status_code == 201
    first = served.client.get(f"/v1/taskforces/{KR}").json()
    taken = create(served, agent="agent-2", body="mine now")
    assert error_code(taken, 409) == "TASKFORCE_EXISTS"
    assert "agent-1" in taken.json()["error"]["message"]
    clock.advance(60)
    updated = create(served, body="# Kernel Research\n\nNow with a roadmap.")
    assert updated.status_code == 200 and updated.json()["created"] is False
    detail = served.client.get(f"/v1/taskforces/{KR}").json()
    assert detail["created"] == first["created"] and detail["updated"] is not None
    assert "roadmap" in detail["readme"]["body"]


# -- contributions ----------------------------------------------------------------------------


def test_a_raw_note_is_stamped_and_listed_as_a_note(served: World) -> None:
    served.agent("agent-1")
    create(served)
    posted = note(served, "agent-1", "Profiled the baseline: 40% in attention.")
    assert posted.status_code == 201
    has(posted.json(), TASKFORCE_POSTED)
    assert posted.json()["kind"] == "note" and posted.json()["filename"].endswith("_agent-1.md")
    notes = served.client.get(f"/v1/taskforces/{KR}/notes?expand=true").json()
    has(notes, LISTING)
    assert notes["matched"] == 1
    fm = notes["items"][0]["frontmatter"]
    assert (fm["taskforce"], fm["type"], fm["via"]) == (KR, "note", "raw")


def test_the_same_bucket_note_twice_is_already_promoted(served: World) -> None:
    served.agent("agent-1")
    create(served)
    served.put("agent-1", "notes/profile.md", "kernel profiling notes")
    source = {"source": served.uri("agent-1", "notes/profile.md")}
    first = served.client.post(f"/v1/taskforces/{KR}/files", json=source)
    assert first.status_code == 201 and first.json()["via"] == "bucket"
    again = served.client.post(f"/v1/taskforces/{KR}/files", json=source)
    assert error_code(again, 409) == "ALREADY_PROMOTED"


def test_a_named_file_round_trips_byte_for_byte_and_is_no_note(served: World) -> None:
    served.agent("agent-1")
    create(served)
    posted = named(
        served, "agent-1", "out/profile.json", '{"tps": 123}', "profiles/fa_agent-1.json"
    )
    assert posted.status_code == 201
    assert posted.json() == {
        "kind": "file",
        "filename": "profiles/fa_agent-1.json",
        "via": "bucket",
        "path": f"taskforces/{KR}/profiles/fa_agent-1.json",
    }
    files = served.client.get(f"/v1/taskforces/{KR}/files").json()
    assert {f["path"] for f in files["items"]} == {"README.md", "profiles/fa_agent-1.json"}
    assert files["count"] == 2
    raw = served.client.get(f"/v1/taskforces/{KR}/files/profiles/fa_agent-1.json")
    assert raw.status_code == 200 and raw.content == b'{"tps": 123}'
    assert raw.headers["content-type"].startswith("application/json")
    assert served.client.get(f"/v1/taskforces/{KR}/notes").json()["matched"] == 0


def test_a_named_markdown_file_reads_as_a_note(served: World) -> None:
    served.agent("agent-1")
    create(served)
    survey = message("Long-form kernel survey.", type="survey")
    assert named(served, "agent-1", "out/s.md", survey, "survey_agent-1.md").status_code == 201
    notes = served.client.get(f"/v1/taskforces/{KR}/notes?expand=true&q=survey").json()
    assert notes["matched"] == 1 and notes["items"][0]["filename"] == "survey_agent-1.md"


def test_a_named_file_must_carry_the_authors_marker(served: World) -> None:
    served.agent("agent-1")
    create(served)
    bare = named(served, "agent-1", "out/p.json", "{}", "profile.json")
    assert error_code(bare, 400) == "INVALID_PATH"
    assert "_agent-1" in bare.json()["error"]["message"]
    # agent-10's marker is not agent-1's: a plain substring test would take it.
    assert "_agent-1" in "p_agent-10.json" and marker("agent-1").search("p_agent-10.json") is None
    assert named(served, "agent-1", "out/p.json", "{}", "p_agent-10.json").status_code == 400


def test_the_readme_name_is_reserved_for_named_files(served: World) -> None:
    served.agent("agent-1")
    create(served)
    takeover = named(served, "agent-1", "out/readme.md", "takeover", "docs_agent-1/README.md")
    assert error_code(takeover, 400) == "INVALID_PATH"
    assert "reserved" in takeover.json()["error"]["message"]


def test_contributing_needs_the_taskforce_and_a_registration(served: World) -> None:
    served.agent("agent-1")
    assert error_code(note(served, "agent-1", "hello?", name="nope"), 404) == "TASKFORCE_NOT_FOUND"
    create(served)
    assert error_code(note(served, "ghost", "drive-by"), 404) == "NOT_REGISTERED"


# -- discovery --------------------------------------------------------------------------------


def test_the_list_puts_the_most_recently_active_first(served: World, clock: FrozenClock) -> None:
    served.agent("agent-1")
    served.agent("agent-2")
    create(served)
    clock.advance(60)
    create(served, name="eval-tooling", agent="agent-2", body="# Evals\n\nBetter eval harnesses.")
    clock.advance(60)
    note(served, "agent-2", "joining in")
    listing = served.client.get("/v1/taskforces").json()
    assert (listing["count"], listing["matched"]) == (2, 2)
    assert [t["name"] for t in listing["items"]] == [KR, "eval-tooling"]
    for item in listing["items"]:
        has(item, TASKFORCE_SUMMARY)
    kr, evals = listing["items"]
    assert kr["creator"] == "agent-1" and kr["contributors"] == ["agent-1", "agent-2"]
    assert kr["note_count"] == 1 and kr["last_activity"] == "20260301-120200-000"
    assert kr["readme_excerpt"] == "Making attention kernels go fast."
    assert evals["contributors"] == ["agent-2"] and evals["last_activity"] is None
    found = served.client.get("/v1/taskforces", params={"q": "eval harnesses"}).json()
    assert found["matched"] == 1 and found["items"][0]["name"] == "eval-tooling"
    assert served.client.get("/v1/taskforces?limit=1").json()["items"][0]["name"] == KR


def test_the_detail_has_the_readme_contributors_and_recent_notes(served: World) -> None:
    served.agent("agent-1")
    served.agent("agent-2")
    create(served)
    note(served, "agent-2", "fused kernel draft attached")
    named(served, "agent-2", "out/k.cu", "__global__", "kernels/fused_agent-2.cu")
    detail = served.client.get(f"/v1/taskforces/{KR}").json()
    has(detail, TASKFORCE_DETAIL)
    assert (detail["name"], detail["creator"]) == (KR, "agent-1")
    assert detail["contributors"] == ["agent-1", "agent-2"]
    assert (detail["note_count"], detail["file_count"]) == (1, 3)
    assert detail["readme"]["body"].startswith("# Kernel Research")
    assert detail["recent_notes"][0]["body"].strip() == "fused kernel draft attached"
    assert error_code(served.client.get("/v1/taskforces/nope"), 404) == "TASKFORCE_NOT_FOUND"


def test_notes_take_the_list_grammar(served: World) -> None:
    served.agent("agent-1")
    served.agent("agent-2")
    create(served)
    note(served, "agent-1", "first note")
    note(served, "agent-2", "second note")
    mine = served.client.get(f"/v1/taskforces/{KR}/notes?agent=agent-2&expand=true").json()
    assert mine["matched"] == 1 and mine["items"][0]["body"].strip() == "second note"
    first = served.client.get(f"/v1/taskforces/{KR}/notes?limit=1&order=asc").json()
    rest = served.client.get(f"/v1/taskforces/{KR}/notes?after={first['next']}").json()
    assert len(first["items"]) == len(rest["items"]) == 1


def test_a_missing_file_is_not_found(served: World) -> None:
    served.agent("agent-1")
    create(served)
    missing = served.client.get(f"/v1/taskforces/{KR}/files/nope.txt")
    assert error_code(missing, 404) == "NOT_FOUND"


def test_a_folder_without_a_readme_is_no_taskforce(served: World) -> None:
    served.hub.write_central([("taskforces/orphan/notes_x.md", b"left behind")])
    assert served.client.get("/v1/taskforces").json()["count"] == 0
    orphan = served.client.get("/v1/taskforces/orphan/files")
    assert error_code(orphan, 404) == "TASKFORCE_NOT_FOUND"


def test_the_digest_counts_taskforces_and_names_the_newest(
    served: World, clock: FrozenClock
) -> None:
    served.agent("agent-1")
    create(served)
    clock.advance(60)
    create(served, name="eval-tooling")
    block = served.client.get("/v1/digest").json()["taskforces"]
    has(block, TASKFORCE_DIGEST)
    assert block == {"count": 2, "newest": ["eval-tooling", KR]}


def test_get_v1_lists_every_taskforce_route(served: World) -> None:
    doc = served.client.get("/v1").json()
    routes = {(e["method"], e["path"]) for e in doc["endpoints"]}
    assert {
        ("GET", "/v1/taskforces"),
        ("POST", "/v1/taskforces"),
        ("GET", "/v1/taskforces/{name}"),
        ("POST", "/v1/taskforces/{name}/files"),
        ("GET", "/v1/taskforces/{name}/notes"),
        ("GET", "/v1/taskforces/{name}/files"),
        ("GET", "/v1/taskforces/{name}/files/{path}"),
    } <= routes
    assert "taskforces/" in doc["conventions"]["taskforces"]


# -- what every write of ours has -------------------------------------------------------------


def test_each_taskforce_write_is_audited(served: World, clock: FrozenClock) -> None:
    served.agent("agent-1")
    create(served)
    note(served, "agent-1", "a note")
    named(served, "agent-1", "out/p.json", "{}", "p_agent-1.json")
    rows = served.hub.audit.rows(clock.now().strftime("%Y%m"))
    mine = [r for r in rows if r["route"].startswith("/v1/taskforces")]
    assert [(r["route"], r["kind"], r["status_code"]) for r in mine] == [
        ("/v1/taskforces", "readme", 201),
        ("/v1/taskforces/{name}/files", "note", 201),
        ("/v1/taskforces/{name}/files", "file", 201),
    ]
    assert all(r["taskforce"] == KR and r["agent_id"] == "agent-1" for r in mine)
    assert mine[-1]["source"] == served.uri("agent-1", "out/p.json")


def test_a_retried_contribution_with_its_idempotency_key_lands_once(served: World) -> None:
    served.agent("agent-1")
    create(served)
    headers = {"Idempotency-Key": "retry-1"}
    body = {"agent_id": "agent-1", "body": "only once"}
    first = served.client.post(f"/v1/taskforces/{KR}/files", json=body, headers=headers)
    again = served.client.post(f"/v1/taskforces/{KR}/files", json=body, headers=headers)
    assert first.status_code == again.status_code == 201
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json() == first.json()
    assert served.client.get(f"/v1/taskforces/{KR}/notes").json()["count"] == 1


def test_raw_taskforce_writes_spend_the_raw_message_limit(served: World) -> None:
    served.agent("agent-1")
    created = create(served)
    posted = note(served, "agent-1", "a note")
    assert int(posted.headers["X-RateLimit-Remaining"]) < int(
        created.headers["X-RateLimit-Remaining"]
    )
    for _ in range(int(posted.headers["X-RateLimit-Remaining"])):
        assert note(served, "agent-1", "more").status_code == 201
    limited = note(served, "agent-1", "one too many")
    assert error_code(limited, 429) == "RATE_LIMITED"
    assert int(limited.headers["Retry-After"]) >= 1
