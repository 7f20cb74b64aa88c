"""Where a bundle lives: a private file (0600) and, beside it, evidence with no bodies.

Two layouts of the same content, both written row by row by `BundleWriter`: v1, the
seed's one JSON object (`hub-core.statehub-inbox-snapshot.v1`, what `agenthub hubcore
capture` writes by default; read incrementally by `bundle_objectreader`), and v2, JSON
Lines (`--format jsonl`; read line by line by `read_lines`). Neither capture nor import
holds the inbox in memory.

The bundle holds message bodies and stays in private storage. The evidence
file (`<bundle>.evidence.json`) holds hashes and counts only — never a body,
subject, agent name or database URL — so it can be attached to a review.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO, Literal

import orjson

from agenthub.contracts.inbox_feed import canonical_bytes
from agenthub.hubcore.bundle_rules import BUNDLE_PARTS, SCHEMA, SCHEMA_V2
from agenthub.hubcore.canonical import Row
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


PARTS = BUNDLE_PARTS
# The file layouts `BundleWriter` writes: "json" is v1 (the seed's), "jsonl" v2.
Layout = Literal["json", "jsonl"]
LAYOUTS: tuple[Layout, ...] = ("json", "jsonl")
TRAILER = "trailer"
HEADER_MAX = 4096
PROGRESS_LINES = 5_000
V2_HEADER = orjson.dumps({"schema": SCHEMA_V2}) + b"\n"
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
    """A bundle written as its rows arrive, so memory does not grow with the inbox.

    `layout="json"` (the default) writes v1, the seed's one JSON object, its keys in the
    order they become known: `schema`, then each part's rows (messages, receipts,
    tombstones) followed by its count and hash, then `source` and `captured_at`.
    `json.load` reads it as the same object `write_bundle` writes.

    `layout="jsonl"` writes v2, JSON Lines: the header `{"schema": "…v2"}`, then one line
    per row, `{"part": "messages", "row": {…canonical row…}}`, then the trailer
    `{"part": "trailer", …}` with each part's count and hash, `source` and
    `captured_at`: the fields of the v1 object but its rows.

    Both hash alike: each part's hash is the v1 one, taken on the way (the rows must
    arrive strictly ordered by key, which is also what makes a duplicate impossible), and
    so are the file's own sha256 and the evidence breakdown. The file is private (0600)
    from its first byte and appears at `path` only once `finish` has written it whole;
    leaving the block without `finish` removes it.
    """

    def __init__(self, path: Path, layout: Layout = "json") -> None:
        if layout not in LAYOUTS:
            raise ValueError(f"bundle layout {layout!r} is not one of {', '.join(LAYOUTS)}")
        self.path = path
        self.layout = layout
        self._tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        self._file: BinaryIO | None = None
        self._sha = hashlib.sha256()
        self._head: dict[str, Any] = {"schema": SCHEMA if layout == "json" else SCHEMA_V2}
        self._breakdown = _breakdown()
        self._max_revision: int | None = None
        self._parts_left = list(PARTS)

    def __enter__(self) -> BundleWriter:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self._tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.fchmod(fd, 0o600)
        self._file = os.fdopen(fd, "wb", buffering=1 << 20)
        if self.layout == "json":
            self._write(b'{"schema":' + orjson.dumps(SCHEMA))
        else:
            self._write(V2_HEADER)
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
        """Write one part's canonical rows (strictly in key order); parts in PARTS order."""
        if part not in self._parts_left:
            raise ValueError(f"bundle part {part!r} out of order or written twice")
        del self._parts_left[: self._parts_left.index(part) + 1]
        count_key, hash_key, key = PARTS[part]
        digest = hashlib.sha256(b"[")
        v1 = self.layout == "json"
        if v1:
            self._write(b"," + orjson.dumps(part) + b":[")
            prefix, suffix = b"", b""
        else:
            prefix, suffix = b'{"part":' + orjson.dumps(part) + b',"row":', b"}\n"
        count, last = 0, ""
        # v1 rows are separated by ",", which the part's hash also has between rows: one
        # write and one hash update per row, not two (each was a call per row).
        separator = b"," if v1 else b""
        for row in rows:
            this = key(row)
            if count and this <= last:
                raise ValueError(f"{part} rows out of key order at {this!r:.80}")
            text = canonical_bytes(row)
            if count:
                digest.update(b"," + text)
                self._write(separator + prefix + text + suffix)
            else:
                digest.update(text)
                self._write(prefix + text + suffix)
            count, last = count + 1, this
            if part == "messages":
                _count_into(self._breakdown, row)
            revision = row["revision"]
            if self._max_revision is None or revision > self._max_revision:
                self._max_revision = revision
        digest.update(b"]")
        self._head[count_key], self._head[hash_key] = count, digest.hexdigest()
        if v1:
            self._write(
                b"]," + orjson.dumps(count_key) + b":" + orjson.dumps(count) + b","
                + orjson.dumps(hash_key) + b":" + orjson.dumps(self._head[hash_key])
            )  # fmt: skip

    def counts(self) -> dict[str, int]:
        """The rows written so far, part by part."""
        return {part: self._head.get(PARTS[part][0], 0) for part in PARTS}

    def high_water(self, default: int) -> int:
        """The highest revision written so far (`default` when there were no rows)."""
        return default if self._max_revision is None else self._max_revision

    def finish(self, source: dict[str, Any], captured_at: str) -> tuple[dict[str, Any], Path]:
        """Close the object (v1) or write the trailer (v2), move the file into place, write
        the evidence; the bundle's head (everything but its rows) and the evidence path."""
        missing = [part for part in PARTS if PARTS[part][0] not in self._head]
        if missing:
            raise ValueError(f"bundle parts never written: {', '.join(missing)}")
        self._head["source"], self._head["captured_at"] = source, captured_at
        if self.layout == "json":
            self._write(b',"source":' + orjson.dumps(source, option=orjson.OPT_SORT_KEYS))
            self._write(b',"captured_at":' + orjson.dumps(captured_at) + b"}")
        else:
            trailer = {"part": TRAILER, **{k: v for k, v in self._head.items() if k != "schema"}}
            self._write(orjson.dumps(trailer, option=orjson.OPT_SORT_KEYS) + b"\n")
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


def not_found(path: Path) -> SnapshotRejected:
    return SnapshotRejected(
        "malformed_bundle", f"no bundle at {path}", hint="pass the file capture wrote"
    )


def not_json(path: Path, problem: str) -> SnapshotRejected:
    return SnapshotRejected(
        "malformed_bundle",
        f"{path} is not JSON ({problem})",
        hint="the file is truncated or not a bundle; capture again",
    )


def is_v2(path: Path) -> bool:
    """Whether the file is laid out as JSON Lines: a first line holding only a schema (a
    v1 bundle is one JSON object, with its rows)."""
    try:
        with path.open("rb") as handle:
            first = handle.readline(HEADER_MAX)
    except FileNotFoundError:
        raise not_found(path) from None
    try:
        head = orjson.loads(first) if first.endswith(b"\n") else None
    except orjson.JSONDecodeError:
        return False
    return isinstance(head, dict) and set(head) == {"schema"}


def read_lines(
    path: Path, progress: Callable[[int], None] | None = None
) -> Iterator[tuple[str, Any]]:
    """A v2 bundle line by line: (part, raw row) for each row, then ("trailer", the
    trailer object) last; `progress` is told the bytes read, every PROGRESS_LINES lines
    and at the end. Another schema is `unsupported_schema`; a line that is not JSON, a
    row line without its part and row, a missing trailer (a truncated file) or anything
    after it is `malformed_bundle`."""
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        raise not_found(path) from None
    with handle:
        header = handle.readline(HEADER_MAX)
        if header != V2_HEADER:
            try:
                schema = orjson.loads(header).get("schema")
            except (orjson.JSONDecodeError, AttributeError):
                raise not_json(path, "it does not start with a schema line") from None
            raise SnapshotRejected(
                "unsupported_schema",
                f"bundle schema is {schema!r:.60}, expected {SCHEMA_V2!r}",
                hint="this importer reads v1 and v2 snapshot bundles",
            )
        trailer: Any = None
        unreported = len(header)
        for number, line in enumerate(handle, start=2):
            unreported += len(line)
            if progress is not None and not number % PROGRESS_LINES:
                progress(unreported)
                unreported = 0
            if trailer is not None:
                raise not_json(path, f"line {number} follows the trailer")
            try:
                item = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                raise not_json(path, f"line {number}: {exc}") from None
            if not isinstance(item, dict) or not isinstance(item.get("part"), str):
                raise not_json(path, f"line {number} is not a row or trailer line")
            if item["part"] == TRAILER:
                trailer = item
            elif set(item) != {"part", "row"}:
                raise not_json(path, f"line {number} is not a row line")
            else:
                yield item["part"], item["row"]
        if trailer is None:
            raise not_json(path, "it ends before its trailer line: truncated")
        if progress is not None:
            progress(unreported)
        yield TRAILER, trailer


def read_bundle(path: Path) -> Any:
    """The whole bundle as the one v1 object (a v2 file is read into that object, its
    schema named v1: the rows and hashes are the same). Memory holds every row: the
    streaming import (`bundle_import.import_file`) uses it only for a v1 object whose
    rows are not in key order; `pilot-check` uses it for its oracle."""
    if is_v2(path):
        bundle: dict[str, Any] = {"schema": SCHEMA, **{part: [] for part in PARTS}}
        for part, row in read_lines(path):
            if part == TRAILER:
                bundle.update({k: v for k, v in row.items() if k not in ("part", "schema")})
            else:
                bundle.setdefault(part, []).append(row)
        return bundle
    try:
        return json.loads(path.read_bytes())
    except FileNotFoundError:
        raise not_found(path) from None
    except ValueError as exc:
        raise not_json(path, str(exc)) from None
