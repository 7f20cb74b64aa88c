"""Pinned submissions: what a result's `artifacts:` / `submission:` folder held when the
result was promoted, so the verifier re-runs that content and not what the folder holds
later.

The pin is a manifest (every file's path, size and content hash as the store reports it:
sha256 on the local store, the xet hash on HF) at `results/.pins/{filename}.json` in the
central bucket. It is written in the same batch as the result and before it, so no result
is ever visible without its pin; it sits in the central bucket because it is public
evidence (anyone can check a verdict against it) that only the Space can write — a dot
folder no source path can name, listed under `results/` but never as a result. The
verification ledger in the audit bucket is the wrong home: it is private, and the
verifier rewrites it while a pin must never change.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agenthub.bucketsync.core import naming
from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.errors import InvalidPath
from agenthub.bucketsync.storage.base import FileEntry, read_json_object

PIN_PREFIX = f"{naming.RESULTS}.pins/"
SUBMISSION_KEYS = ("artifacts", "submission")
# A job run folder's status file (written by scoring/jobs.py): it names the submission the
# run used, so a result may point at a run folder instead of the submission itself.
STATUS_FILE = "job_status.json"


@dataclass(frozen=True)
class Located:
    bucket: str
    prefix: str


def locate(hub: Hub, author: str, fm: Mapping[str, Any]) -> tuple[Located | None, str]:
    """Where the result's submission lives, or (None, what is wrong)."""
    located, _files, problem = locate_files(hub, author, fm)
    return located, problem


def locate_files(
    hub: Hub, author: str, fm: Mapping[str, Any]
) -> tuple[Located | None, list[FileEntry], str]:
    """`locate`, with the submission's files as listed (one listing serves both)."""
    settings = hub.settings
    value = next((fm[k] for k in SUBMISSION_KEYS if isinstance(fm.get(k), str)), None)
    if value is None:
        return None, [], "its frontmatter names no submission (`artifacts:` or `submission:`)"
    value = value.strip()
    own = settings.scratch_bucket(author)
    try:
        if value.startswith("hf://"):
            source = hub.parse_source(value)
            if source.agent_id != author:
                return None, [], f"{value} is not in your own scratch bucket {own}"
            bucket, path = source.bucket, source.path
        elif value.startswith("artifacts/"):
            parts = naming.validate_components(value.strip("/"))
            if len(parts) < 2 or not parts[1].endswith(f"_{author}"):
                return None, [], f"{value} is not one of your artifacts/{{slug}}_{author}/ folders"
            bucket, path = settings.central_bucket, value
        else:
            naming.validate_components(value.strip("/"))
            bucket, path = own, value
    except InvalidPath as exc:
        return None, [], f"{value!r} is not a valid path ({exc.message})"
    prefix = path.strip("/") + "/"
    status = read_json_object(hub.store, bucket, f"{prefix}{STATUS_FILE}")
    if status is not None:
        # A job run folder: follow job_status.json back to the submission it ran.
        if status.get("submission_bucket") != own or not status.get("submission_prefix"):
            return None, [], f"the job run {value} did not run a submission of yours"
        bucket, prefix = own, str(status["submission_prefix"])
    located = Located(bucket, prefix)
    files = submission_files(hub, located)
    if not files:
        return None, [], f"hf://buckets/{bucket}/{prefix} has no files"
    return located, files, ""


def submission_files(hub: Hub, located: Located) -> list[FileEntry]:
    """The submission's files as listed now (a run's own status file is not part of it)."""
    return [
        e
        for e in hub.store.list(located.bucket, located.prefix)
        if not e.path.endswith(STATUS_FILE)
    ]


def pin_path(filename: str) -> str:
    return f"{PIN_PREFIX}{filename}.json"


def manifest(located: Located, files: list[FileEntry], *, pinned_at: str) -> dict[str, Any]:
    """The pin: the submission's files relative to its folder, and one hash over them all
    (sha256 of the sorted `path size hash` lines) to compare pins at a glance."""
    ordered = sorted(files, key=lambda e: e.path)
    rows: list[dict[str, Any]] = [
        {"path": e.path[len(located.prefix) :], "size": e.size, "content_hash": e.content_hash}
        for e in ordered
    ]
    digest = hashlib.sha256(
        "".join(f"{r['path']} {r['size']} {r['content_hash']}\n" for r in rows).encode()
    ).hexdigest()
    return {
        "source": f"hf://buckets/{located.bucket}/{located.prefix}",
        "bucket": located.bucket,
        "prefix": located.prefix,
        "pinned_at": pinned_at,
        "file_count": len(rows),
        "total_bytes": sum(e.size for e in ordered),
        "manifest_hash": digest,
        "files": rows,
    }


def pin_or_problem(
    hub: Hub, author: str, fm: Mapping[str, Any]
) -> tuple[dict[str, Any] | None, str]:
    """The pin of a result about to be promoted, or (None, why its submission cannot be
    located)."""
    located, files, problem = locate_files(hub, author, fm)
    if located is None:
        return None, problem
    pinned_at = hub.clock.now().isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return manifest(located, files, pinned_at=pinned_at), ""


def encode(pin: Mapping[str, Any]) -> bytes:
    return json.dumps(pin, sort_keys=True, separators=(",", ":")).encode()


def read_pin(hub: Hub, filename: str) -> dict[str, Any] | None:
    """A result's pin through the read model (pins never change, so the cache is exact)."""
    record = hub.read_model.record(pin_path(filename), naming.RESULTS)
    if record is None:
        return None
    try:
        pin = json.loads(record.body)
    except ValueError:
        return None
    return pin if isinstance(pin, dict) and isinstance(pin.get("files"), list) else None


def changes(hub: Hub, pin: Mapping[str, Any]) -> list[dict[str, str]]:
    """Pinned files that changed or vanished since promotion (`[]` = untouched). Files
    added since are not part of the pinned content and are not run."""
    located = Located(str(pin["bucket"]), str(pin["prefix"]))
    now = {e.path[len(located.prefix) :]: e for e in submission_files(hub, located)}
    found = []
    for row in pin["files"]:
        current = now.get(str(row["path"]))
        if current is None:
            found.append({"path": str(row["path"]), "change": "vanished"})
        elif current.content_hash != row["content_hash"] or current.size != row["size"]:
            found.append({"path": str(row["path"]), "change": "changed"})
    return found
