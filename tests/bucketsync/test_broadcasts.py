"""Organizer broadcasts (seed §11): the gate, the one-batch write, read-time union."""

from __future__ import annotations

from typing import Any

import pytest

from agenthub.bucketsync.core import frontmatter, readmodel
from agenthub.bucketsync.errors import StorageUnavailable
from agenthub.bucketsync.identity.base import Caller
from agenthub.bucketsync.storage.base import Batch
from tests.bucketsync.live_support import LiveWorld, live

__all__ = ["live"]


@pytest.fixture
def org(live: LiveWorld) -> LiveWorld:
    live.agent("agent-1")
    live.user("boss", role="admin", email="boss@example.org")
    return live


def broadcast(world: LiveWorld, body: str = "all hands", user: str = "boss") -> Any:
    return world.client.post(
        "/v1/messages",
        json={"agent_id": f"human-{user}", "body": body, "broadcast": True},
        headers=world.auth(user),
    )


def test_bs_11_2_one_batch_to_board_and_broadcasts(org: LiveWorld) -> None:
    writes: list[Batch] = []
    store = org.hub.store
    original = store.write_batch

    def recording(bucket: str, batch: Batch) -> None:
        if bucket == org.hub.central:
            writes.append(batch)
        original(bucket, batch)

    store.write_batch = recording  # type: ignore[method-assign]
    sent = broadcast(org).json()
    assert len(writes) == 1
    assert [p for p, _ in writes[0].adds] == [
        f"broadcasts/{sent['filename']}",
        f"message_board/{sent['filename']}",
    ]
    assert b"broadcast: true" in writes[0].adds[0][1]


def test_bs_11_3_bs_11_4_union_reaches_everyone_once(org: LiveWorld) -> None:
    sent = broadcast(org, "hello @agent-1").json()
    assert sent["mentions_delivered"] == [] and sent["broadcast"] is True
    org.agent("agent-late")
    for handle in ("agent-1", "agent-late", "human-never-seen", "human-boss"):
        items = org.client.get(f"/v1/inbox/{handle}").json()["items"]
        assert items == [sent["filename"]], handle
    digest = org.client.get("/v1/digest?as=human-never-seen").json()
    assert [i["filename"] for i in digest["inbox"]["items"]] == [sent["filename"]]


def test_bs_11_5_bs_11_6_role_lookup_prefers_the_email_and_refuses_non_admins(
    org: LiveWorld,
) -> None:
    calls: list[tuple[str, str | None]] = []
    identity = org.hub.identity

    class Recording:
        def whoami(self, token: str) -> Caller:
            caller = identity.whoami(token)
            return Caller(caller.user, caller.email, {})  # OAuth: no roleInOrg

        def org_role(self, o: str, user: str, email: str | None = None) -> str | None:
            calls.append((user, email))
            return identity.org_role(o, user, email)

    org.hub.identity = Recording()
    assert broadcast(org).status_code == 201
    assert calls[-1] == ("boss", "boss@example.org")
    org.user("carol", role="contributor")
    refused = broadcast(org, user="carol")
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "NOT_ORGANIZER"


def test_bs_11_7_lookup_failure_is_a_retryable_503_and_nothing_is_written(
    org: LiveWorld,
) -> None:
    identity = org.hub.identity

    class Down:
        def whoami(self, token: str) -> Caller:
            return identity.whoami(token)

        def org_role(self, o: str, user: str, email: str | None = None) -> str | None:
            raise StorageUnavailable("members API down")

    org.hub.identity = Down()
    before = org.client.get("/v1/messages").json()["count"]
    response = broadcast(org)
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "ORGANIZER_CHECK_UNAVAILABLE"
    assert response.headers["Retry-After"]
    assert org.client.get("/v1/messages").json()["count"] == before


def test_bs_11_9_source_frontmatter_cannot_spoof_broadcast(org: LiveWorld) -> None:
    spoof = org.promote("agent-1", "b.md", "---\nbroadcast: true\n---\nhi all")
    assert spoof.status_code == 403 and spoof.json()["error"]["code"] == "NOT_ORGANIZER"
    assert org.client.get("/v1/inbox/agent-late-never").status_code == 404


def test_bs_11_10_a_plain_human_post_never_consults_roles(org: LiveWorld) -> None:
    identity = org.hub.identity

    class NoRoles:
        def whoami(self, token: str) -> Caller:
            return identity.whoami(token)

        def org_role(self, o: str, user: str, email: str | None = None) -> str | None:
            raise AssertionError("org roles consulted for a plain post")

    org.hub.identity = NoRoles()
    response = org.client.post(
        "/v1/messages",
        json={"agent_id": "human-boss", "body": "just me"},
        headers=org.auth("boss"),
    )
    assert response.status_code == 201 and response.json()["broadcast"] is False


def test_bs_11_11_me_is_organizer_is_only_a_hint(org: LiveWorld) -> None:
    assert org.client.get("/v1/me", headers=org.auth("boss")).json()["is_organizer"] is True
    org.user("carol")
    assert org.client.get("/v1/me", headers=org.auth("carol")).json()["is_organizer"] is False
    # The gate re-checks the role on every broadcast, whatever /v1/me said.
    assert broadcast(org, user="carol").status_code == 403


def test_a_broadcast_parses_the_bytes_its_board_file_and_copy_share_once(
    org: LiveWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The board file and the broadcast copy are the same bytes: the read model parses
    them once when the post inserts both."""
    parsed: list[bytes] = []
    real = frontmatter.parse_lenient

    def counting(raw: bytes) -> Any:
        parsed.append(raw)
        return real(raw)

    monkeypatch.setattr(readmodel, "parse_lenient", counting)
    sent = broadcast(org)
    assert sent.status_code == 201, sent.text
    assert len(parsed) == 1
    filename = sent.json()["filename"]
    assert org.client.get("/v1/inbox/agent-1").json()["items"] == [filename]


def test_an_inbox_of_copies_and_broadcasts_follows_every_change(org: LiveWorld) -> None:
    """The joined listing of a handle's copies and the broadcasts is kept between reads;
    each new copy or broadcast shows at once, in filename order, each once."""
    org.agent("agent-2")
    mention = org.raw("agent-2", "hi @agent-1").json()["filename"]
    first = broadcast(org, "one").json()["filename"]

    def inbox() -> list[str]:
        page = org.client.get("/v1/inbox/agent-1?order=asc&expand=true").json()
        return [item["filename"] for item in page["items"]]

    assert inbox() == inbox() == sorted([mention, first])
    second = org.raw("agent-2", "again @agent-1").json()["filename"]
    assert inbox() == sorted([mention, first, second])
    third = broadcast(org, "two").json()["filename"]
    assert inbox() == sorted([mention, first, second, third])
    assert org.client.get("/v1/inbox/agent-2?order=asc").json()["items"] == [first, third]
