"""The Hub emulator speaks what huggingface_hub's own helpers expect: the bucket change
feed (`BucketFollower`), resolve, Link pagination and request counting by route."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from huggingface_hub import HfApi, HfFileSystem
from huggingface_hub._bucket_live_follow import BucketFileChange, BucketFollower
from huggingface_hub.errors import HfHubHTTPError

from agenthub.bucketsync.identity.hf import members_by_email
from tests.support.hub_emulator import Fault, running_hub

B = "acme/main"


def _wait(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


def test_bucket_follower_receives_writes_as_change_batches() -> None:
    with running_hub() as hub:
        hub.add_bucket(B)
        hub.put(B, "before.md", b"old")
        changes: list[BucketFileChange] = []
        follower = BucketFollower(
            endpoint=hub.url,
            bucket_id=B,
            token="hf_admin",
            on_changes=changes.extend,
            on_reconcile=lambda: None,
            is_alive=lambda: True,
        )
        follower.start()
        _wait(lambda: follower.subscribed)
        HfApi(endpoint=hub.url).batch_bucket_files(B, add=[(b"new", "a.md")], delete=["before.md"])
        _wait(lambda: len(changes) == 2)
        follower.stop()
    assert [(c.path, c.op) for c in changes] == [("a.md", "add"), ("before.md", "delete")]
    assert changes[0].size == 3 and changes[0].xet_hash


def test_an_unserved_feed_makes_the_follower_give_up() -> None:
    with running_hub() as hub:
        hub.add_bucket(B)
        hub.buckets.feed_enabled = False
        follower = BucketFollower(
            endpoint=hub.url,
            bucket_id=B,
            on_changes=lambda _: None,
            on_reconcile=lambda: None,
            is_alive=lambda: True,
        )
        follower.start()
        follower.join(timeout=10)
        assert not follower.is_alive() and not follower.subscribed


def test_plain_http_reads_go_through_resolve() -> None:
    with running_hub() as hub:
        hub.add_bucket(B)
        hub.put(B, "dir/a.md", b"hello world")
        fs = HfFileSystem(endpoint=hub.url, token="hf_admin")
        assert fs.cat_file(f"buckets/{B}/dir/a.md") == b"hello world"
        assert hub.count("resolve") >= 1 and hub.count("cas_get") == 0


def test_counts_are_per_route_and_faults_are_counted_too() -> None:
    with running_hub(page_size=1) as hub:
        hub.add_bucket(B)
        for name in ("a", "b", "c"):
            hub.put(B, f"{name}.md", b"x")
        api = HfApi(endpoint=hub.url)
        assert len(list(api.list_bucket_tree(B, recursive=True))) == 3
        hub.inject("bucket_info", Fault.status(404), times=1)
        with pytest.raises(HfHubHTTPError):
            api.bucket_info(B)
        assert hub.counts() == {"tree": 3, "bucket_info": 1}
        assert hub.api_requests() == 4
        assert [r.fault for r in hub.requests][-1] == "status"


def test_the_request_log_keeps_each_query_so_an_email_lookup_differs_from_a_scan() -> None:
    with running_hub(page_size=1) as hub:
        hub.accounts.add_user("t1", "ann", email="ann@x.org", acme="admin")
        hub.accounts.add_user("t2", "bob", acme="write")
        members_by_email("acme", "ann@x.org", "hf_admin", endpoint=hub.url)
        assert len(list(HfApi(endpoint=hub.url).list_organization_members("acme"))) == 2
        records = [r for r in hub.requests if r.route == "org_members"]
    assert [(r.arg("email"), r.arg("cursor") is not None) for r in records] == [
        ("ann@x.org", False),
        (None, False),
        (None, True),
    ]


def test_a_direct_delete_removes_the_file_and_shows_on_the_feed() -> None:
    with running_hub() as hub:
        hub.add_bucket(B)
        hub.put(B, "a.md", b"x")
        hub.buckets.delete(B, "a.md")
        assert hub.files(B) == {}
        assert hub.buckets.bucket(B).events[-1][2] == [{"path": "a.md", "op": "delete"}]
        assert hub.counts() == {}
