"""bucket-sync's base URL as an agent gives it (`BUCKETSYNC_URL`, `--url`): refused with a
hint when it cannot be one, and named when a 404 shows it is another service (State Hub
and hub-core run beside bucket-sync under `agenthub up`, one port apart)."""

from __future__ import annotations

from urllib.parse import urlsplit

import httpx

WHERE = "bucket-sync's URL is the one `agenthub up` prints on its `bucket-sync` line (port 8300 by default)"


class NotAServiceUrl(ValueError):
    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.hint = hint


def checked_url(url: str) -> str:
    """`url` without its trailing slash; `NotAServiceUrl` when it has no http(s) scheme."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        bare = url.split("://", 1)[-1].lstrip("/")
        raise NotAServiceUrl(
            f"bucket-sync URL {url!r} is not an http:// or https:// URL",
            hint=f"write it with its scheme, e.g. http://{bare or '127.0.0.1:8300'}",
        )
    return url.rstrip("/")


def wrong_service_hint(url: str, response: httpx.Response, client: httpx.Client) -> str | None:
    """After a 404 that is not bucket-sync's own (its errors carry an `error` object):
    which service answered instead, or None when `url` is bucket-sync after all."""
    if response.status_code != 404:
        return None
    try:
        if isinstance(response.json().get("error"), dict):
            return None
    except ValueError:
        pass
    try:
        health = client.get(f"{url}/state/health")
        if health.status_code == 200 and "instance_label" in health.text:
            return f"{url} is State Hub, not bucket-sync; {WHERE}"
        described = client.get(f"{url}/v1")
        if described.status_code == 200 and "api_version" in described.text:
            return None
    except httpx.HTTPError:
        return None
    return f"{url} does not answer GET /v1 as bucket-sync does; {WHERE}"
