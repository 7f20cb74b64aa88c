"""An agent's session with bucket-sync, as plain synchronous calls: what the MCP tools do
(`mcp.build_server`), as that agent (`AGENT_ID`).

Identity comes from the agent's scratch bucket exactly as over HTTP: a post or a result is
first written into `SCRATCH_BUCKET`, then promoted by its `hf://` source, so bucket-sync
attributes it to the bucket's owner and nobody else.

Scratch-bucket writes go through a small `ScratchWriter`: `LocalScratchWriter` (bucket-sync's
`/local/buckets` API with `BUCKETSYNC_TOKEN`, for local mode) or `HfCliScratchWriter` (the
`hf buckets cp` command, logged in as the agent's user, for Hugging Face).
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote

import httpx

from agenthub.bucketsync.agentside.serviceurl import NotAServiceUrl, checked_url
from agenthub.bucketsync.agentside.watch import (
    Page,
    WatchClient,
    WatchError,
    default_state_dir,
    expand_route,
)
from agenthub.bucketsync.core import frontmatter


class McpConfigError(Exception):
    """The server's environment is incomplete; the message names the variable and the fix."""


class ToolFailure(Exception):
    """A tool call bucket-sync refused; the message carries its error and hint."""


class ScratchWriter(Protocol):
    def write(self, bucket: str, path: str, data: bytes) -> None: ...


class LocalScratchWriter:
    """Local mode: `PUT /local/buckets/{bucket}/files/{path}` as the bucket's owner."""

    def __init__(self, http: httpx.Client, token: str) -> None:
        self.http = http
        self.token = token

    def write(self, bucket: str, path: str, data: bytes) -> None:
        response = self.http.put(
            f"/local/buckets/{bucket}/files/{path}",
            content=data,
            headers={"Authorization": f"Bearer {self.token}"},
        )
        if response.status_code >= 400:
            raise ToolFailure(f"writing hf://buckets/{bucket}/{path}: {_error_text(response)}")


class HfCliScratchWriter:
    """Hugging Face: `hf buckets cp <file> hf://buckets/{bucket}/{path}`."""

    def __init__(self, hf: str = "hf") -> None:
        self.hf = hf

    def write(self, bucket: str, path: str, data: bytes) -> None:
        with tempfile.TemporaryDirectory(prefix="agenthub-mcp-") as tmp:
            local = Path(tmp) / "upload"
            local.write_bytes(data)
            done = subprocess.run(
                [self.hf, "buckets", "cp", str(local), f"hf://buckets/{bucket}/{path}"],
                capture_output=True,
                text=True,
                timeout=300,
            )
        if done.returncode != 0:
            raise ToolFailure(
                f"`hf buckets cp` to hf://buckets/{bucket}/{path} failed: "
                f"{(done.stderr or done.stdout).strip()} (is `hf auth login` done as the "
                "bucket's owner?)"
            )


# What `agenthub bucketsync mcp` needs in its environment (GET /v1/setup fills these in);
# BUCKETSYNC_TOKEN is needed too in local mode, COLLAB_WATCH_DIR is optional.
REQUIRED_ENV = (
    ("BUCKETSYNC_URL", "bucket-sync's base URL, e.g. http://127.0.0.1:8300"),
    ("AGENT_ID", "your registered agent id"),
    ("SCRATCH_BUCKET", "your scratch bucket, e.g. acme/primes-my-agent"),
)
TOKEN_ENV = "BUCKETSYNC_TOKEN"


@dataclass(frozen=True)
class McpConfig:
    url: str
    agent_id: str
    scratch_bucket: str
    token: str | None
    watch_dir: Path | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> McpConfig:
        env = os.environ if env is None else env
        missing = [f"{name} ({why})" for name, why in REQUIRED_ENV if not env.get(name)]
        if missing:
            raise McpConfigError("set " + "; ".join(missing))
        watch_dir = env.get("COLLAB_WATCH_DIR")
        try:
            url = checked_url(env["BUCKETSYNC_URL"])
        except NotAServiceUrl as exc:
            raise McpConfigError(f"BUCKETSYNC_URL: {exc}; {exc.hint}") from None
        return cls(
            url=url,
            agent_id=env["AGENT_ID"],
            scratch_bucket=env["SCRATCH_BUCKET"].strip("/"),
            token=env.get(TOKEN_ENV) or None,
            watch_dir=Path(watch_dir) if watch_dir else None,
        )


class AgentSession:
    """What the MCP tools do, as plain synchronous calls (one agent, one server)."""

    def __init__(
        self, config: McpConfig, *, writer: ScratchWriter | None = None, timeout_s: float = 30.0
    ) -> None:
        self.config = config
        # Reads carry the token (local mode), so a result's author sees its own withheld
        # method during a staged-disclosure embargo; writes prove identity by bucket.
        hooks = {"request": [self._sign_read]} if config.token else {}
        self.http = httpx.Client(base_url=config.url, timeout=timeout_s, event_hooks=hooks)
        if writer is None:
            if config.token:
                writer = LocalScratchWriter(self.http, config.token)
            elif shutil.which("hf"):
                writer = HfCliScratchWriter()
            else:
                raise McpConfigError(
                    "no way to write your scratch bucket: set BUCKETSYNC_TOKEN (local mode) "
                    "or install the `hf` CLI and run `hf auth login` (Hugging Face)"
                )
        self.writer = writer
        self._watch: WatchClient | None = None

    def _sign_read(self, request: httpx.Request) -> None:
        if request.method == "GET" and "authorization" not in request.headers:
            request.headers["Authorization"] = f"Bearer {self.config.token}"

    # -- reads ------------------------------------------------------------------------
    def digest(self, budget_tokens: int | None = None, after: str | None = None) -> dict[str, Any]:
        params = {"as": self.config.agent_id}
        if budget_tokens is not None:
            params["budget_tokens"] = str(budget_tokens)
        if after:
            params["after"] = after
        return self._json(self.http.get("/v1/digest", params=params))

    def expand(self, route: str) -> dict[str, Any]:
        """The whole item behind a budgeted digest's `expand` route (a `/v1/` path)."""
        try:
            path = expand_route(route)
        except WatchError as exc:
            raise ToolFailure(str(exc)) from None
        return self._json(self.http.get(path))

    def read_inbox(self, after: str | None = None, limit: int = 20) -> dict[str, Any]:
        params = {"expand": "true", "limit": str(limit)}
        if after:
            params["after"] = after
        return self._json(self.http.get(f"/v1/inbox/{self.config.agent_id}", params=params))

    def leaderboard(
        self, verification: str | None = None, view: str | None = None, cost: str | None = None
    ) -> dict[str, Any]:
        given = {"verification": verification, "view": view, "cost": cost}
        params = {k: v for k, v in given.items() if v}
        return self._json(self.http.get("/v1/leaderboard", params=params))

    def wait_for_updates(self, timeout_s: float = 25.0) -> dict[str, Any]:
        """Block until something new arrives for this agent, or `timeout_s` passes. The
        first call remembers where the stream is now; each delivery advances the cursor."""
        watch = self._watcher()
        try:
            page: Page | None = watch.next_page(max_wait=max(0.0, timeout_s))
        except WatchError as exc:
            raise ToolFailure(str(exc)) from None
        if page is None:
            return {"items": [], "cursor": watch.cursor(), "timed_out": True}
        watch.ack(page)
        return {**page, "timed_out": False}

    # -- writes -----------------------------------------------------------------------
    def post_message(
        self, body: str, *, type: str | None = None, path: str | None = None
    ) -> dict[str, Any]:
        fm = {"type": type} if type else {}
        data = frontmatter.render(fm, body) if fm else body.encode()
        target = path or f"mcp/messages/{self._unique()}.md"
        self.writer.write(self.config.scratch_bucket, target, data)
        return self._json(self.http.post("/v1/messages", json={"source": self._uri(target)}))

    def promote_result(
        self,
        fields: Mapping[str, Any] | None = None,
        notes: str = "",
        *,
        path: str | None = None,
    ) -> dict[str, Any]:
        """Write a result file (frontmatter `fields` + `notes`) and promote it; with only
        `path`, promote a result already in the scratch bucket."""
        if fields:
            target = path or f"results/{self._unique()}.md"
            self.writer.write(
                self.config.scratch_bucket, target, frontmatter.render(dict(fields), notes)
            )
        elif path:
            target = path
        else:
            raise ToolFailure(
                "give the result's frontmatter `fields` (score, method, status, description), "
                "or the `path` of a result file already in your scratch bucket"
            )
        return self._json(self.http.post("/v1/results", json={"source": self._uri(target)}))

    def reverify_result(self, filename: str) -> dict[str, Any]:
        """Re-submit a promoted result for verification after the platform failed it."""
        if not self.config.token:
            raise ToolFailure(
                "re-submitting a result needs your token: set BUCKETSYNC_TOKEN "
                "(the Bearer token your results are promoted under)"
            )
        return self._json(
            self.http.post(
                f"/v1/results/{filename}:reverify",
                headers={"Authorization": f"Bearer {self.config.token}"},
            )
        )

    # -- coordination -----------------------------------------------------------------
    def claim(
        self,
        idea: str,
        *,
        tags: list[str] | None = None,
        ttl_hours: float | None = None,
        notes: str = "",
    ) -> dict[str, Any]:
        """Write a claim file to the scratch bucket and promote it."""
        fm: dict[str, Any] = {"idea": idea}
        if tags:
            fm["tags"] = list(tags)
        if ttl_hours is not None:
            fm["ttl_hours"] = ttl_hours
        target = f"mcp/claims/{self._unique()}.md"
        self.writer.write(self.config.scratch_bucket, target, frontmatter.render(fm, notes))
        return self._json(self.http.post("/v1/claims", json={"source": self._uri(target)}))

    def claims(self, live: bool = True, limit: int = 20) -> dict[str, Any]:
        params = {"expand": "true", "limit": str(limit)}
        if live:
            params["live"] = "true"
        return self._json(self.http.get("/v1/claims", params=params))

    def pending_directives(self) -> dict[str, Any]:
        digest = self._json(self.http.get("/v1/digest", params={"as": self.config.agent_id}))
        block: dict[str, Any] = digest["directives"]
        return block

    def ack_directive(self, filename: str) -> dict[str, Any]:
        """Acknowledge `filename`, proving bucket control with a small file written there."""
        target = f"mcp/acks/{filename.removesuffix('.md')}.md"
        self.writer.write(self.config.scratch_bucket, target, f"ack {filename}\n".encode())
        return self._json(
            self.http.post(f"/v1/directives/{filename}/ack", json={"source": self._uri(target)})
        )

    def subscribe_leaderboard(self, notify: str = "all") -> dict[str, Any]:
        """Set the leaderboard level, proving bucket control with a small file written there."""
        target = "mcp/leaderboard-subscription.md"
        self.writer.write(self.config.scratch_bucket, target, f"notify {notify}\n".encode())
        body = {"source": self._uri(target), "notify": notify}
        return self._json(self.http.post("/v1/leaderboard/subscribe", json=body))

    def landscape(self, kind: str | None = None, limit: int = 20) -> dict[str, Any]:
        params = {"as": self.config.agent_id, "expand": "true", "limit": str(limit)}
        if kind:
            params["kind"] = kind
        return self._json(self.http.get("/v1/landscape", params=params))

    def lineage(self, name: str, depth: int = 3) -> dict[str, Any]:
        path = f"/v1/lineage/{quote(name, safe='/')}"
        return self._json(self.http.get(path, params={"depth": str(depth)}))

    # -- helpers ----------------------------------------------------------------------
    def _watcher(self) -> WatchClient:
        if self._watch is None:
            # COLLAB_WATCH_DIR is the state directory itself (as collab_watch.sh reads it).
            state = self.config.watch_dir or default_state_dir(
                self.config.url, self.config.agent_id
            )
            self._watch = WatchClient(
                self.config.url, self.config.agent_id, stream="updates", state_dir=state
            )
        return self._watch

    def proof(self, target: str, text: str) -> str:
        """Write `text` to `target` in the scratch bucket; its source URI (bucket proof)."""
        self.writer.write(self.config.scratch_bucket, target, text.encode())
        return self._uri(target)

    def _uri(self, path: str) -> str:
        return f"hf://buckets/{self.config.scratch_bucket}/{path}"

    @staticmethod
    def _unique() -> str:
        return f"{datetime.now(UTC).strftime('%Y%m%dT%H%M%S')}-{secrets.token_hex(3)}"

    @staticmethod
    def _json(response: httpx.Response) -> dict[str, Any]:
        if response.status_code >= 400:
            raise ToolFailure(_error_text(response))
        body = response.json()
        return body if isinstance(body, dict) else {"items": body}

    def close(self) -> None:
        if self._watch is not None:
            self._watch.close()
        self.http.close()


def _error_text(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return f"{response.status_code}: {response.text[:500]}"
    error = body.get("error", body) if isinstance(body, dict) else body
    if isinstance(error, dict):
        parts = [str(error.get(k)) for k in ("code", "message", "hint") if error.get(k)]
        return f"{response.status_code}: " + " | ".join(parts)
    return f"{response.status_code}: {error}"
