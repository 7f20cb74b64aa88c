"""Where a bundle lives: a private file (0600) and, beside it, evidence with no bodies.

The bundle holds message bodies and stays in private storage. The evidence
file (`<bundle>.evidence.json`) holds hashes and counts only — never a body,
subject, agent name or database URL — so it can be attached to a review.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from agenthub.contracts.inbox_feed import canonical_bytes
from agenthub.hubcore.bundle_rules import SCHEMA
from agenthub.hubcore.canonical import Row, receipt_key
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


# part -> (its count field, its hash field, the key its rows are ordered and hashed by)
PARTS: dict[str, tuple[str, str, Callable[[Row], str]]] = {
    "messages": ("count", "content_hash", lambda r: str(r["id"])),
    "receipts": ("receipts_count", "receipts_hash", receipt_key),
    "tombstones": ("tombstones_count", "tombstones_hash", lambda r: str(r["message_id"])),
}
TRAILER_KEYS = tuple(field for count, digest, _ in PARTS.values() for field in (count, digest))


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


def _breakdown() -> dict[str, int]:
    return {"broadcasts": 0, "archived": 0, "replies": 0, "read": 0}


def _count_into(breakdown: dict[str, int], message: Mapping[str, Any]) -> None:
    breakdown["broadcasts"] += message["to_agent"] == "*"
    breakdown["archived"] += message["archived_at"] is not None
    breakdown["replies"] += message["thread_id"] is not None
    breakdown["read"] += message["read_at"] is not None


def _evidence(
    head: Mapping[str, Any], breakdown: dict[str, int], sha256: str, bundle_name: str
) -> dict[str, Any]:
    source = {k: head["source"][k] for k in EVIDENCE_SOURCE_KEYS if k in head["source"]}
    return {
        "schema": EVIDENCE_SCHEMA,
        "bundle_schema": head["schema"],
        "bundle_file": bundle_name,
        "bundle_sha256": sha256,
        "source": source,
        "captured_at": head["captured_at"],
        **{key: head[key] for key in TRAILER_KEYS},
        "breakdown": breakdown,
    }


def evidence_for(bundle: dict[str, Any], bundle_bytes: bytes, bundle_name: str) -> dict[str, Any]:
    breakdown = _breakdown()
    for message in bundle["messages"]:
        _count_into(breakdown, message)
    return _evidence(bundle, breakdown, hashlib.sha256(bundle_bytes).hexdigest(), bundle_name)


def _write_evidence(path: Path, evidence: dict[str, Any]) -> Path:
    target = evidence_path(path)
    _write_private(target, (json.dumps(evidence, indent=2, sort_keys=True) + "\n").encode())
    return target


class BundleWriter:
    """A v1 bundle written as its rows arrive, so memory does not grow with the inbox.

    The file is the same JSON object `write_bundle` writes, its keys in the order they
    become known: `schema`, then each part's rows (messages, receipts, tombstones, each
    in key order) followed by its count and hash, then `source` and `captured_at`. Each
    part's hash is taken on the way (the rows must arrive strictly ordered by key, which
    is also what makes a duplicate impossible), and so are the file's own sha256 and the
    evidence breakdown. The file is private (0600) from its first byte and appears at
    `path` only once `finish` has written it whole; leaving the block without `finish`
    removes it.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        self._file: BinaryIO | None = None
        self._sha = hashlib.sha256()
        self._head: dict[str, Any] = {"schema": SCHEMA}
        self._breakdown = _breakdown()
        self._max_revision: int | None = None

    def __enter__(self) -> BundleWriter:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self._tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.fchmod(fd, 0o600)
        self._file = os.fdopen(fd, "wb", buffering=1 << 20)
        self._write(b'{"schema":' + orjson.dumps(SCHEMA))
        return self

    def __exit__(self, *exc: object) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        self._tmp.unlink(missing_ok=True)

    def _write(self, data: bytes) -> None:
        assert self._file is not None, "use BundleWriter as a context manager"
        self._sha.update(data)
        self._file.write(data)

    def part(self, part: str, rows: Iterable[Row]) -> None:
        """Write one part's canonical rows (strictly in key order), then its count and hash."""
        count_key, hash_key, key = PARTS[part]
        digest = hashlib.sha256(b"[")
        self._write(f',"{part}":['.encode())
        count, last = 0, ""
        for row in rows:
            this = key(row)
            if count and this <= last:
                raise ValueError(f"{part} rows out of key order at {this!r:.80}")
            text = canonical_bytes(row)
            if count:
                digest.update(b",")
                self._write(b",")
            digest.update(text)
            self._write(text)
            count, last = count + 1, this
            if part == "messages":
                _count_into(self._breakdown, row)
            revision = row["revision"]
            if self._max_revision is None or revision > self._max_revision:
                self._max_revision = revision
        digest.update(b"]")
        self._head[count_key], self._head[hash_key] = count, digest.hexdigest()
        self._write(f'],"{count_key}":{count},"{hash_key}":"{self._head[hash_key]}"'.encode())

    def high_water(self, default: int) -> int:
        """The highest revision written so far (`default` when there were no rows)."""
        return default if self._max_revision is None else self._max_revision

    def finish(self, source: dict[str, Any], captured_at: str) -> tuple[dict[str, Any], Path]:
        """Close the object, move the file into place, write the evidence; the bundle's
        head (everything but its rows) and the evidence path."""
        missing = [part for part in PARTS if PARTS[part][0] not in self._head]
        if missing:
            raise ValueError(f"bundle parts never written: {', '.join(missing)}")
        self._head["source"], self._head["captured_at"] = source, captured_at
        self._write(b',"source":' + orjson.dumps(source, option=orjson.OPT_SORT_KEYS))
        self._write(b',"captured_at":' + orjson.dumps(captured_at) + b"}")
        assert self._file is not None
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        self._file = None
        os.replace(self._tmp, self.path)
        evidence = _evidence(self._head, self._breakdown, self._sha.hexdigest(), self.path.name)
        return dict(self._head), _write_evidence(self.path, evidence)


def write_bundle(bundle: dict[str, Any], path: Path) -> Path:
    """Write the bundle (0600) and its evidence; return the evidence path."""
    data = json.dumps(bundle, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    _write_private(path, data)
    return _write_evidence(path, evidence_for(bundle, data, path.name))


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
