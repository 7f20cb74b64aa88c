"""Where a bundle lives: a private file (0600) and, beside it, evidence with no bodies.

The bundle holds message bodies and stays in private storage. The evidence
file (`<bundle>.evidence.json`) holds hashes and counts only — never a body,
subject, agent name or database URL — so it can be attached to a review.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from agenthub.hubcore.errors import SnapshotRejected

EVIDENCE_SCHEMA = "hub-core.statehub-inbox-snapshot-evidence.v1"
# Source facts that are identifiers, not content or credentials.
EVIDENCE_SOURCE_KEYS = (
    "instance",
    "cursor",
    "source_time",
    "captured_by",
    "via",
    "database",
    "revision_column",
    "epoch",
    "compacted_before",
    "feed_content_hash",
)


def evidence_path(bundle_path: Path) -> Path:
    return bundle_path.with_name(bundle_path.name + ".evidence.json")


def _write_private(path: Path, data: bytes) -> None:
    """Write `data` to `path` atomically, readable by the owner only from the first byte."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def evidence_for(bundle: dict[str, Any], bundle_bytes: bytes, bundle_name: str) -> dict[str, Any]:
    messages = bundle["messages"]
    source = {k: bundle["source"][k] for k in EVIDENCE_SOURCE_KEYS if k in bundle["source"]}
    return {
        "schema": EVIDENCE_SCHEMA,
        "bundle_schema": bundle["schema"],
        "bundle_file": bundle_name,
        "bundle_sha256": hashlib.sha256(bundle_bytes).hexdigest(),
        "source": source,
        "captured_at": bundle["captured_at"],
        "count": bundle["count"],
        "content_hash": bundle["content_hash"],
        "receipts_count": bundle["receipts_count"],
        "receipts_hash": bundle["receipts_hash"],
        "tombstones_count": bundle["tombstones_count"],
        "tombstones_hash": bundle["tombstones_hash"],
        "breakdown": {
            "broadcasts": sum(1 for m in messages if m["to_agent"] == "*"),
            "archived": sum(1 for m in messages if m["archived_at"] is not None),
            "replies": sum(1 for m in messages if m["thread_id"] is not None),
            "read": sum(1 for m in messages if m["read_at"] is not None),
        },
    }


def write_bundle(bundle: dict[str, Any], path: Path) -> Path:
    """Write the bundle (0600) and its evidence; return the evidence path."""
    data = json.dumps(bundle, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    _write_private(path, data)
    evidence = evidence_for(bundle, data, path.name)
    target = evidence_path(path)
    _write_private(target, (json.dumps(evidence, indent=2, sort_keys=True) + "\n").encode())
    return target


def read_bundle(path: Path) -> Any:
    try:
        return json.loads(path.read_bytes())
    except FileNotFoundError:
        raise SnapshotRejected(
            "malformed_bundle", f"no bundle at {path}", hint="pass the file capture wrote"
        ) from None
    except ValueError as exc:
        raise SnapshotRejected(
            "malformed_bundle",
            f"{path} is not JSON ({exc})",
            hint="the file is truncated or not a bundle; capture again",
        ) from None
