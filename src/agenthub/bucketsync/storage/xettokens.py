"""Xet access tokens reused until they expire, instead of one Hub API request per transfer.

huggingface_hub 2.4 opens every Xet transfer (`batch_bucket_files` adds,
`download_bucket_files`) with only a `token_refresh_url`, so hf_xet asks the Hub for a
fresh token (`GET /api/buckets/{id}/xet-{write,read}-token`) for each one: a Hub API
request, charged to the token's rate limit, per write. hf_xet takes a seed instead
(`endpoint`, `token`, `token_expiry_unix_secs`) and then calls the refresh URL only when the
seed is about to expire. `seed_xet_tokens` wraps the session huggingface_hub gets from
`huggingface_hub.utils._xet.get_xet_session` so every transfer is seeded from
huggingface_hub's own connection-info cache (`_fetch_xet_connection_info_with_url`, keyed
by refresh URL and Authorization, dropped 60 s before the expiry the Hub gave). The fetch
goes through huggingface_hub's HTTP client, so a `HubCalls.run` around the transfer bounds
it like any other request.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

_WRAPPED = "_bucketsync_seeded"
_LOCK = threading.Lock()


class SeededSession:
    """A Xet session whose transfers start with a cached token (`inner` does the work)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    @staticmethod
    def _seed(kwargs: dict[str, Any]) -> dict[str, Any]:
        url = kwargs.get("token_refresh_url")
        if url is None or kwargs.get("token") is not None:
            return kwargs
        from huggingface_hub.utils._xet import _fetch_xet_connection_info_with_url

        info = _fetch_xet_connection_info_with_url(
            url, dict(kwargs.get("token_refresh_headers") or {})
        )
        return {
            **kwargs,
            "endpoint": info.endpoint,
            "token": info.access_token,
            "token_expiry_unix_secs": info.expiration_unix_epoch,
        }

    def new_upload_commit(self, **kwargs: Any) -> Any:
        return self._inner.new_upload_commit(**self._seed(kwargs))

    def new_file_download_group(self, **kwargs: Any) -> Any:
        return self._inner.new_file_download_group(**self._seed(kwargs))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def seed_xet_tokens() -> None:
    """Wrap `get_xet_session` (once; a later replacement of it is wrapped again)."""
    from huggingface_hub.utils import _xet

    with _LOCK:
        current: Callable[[], Any] = _xet.get_xet_session
        if getattr(current, _WRAPPED, False):
            return

        def get_xet_session() -> Any:
            return SeededSession(current())

        setattr(get_xet_session, _WRAPPED, True)
        _xet.get_xet_session = get_xet_session
