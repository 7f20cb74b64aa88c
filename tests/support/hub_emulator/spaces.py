"""Spaces on the emulator: the repo routes `HfApi` uses to deploy a Docker Space.

create (`POST /api/repos/create`, 409 when it exists), info (`GET /api/spaces/{id}`), the
file tree (`GET …/tree/{rev}`), a commit (`POST …/preupload/{rev}` answering every file
`regular` with the stored blob's git oid, so the client itself drops unchanged files, then
`POST …/commit/{rev}` with the NDJSON header/file/deletedFile lines), README validation
(`POST /api/validate-yaml`), secrets (write-only: listed by key without values) and
variables (listed with values), both upserted by POST and removed by DELETE.

State is kept as the Hub keeps it; `SpaceState.spaces[id]` holds the files by path, the
commits, and the secrets' values, which a test may read but the wire never returns.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from tests.support.hub_emulator.wire import HubError, HubRequest, HubResponse, RouteTable

SPACE = r"/api/spaces/(?P<repo>[^/]+/[^/]+)"


def git_oid(data: bytes) -> str:
    """The git blob id of `data` (what the Hub reports as a file's `oid`)."""
    return hashlib.sha1(b"blob %d\x00" % len(data) + data).hexdigest()


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())


@dataclass
class Space:
    id: str
    sdk: str
    private: bool
    files: dict[str, bytes] = field(default_factory=dict)
    commits: list[dict[str, Any]] = field(default_factory=list)  # header + paths touched
    sha: str = ""
    secrets: dict[str, dict[str, Any]] = field(default_factory=dict)  # key -> value, …
    variables: dict[str, dict[str, Any]] = field(default_factory=dict)


class SpaceState:
    def __init__(self) -> None:
        self.spaces: dict[str, Space] = {}
        self.lock = threading.Lock()
        self._shas = itertools.count(1)

    def space(self, repo_id: str) -> Space:
        found = self.spaces.get(repo_id)
        if found is None:
            raise HubError(404, f"Repository Not Found for url: {repo_id}", code="RepoNotFound")
        return found

    def create(self, repo_id: str, *, sdk: str, private: bool = False) -> Space:
        space = Space(repo_id, sdk, private)
        space.sha = self._sha()
        self.spaces[repo_id] = space
        return space

    def _sha(self) -> str:
        return f"{next(self._shas):040x}"

    def commit(self, space: Space, lines: list[dict[str, Any]]) -> str:
        header: dict[str, Any] = {}
        touched: list[str] = []
        for line in lines:
            key, value = line["key"], line["value"]
            if key == "header":
                header = value
            elif key == "file":
                if value.get("encoding") != "base64":
                    raise HubError(400, f"unsupported encoding for {value['path']}")
                space.files[value["path"]] = base64.b64decode(value["content"])
                touched.append(value["path"])
            elif key == "deletedFile":
                if space.files.pop(value["path"], None) is None:
                    raise HubError(404, f"{value['path']} does not exist", code="EntryNotFound")
                touched.append(value["path"])
            else:
                raise HubError(400, f"the emulator does not take {key!r} commit lines")
        if "summary" not in header:
            raise HubError(400, "a commit needs a header line with a summary")
        space.sha = self._sha()
        space.commits.append({"header": header, "paths": touched, "oid": space.sha})
        return space.sha


def _values(entries: dict[str, dict[str, Any]], *, with_value: bool) -> dict[str, Any]:
    return {
        key: {
            **({"value": entry["value"]} if with_value else {}),
            "description": entry.get("description"),
            "updatedAt": entry["updatedAt"],
        }
        for key, entry in entries.items()
    }


def install(table: RouteTable, state: SpaceState) -> None:
    @table.add("repo_create", "POST", r"/api/repos/create")
    def create(request: HubRequest) -> HubResponse:
        body = request.json() or {}
        if body.get("type") != "space":
            raise HubError(400, "the emulator creates Space repos only")
        if body.get("sdk") not in ("gradio", "streamlit", "docker", "static"):
            raise HubError(400, f"invalid sdk {body.get('sdk')!r}")
        repo_id = f"{body['organization']}/{body['name']}" if body.get("organization") else ""
        if not repo_id:
            raise HubError(400, "the emulator needs an organization (namespace)")
        with state.lock:
            if repo_id in state.spaces:
                raise HubError(409, "You already created this space repo")
            space = state.create(
                repo_id, sdk=body["sdk"], private=body.get("visibility") == "private"
            )
            for kind in ("secrets", "variables"):
                for item in body.get(kind) or []:
                    getattr(space, kind)[item["key"]] = {**item, "updatedAt": _now()}
        return HubResponse.json({"url": f"{request.base_url}/spaces/{repo_id}", "name": repo_id})

    @table.add("space_info", "GET", SPACE + r"(?:/revision/(?P<rev>[^/]+))?")
    def info(request: HubRequest) -> HubResponse:
        with state.lock:
            space = state.space(request.params["repo"])
            return HubResponse.json(
                {
                    "id": space.id,
                    "author": space.id.split("/")[0],
                    "sha": space.sha,
                    "private": space.private,
                    "sdk": space.sdk,
                    "siblings": [{"rfilename": p} for p in sorted(space.files)],
                    "subdomain": space.id.replace("/", "-").lower(),
                    "host": f"https://{space.id.replace('/', '-').lower()}.hf.space",
                }
            )

    @table.add("space_tree", "GET", SPACE + r"/tree/(?P<rev>[^/]+)(?:/(?P<path>.+))?")
    def tree(request: HubRequest) -> HubResponse:
        with state.lock:
            space = state.space(request.params["repo"])
            prefix = request.params.get("path") or ""
            files = sorted(space.files.items())
        if (request.arg("recursive") or "false").lower() not in ("true", "1"):
            raise HubError(400, "the emulator lists Space trees recursively only")
        return HubResponse.json(
            [
                {"type": "file", "path": path, "size": len(data), "oid": git_oid(data)}
                for path, data in files
                if not prefix or path == prefix or path.startswith(prefix + "/")
            ]
        )

    @table.add("space_preupload", "POST", SPACE + r"/preupload/(?P<rev>[^/]+)")
    def preupload(request: HubRequest) -> HubResponse:
        with state.lock:
            space = state.space(request.params["repo"])
            stored = dict(space.files)
        answers = []
        for item in (request.json() or {}).get("files", []):
            data = stored.get(item["path"])
            answers.append(
                {
                    "path": item["path"],
                    "uploadMode": "regular",
                    "shouldIgnore": False,
                    "oid": git_oid(data) if data is not None else None,
                }
            )
        return HubResponse.json({"files": answers})

    @table.add("space_commit", "POST", SPACE + r"/commit/(?P<rev>[^/]+)")
    def commit(request: HubRequest) -> HubResponse:
        lines = [json.loads(line) for line in request.body.splitlines() if line.strip()]
        with state.lock:
            space = state.space(request.params["repo"])
            oid = state.commit(space, lines)
        return HubResponse.json(
            {
                "commitUrl": f"{request.base_url}/spaces/{space.id}/commit/{oid}",
                "commitOid": oid,
                "success": True,
            }
        )

    @table.add("validate_yaml", "POST", r"/api/validate-yaml")
    def validate_yaml(request: HubRequest) -> HubResponse:
        content = (request.json() or {}).get("content", "")
        if content.startswith("---") and content.count("\n---") < 1:
            raise HubError(400, "README.md front matter is not closed")
        return HubResponse.json({"errors": [], "warnings": []})

    def entries(kind: str) -> None:
        @table.add(f"space_{kind}_get", "GET", SPACE + f"/{kind}")
        def listed(request: HubRequest) -> HubResponse:
            with state.lock:
                space = state.space(request.params["repo"])
                return HubResponse.json(
                    _values(getattr(space, kind), with_value=kind == "variables")
                )

        @table.add(f"space_{kind}_add", "POST", SPACE + f"/{kind}")
        def add(request: HubRequest) -> HubResponse:
            body = request.json() or {}
            if not body.get("key") or "value" not in body:
                raise HubError(400, f"a {kind[:-1]} needs a key and a value")
            with state.lock:
                space = state.space(request.params["repo"])
                getattr(space, kind)[body["key"]] = {**body, "updatedAt": _now()}
                return HubResponse.json(
                    _values(getattr(space, kind), with_value=kind == "variables")
                )

        @table.add(f"space_{kind}_delete", "DELETE", SPACE + f"/{kind}")
        def delete(request: HubRequest) -> HubResponse:
            key = (request.json() or {}).get("key")
            with state.lock:
                space = state.space(request.params["repo"])
                getattr(space, kind).pop(key, None)
            return HubResponse.json({})

    entries("secrets")
    entries("variables")
