"""The one in-process piece: a stand-in for `hf_xet.XetSession`, put where huggingface_hub
gets its session (`huggingface_hub.utils._xet.get_xet_session`, looked up at each
`batch_bucket_files` / `download_bucket_files` call).

Why there: the client has no plain-HTTP upload path for buckets, and real Xet transfer
needs a CAS speaking xorbs and shards (chunking, compression, reconstruction terms), far
more than an emulator should carry. Everything else stays real: the client still asks the
Hub for a Xet token on the refresh route (`xet-write-token` / `xet-read-token`, counted)
unless the caller seeded one (`endpoint`, `token`, `token_expiry_unix_secs`, as hf_xet
takes them), and the bridge then moves whole blobs over HTTP to the emulator's CAS listener
(`PUT`/`GET /xet/{hash}`), so a CAS refusal, reset or hang is a real network failure. It
fails the way hf_xet does: errors surface as `RuntimeError`, after one attempt bounded by
`timeout_s`.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import httpx2

from tests.support.hub_emulator.buckets import xet_hash


@dataclass(frozen=True)
class _XetInfo:
    hash: str
    file_size: int


@dataclass(frozen=True)
class _UploadResult:
    xet_info: _XetInfo


class _Handle:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.info = _XetInfo(xet_hash(data), len(data))

    def result(self) -> _UploadResult:
        return _UploadResult(self.info)


class _Transfer(ABC):
    """What an upload commit and a download group share: a token, then CAS requests."""

    def __init__(self, session: BridgeSession, refresh_url: str, headers: dict[str, str]) -> None:
        self._session = session
        self._refresh_url = refresh_url
        self._headers = headers
        self._seed: tuple[str, str] | None = None

    def seeded(self, options: dict[str, Any]) -> Self:
        """Use the (CAS endpoint, token) a caller seeded, as hf_xet takes them: all three
        of `endpoint`, `token` and `token_expiry_unix_secs`, or no seed."""
        endpoint, token = options.get("endpoint"), options.get("token")
        if endpoint and token and options.get("token_expiry_unix_secs") is not None:
            self._seed = (str(endpoint), str(token))
        return self

    def _cas(self) -> tuple[str, dict[str, str]]:
        if self._seed is not None:  # hf_xet asks the refresh URL only without a seed
            endpoint, token = self._seed
            return endpoint, {"Authorization": f"Bearer {token}"}
        response = self._session.request("GET", self._refresh_url, headers=self._headers)
        body = response.json()
        return str(body["casUrl"]), {"Authorization": f"Bearer {body['accessToken']}"}

    def __enter__(self) -> Any:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if kind is None:
            self.transfer()

    @abstractmethod
    def transfer(self) -> None:
        """Move the bytes (an upload's commit, a download group's reads)."""


class _UploadCommit(_Transfer):
    def __init__(self, session: BridgeSession, refresh_url: str, headers: dict[str, str]) -> None:
        super().__init__(session, refresh_url, headers)
        self._handles: list[_Handle] = []

    def start_upload_bytes(self, data: bytes, sha256: Any = None) -> _Handle:
        self._handles.append(_Handle(bytes(data)))
        return self._handles[-1]

    def start_upload_file(self, path: str, sha256: Any = None) -> _Handle:
        return self.start_upload_bytes(Path(path).read_bytes())

    def transfer(self) -> None:
        if not self._handles:
            return
        cas, auth = self._cas()
        for handle in self._handles:
            self._session.request(
                "PUT", f"{cas}/xet/{handle.info.hash}", headers=auth, content=handle.data
            )


class _DownloadGroup(_Transfer):
    def __init__(self, session: BridgeSession, refresh_url: str, headers: dict[str, str]) -> None:
        super().__init__(session, refresh_url, headers)
        self._wanted: list[tuple[str, str]] = []

    def start_download_file(self, info: Any, dest: str) -> None:
        self._wanted.append((str(info.hash), dest))

    def transfer(self) -> None:
        if not self._wanted:
            return
        cas, auth = self._cas()
        for digest, dest in self._wanted:
            data = self._session.request("GET", f"{cas}/xet/{digest}", headers=auth).content
            Path(dest).parent.mkdir(parents=True, exist_ok=True)
            Path(dest).write_bytes(data)


class BridgeSession:
    """Quacks like `hf_xet.XetSession` for the calls huggingface_hub 2.4 makes."""

    def __init__(self, *, timeout_s: float = 10.0) -> None:
        self._client = httpx2.Client(timeout=timeout_s)

    def request(self, method: str, url: str, **kwargs: Any) -> httpx2.Response:
        try:
            response = self._client.request(method, url, **kwargs)
            response.raise_for_status()
        except httpx2.HTTPError as exc:
            raise RuntimeError(f"Xet transfer failed: {type(exc).__name__}: {exc}") from exc
        return response

    def new_upload_commit(
        self, *, token_refresh_url: str, token_refresh_headers: dict[str, str], **seed: Any
    ) -> _UploadCommit:
        return _UploadCommit(self, token_refresh_url, token_refresh_headers).seeded(seed)

    def new_file_download_group(
        self, *, token_refresh_url: str, token_refresh_headers: dict[str, str], **seed: Any
    ) -> _DownloadGroup:
        return _DownloadGroup(self, token_refresh_url, token_refresh_headers).seeded(seed)

    def sigint_abort(self) -> None:
        """Nothing runs in the background to abort."""

    def close(self) -> None:
        self._client.close()


@contextlib.contextmanager
def xet_bridge(*, timeout_s: float = 10.0) -> Iterator[BridgeSession]:
    """Route huggingface_hub's Xet transfers through a `BridgeSession` while inside."""
    from huggingface_hub.utils import _xet

    session = BridgeSession(timeout_s=timeout_s)
    original = _xet.get_xet_session
    _xet.get_xet_session = lambda: session
    try:
        yield session
    finally:
        _xet.get_xet_session = original
        session.close()
