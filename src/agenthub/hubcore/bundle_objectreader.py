"""A v1 bundle (the seed's one JSON object) read incrementally, so import memory does not
grow with the inbox.

`read_object(path)` yields `(part, raw row)` for each row of `messages`, `receipts` and
`tombstones` as the parser reaches it, then `(TRAILER, head)` last: every other known
top-level field (`schema`, `source`, `captured_at`, the counts and hashes), and each part
that was a list as `[]` (its rows were yielded, not kept). The keys may come in any order
(`agenthub hubcore capture` writes the ones needing every row after the rows;
`write_bundle` sorts them); fields the rules do not read are skipped unbuilt.

The JSON is parsed by ijson (its C backend, yajl2_c, when installed): a file that is not
JSON, is truncated, or holds more after the object is `malformed_bundle`; a top level
that is not an object is `malformed_bundle` as the whole-file reader says it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import ijson

from agenthub.hubcore.bundle_rules import BUNDLE_PARTS, HEAD_FIELDS, check_schema
from agenthub.hubcore.bundlefile import TRAILER, not_found, not_json
from agenthub.hubcore.errors import SnapshotRejected

try:
    _IJSON: Any = ijson.get_backend("yajl2_c")
except ImportError:  # pragma: no cover - the pure-Python backend: slower, same events
    _IJSON = ijson
READ_BUFFER = 1 << 16
_OPEN = frozenset(("start_map", "start_array"))
_CLOSE = frozenset(("end_map", "end_array"))
_SCALAR_TYPES = {"string": "str", "number": "int", "boolean": "bool", "null": "NoneType"}
Events = Iterator[tuple[str, Any]]


def _build(event: str, value: Any, events: Events) -> Any:
    """The value starting with (`event`, `value`), its nested events taken from `events`."""
    if event not in _OPEN:
        return value
    builder = ijson.ObjectBuilder()
    builder.event(event, value)
    depth = 1
    for event, value in events:
        builder.event(event, value)
        if event in _OPEN:
            depth += 1
        elif event in _CLOSE:
            depth -= 1
            if not depth:
                break
    return builder.value


def _skip(event: str, events: Events) -> None:
    if event not in _OPEN:
        return
    depth = 1
    for event, _ in events:
        if event in _OPEN:
            depth += 1
        elif event in _CLOSE:
            depth -= 1
            if not depth:
                return


def _rows(part: str, events: Events) -> Iterator[tuple[str, Any]]:
    """Each item of the array just opened, as a row; a row's fields are scalars (anything
    else is built whole, for the rules to refuse)."""
    for event, value in events:
        if event == "start_map":
            row: dict[str, Any] = {}
            key = ""
            for event, value in events:
                if event == "map_key":
                    key = value
                elif event == "end_map":
                    break
                elif event in _OPEN:
                    row[key] = _build(event, value, events)
                else:
                    row[key] = value
            yield part, row
        elif event == "end_array":
            return
        else:
            yield part, _build(event, value, events)


def _next(events: Events) -> tuple[str, Any]:
    item = next(events, None)
    if item is None:  # the parser raises this itself at a premature end; never trust it
        raise ijson.IncompleteJSONError("the document ends early")
    return item


def _walk(events: Events) -> Iterator[tuple[str, Any]]:
    event, value = _next(events)
    if event != "start_map":
        kind = "list" if event == "start_array" else _SCALAR_TYPES.get(event, event)
        raise SnapshotRejected(
            "malformed_bundle",
            f"a bundle is a JSON object, got {kind}",
            hint="pass the file `agenthub hubcore capture` wrote",
        )
    head: dict[str, Any] = {}
    for event, key in events:
        if event == "end_map":
            break
        event, value = _next(events)
        if key in BUNDLE_PARTS and event == "start_array":
            head[key] = []
            yield from _rows(key, events)
        elif key in HEAD_FIELDS or key in BUNDLE_PARTS:
            head[key] = _build(event, value, events)
            if key == "schema":
                check_schema(head)  # a wrong schema is refused before any row is read
        else:
            _skip(event, events)
    for _ in events:  # the parser refuses anything after the object (`trailing garbage`)
        pass
    yield TRAILER, head


class _Counted:
    """A file's `read`, telling `progress` the size of each chunk ijson takes."""

    def __init__(self, read: Callable[[int], bytes], progress: Callable[[int], None]) -> None:
        self._read = read
        self._progress = progress

    def read(self, size: int) -> bytes:
        data = self._read(size)
        self._progress(len(data))
        return data


def read_object(
    path: Path, progress: Callable[[int], None] | None = None
) -> Iterator[tuple[str, Any]]:
    """A v1 bundle as it is parsed: (part, raw row) for each row, then (TRAILER, head);
    `progress` is told how many bytes each read took (a progress bar's total is the
    file's size)."""
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        raise not_found(path) from None
    with handle:
        source: Any = handle if progress is None else _Counted(handle.read, progress)
        events = iter(_IJSON.basic_parse(source, buf_size=READ_BUFFER, use_float=True))
        try:
            yield from _walk(events)
        except ijson.IncompleteJSONError as exc:
            raise not_json(path, f"it ends mid-value: truncated ({exc})") from None
        except ijson.JSONError as exc:
            raise not_json(path, str(exc)[:200]) from None
