"""Experiment claims over real HTTP (issue 18, item 1): near-duplicate warnings at claim
time, the lease's expiry on the hub's clock, the digest block and the overlap wake."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from agenthub.bucketsync.claims import similarity
from tests.bucketsync.coordination.conftest import Site


def test_a_claim_names_the_earlier_claim_and_the_negative_result_it_duplicates(
    site: Site,
) -> None:
    earlier = site.claim("agent-1", "label smoothing 0.1 on the resnet baseline", tags=["reg"])
    assert earlier.status_code == 201, earlier.text
    assert earlier.json()["near_duplicates"] == []
    failed = site.negative_result(
        "agent-3", "resnet baseline with label smoothing 0.1", "no gain over the baseline"
    )

    answer = site.claim("agent-2", "Trying label-smoothing (0.1) with the ResNet baseline")

    assert answer.status_code == 201, answer.text
    found = answer.json()
    by_kind = {m["kind"]: m for m in found["near_duplicates"]}
    assert by_kind["claim"]["filename"] == earlier.json()["filename"]
    assert by_kind["claim"]["agent"] == "agent-1"
    assert by_kind["negative-result"]["filename"] == failed
    assert by_kind["negative-result"]["field"] == "method"
    assert {"label", "smoothing", "resnet", "baseline"} <= set(by_kind["claim"]["shared_words"])
    assert found["overlap_owners"] == ["agent-1"]
    stored = site.http.get(f"/v1/claims/{found['filename']}").json()
    assert stored["overlaps"] == [earlier.json()["filename"]]
    assert stored["trust"]["verified_author"] is True


def test_an_unrelated_idea_on_the_same_challenge_is_not_a_near_duplicate(site: Site) -> None:
    site.claim("agent-1", "label smoothing 0.1 on the resnet baseline")
    site.negative_result("agent-3", "bigger batch size for the resnet baseline", "slower")

    answer = site.claim("agent-2", "cosine learning rate schedule with warmup on the baseline")

    assert answer.json()["near_duplicates"] == []
    assert answer.json()["overlap_owners"] == []


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("label smoothing 0.1 on the resnet baseline", "resnet baseline + label smoothing 0.1"),
        ("mixup augmentation alpha 0.2", "trying mixup with alpha 0.2 as augmentation"),
        ("distill the large model into a small one", "distilling large model to small model"),
    ],
)
def test_paraphrases_clear_the_threshold(a: str, b: str) -> None:
    assert similarity.jaccard(similarity.words(a), similarity.words(b)) >= similarity.THRESHOLD


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("label smoothing 0.1 on the resnet baseline", "cosine schedule on the resnet baseline"),
        ("mixup augmentation alpha 0.2", "quantize the model to int8"),
        ("prune attention heads of the baseline model", "ensemble three baseline models"),
    ],
)
def test_different_ideas_with_shared_vocabulary_stay_below_it(a: str, b: str) -> None:
    assert similarity.jaccard(similarity.words(a), similarity.words(b)) < similarity.THRESHOLD


def test_expired_claims_stay_readable_and_stop_counting(site: Site) -> None:
    short = site.claim("agent-1", "label smoothing 0.1 on the resnet baseline", ttl_hours=1)
    filename = short.json()["filename"]
    assert site.http.get("/v1/claims?live=true").json()["items"] == [filename]

    site.clock.advance(2 * 3600)

    assert site.http.get("/v1/claims?live=true").json()["items"] == []
    assert site.http.get("/v1/claims?live=false").json()["items"] == [filename]
    assert site.http.get("/v1/claims").json()["count"] == 1
    expired = site.http.get(f"/v1/claims/{filename}").json()
    assert expired["live"] is False and expired["idea"].startswith("label smoothing")
    again = site.claim("agent-2", "label smoothing 0.1 with the resnet baseline")
    assert again.json()["near_duplicates"] == []
    digest = site.http.get("/v1/digest").json()["claims"]
    assert digest["live"] == 1
    assert [c["filename"] for c in digest["items"]] == [again.json()["filename"]]


def test_the_digest_lists_live_claims_newest_first(site: Site) -> None:
    first = site.claim("agent-1", "quantize to int8").json()["filename"]
    site.clock.advance(1)
    second = site.claim("agent-2", "prune attention heads").json()["filename"]

    block = site.http.get("/v1/digest?as=agent-3").json()["claims"]

    assert [c["filename"] for c in block["items"]] == [second, first]
    assert block["live"] == 2 and all(c["live"] for c in block["items"])


@pytest.mark.parametrize(
    ("fm", "words"),
    [
        ({"idea": ""}, "non-empty"),
        ({"idea": "x", "ttl_hours": 100}, "at most 72"),
        ({"idea": "x", "ttl_hours": 0}, "above 0"),
        ({"idea": "x", "ttl_hours": "soon"}, "number of hours"),
        ({"idea": "x", "owner": "me"}, "not allowed on a claim"),
        ({"idea": "x", "overlap_owners": ["agent-2"]}, "set by the server"),
        ({"idea": "x", "tags": {"a": 1}}, "tags"),
    ],
)
def test_a_bad_claim_is_a_400_with_a_hint_and_writes_nothing(
    site: Site, fm: dict[str, Any], words: str
) -> None:
    idea = fm.pop("idea")
    answer = site.claim("agent-1", idea, **fm)

    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["code"] == "INVALID_FRONTMATTER" and words in error["message"]
    assert site.http.get("/v1/claims").json()["count"] == 0


def test_promoting_the_same_claim_twice_is_already_promoted(site: Site) -> None:
    first = site.claim("agent-1", "quantize to int8", path="c.md")
    again = site.http.post("/v1/claims", json={"source": site.world.uri("agent-1", "c.md")})

    assert again.status_code == 409
    assert again.json()["error"]["filename"] == first.json()["filename"]


def test_an_overlapping_claim_wakes_the_earlier_owners_updates_long_poll(site: Site) -> None:
    mine = site.claim("agent-1", "label smoothing 0.1 on the resnet baseline").json()
    cursor = site.http.get("/v1/updates", params={"as": "agent-1"}).json()["cursor"]
    woken: list[dict[str, Any]] = []

    def watch() -> None:
        params = {"as": "agent-1", "wait": "20", "expand": "true", "order": "asc"}
        if cursor:
            params["after"] = cursor
        woken.append(site.http.get("/v1/updates", params=params).json())

    watcher = threading.Thread(target=watch)
    watcher.start()
    site.parked()
    theirs = site.claim("agent-2", "resnet baseline with label smoothing 0.1").json()
    watcher.join(timeout=20)

    page = woken[0]
    assert page["watch"]["status"] == "delivered"
    assert [(i["filename"], i["reasons"]) for i in page["items"]] == [
        (theirs["filename"], ["claim-overlap"])
    ]
    assert page["items"][0]["frontmatter"]["overlaps"] == [mine["filename"]]
    # The claimant is not told about its own claim; an unrelated agent is not woken.
    for other in ("agent-2", "agent-3"):
        items = site.http.get("/v1/updates", params={"as": other}).json()["items"]
        assert theirs["filename"] not in items
