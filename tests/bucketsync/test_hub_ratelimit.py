"""The emulator's rate limiter (tests/support/hub_emulator/ratelimit.py): fixed 5-minute
windows per token and bucket of requests, 429 + Retry-After past the quota, and the hf
store passing that on as a retryable error with the Hub's Retry-After."""

from __future__ import annotations

import pytest
from huggingface_hub import HfApi
from huggingface_hub.errors import HfHubHTTPError

from agenthub.bucketsync.errors import StorageUnavailable
from agenthub.bucketsync.storage.base import Batch
from agenthub.bucketsync.storage.hf import HfBucketStore
from tests.support.hub_emulator import running_hub
from tests.support.hub_emulator.ratelimit import RateLimit

B = "acme/limited"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_past_the_quota_the_hub_answers_429_until_the_window_ends() -> None:
    clock = Clock()
    limiter = RateLimit(api=3, resolve=None, clock=clock)
    with running_hub() as hub:
        hub.add_bucket(B)
        hub.add_policy(limiter)
        api = HfApi(endpoint=hub.url, token="hf_one")
        for _ in range(3):
            api.bucket_info(B)
        clock.now += 100
        with pytest.raises(HfHubHTTPError) as refused:
            HfApi(endpoint=hub.url, token="hf_one").bucket_info(B)
        HfApi(endpoint=hub.url, token="hf_two").bucket_info(B)  # another token's quota
        clock.now += 200
        api.bucket_info(B)  # the next window
    assert refused.value.response.status_code == 429
    assert refused.value.response.headers["retry-after"] == "200"
    assert limiter.windows("api") == [5, 1] and limiter.refused == {"api": 1}


def test_the_store_passes_the_hubs_retry_after_on() -> None:
    clock = Clock()
    with running_hub() as hub:
        hub.add_bucket(B)
        hub.add_policy(RateLimit(api=0, resolve=None, clock=clock))
        store = HfBucketStore(token="hf_store", endpoint=hub.url, deadline_s=5)
        with pytest.raises(StorageUnavailable) as caught:
            store.write_batch(B, Batch(adds=[("a.md", b"x")]))
        assert store.read(B, "a.md") is None  # resolver reads have their own quota
    assert caught.value.retry_after_s == 300
    assert "a.md" not in hub.files(B)
