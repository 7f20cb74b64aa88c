"""Markdown-with-YAML-frontmatter: strict parsing for promoted sources, lenient parsing
for what is already in the bucket, the message-key allowlist, and serialization.

Frontmatter is a small, flat, hand-written mapping, so the parser refuses what only an
attacker or an accident writes, and refuses it from the event stream, before anything is
built: anchors and aliases (a ~600-byte alias tree expands to 10^7 leaves), nesting deeper
than `MAX_DEPTH` (a recursive constructor's stack), duplicate keys (YAML keeps the last one
silently) and non-finite numbers (served as JSON `null`). A leading UTF-8 BOM is dropped.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import yaml

from agenthub.bucketsync.errors import InvalidFrontmatter, NotOrganizer

# libyaml's loader when PyYAML was built with it: the same safe subset, ~8x faster,
# which is most of a cold read of a large folder.
_BASE_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# libyaml's emitter, for the frontmatter it writes byte for byte as PyYAML's does (see
# `_emits_alike`): five times faster, and every post renders one.
_FAST_DUMPER: type[yaml.SafeDumper] | None = getattr(yaml, "CSafeDumper", None)

# Nesting a frontmatter mapping may have (the message keys need 2: a list of refs).
MAX_DEPTH = 16
_BOM = "\ufeff"

# Keys a promoted message may carry (seed §13, cursor integrity): anything else, notably a
# response-shaped key such as `filename`, `cursor`, `next` or `watch`, is refused.
# `ack_required`/`supersedes` mark a directive (issue 18): like `broadcast`, server-owned.
MESSAGE_KEYS = frozenset(
    {
        "type",
        "refs",
        "agent",
        "timestamp",
        "via",
        "broadcast",
        "channel",
        "ack_required",
        "supersedes",
    }
)
DIRECTIVE_KEYS = ("ack_required", "supersedes")

_SCALARS = (str, int, float, bool, type(None))


@dataclass(frozen=True)
class Document:
    frontmatter: dict[str, Any]
    body: str

    @cached_property
    def search_text(self) -> str:
        """Lower-cased body and frontmatter, what `q=` searches (computed once per file)."""
        header = " ".join(f"{key}: {value}" for key, value in self.frontmatter.items())
        return f"{self.body}\n{header}".lower()


class _Refused(Exception):
    """Why the strict loader refused a header (turned into INVALID_FRONTMATTER)."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class _StrictLoader(_BASE_LOADER):  # type: ignore[valid-type,misc]
    """The safe loader, refusing duplicate keys and non-finite floats while it builds."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _value_node in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                duplicate = key in seen
            except TypeError:
                continue  # an unhashable key: the base constructor reports it
            if duplicate:
                raise _Refused(
                    f"the frontmatter repeats the key {key!r}",
                    hint=f"keep one {key!r} line; YAML would silently keep the last",
                )
            seen.add(key)
        mapping: dict[Any, Any] = super().construct_mapping(node, deep=deep)
        return mapping

    def construct_yaml_float(self, node: yaml.ScalarNode) -> float:
        value: float = super().construct_yaml_float(node)
        if not math.isfinite(value):
            raise _Refused(
                f"the frontmatter value {node.value!r} is not a finite number",
                hint="write a finite number, or quote it to keep it as text",
            )
        return value


_StrictLoader.add_constructor("tag:yaml.org,2002:float", _StrictLoader.construct_yaml_float)


def _check_events(header: str) -> None:
    """Refuse anchors, aliases and deep nesting from the event stream, which costs the
    size of the text: nothing is constructed yet."""
    depth = 0
    for event in yaml.parse(header, Loader=_BASE_LOADER):
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise _Refused(
                "the frontmatter uses a YAML anchor or alias (&name / *name)",
                hint="write each value out; anchors and aliases are not accepted",
            )
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise _Refused(
                    f"the frontmatter nests deeper than {MAX_DEPTH} levels",
                    hint="frontmatter is a flat key: value mapping",
                )
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def _load_header(header: str) -> Any:
    if not header.strip():
        return {}
    try:
        _check_events(header)
        return yaml.load(header, Loader=_StrictLoader)
    except _Refused as refused:
        raise InvalidFrontmatter(refused.message, hint=refused.hint) from None
    except yaml.YAMLError as exc:
        raise InvalidFrontmatter(
            f"the frontmatter is not valid YAML: {str(exc).splitlines()[0]}",
            hint="frontmatter is a YAML mapping between two '---' lines",
        ) from None


def _jsonable(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC)
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def _split(text: str) -> tuple[str | None, str]:
    if not (text.startswith("---\n") or text.startswith("---\r\n")):
        return None, text
    lines = text.splitlines(keepends=True)
    for index in range(1, len(lines)):
        if lines[index].rstrip("\r\n") == "---":
            header = "".join(lines[1:index])
            body = "".join(lines[index + 1 :])
            return header, body.lstrip("\r\n")
    return None, text


def parse_strict(data: bytes) -> Document:
    """Parse a source being promoted: non-UTF-8, unparseable, non-mapping or refused (see
    the module docstring) frontmatter is a 400 INVALID_FRONTMATTER."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidFrontmatter(
            "the source is not valid UTF-8 text", hint="save the file as UTF-8 markdown"
        ) from None
    text = text.removeprefix(_BOM)
    header, body = _split(text)
    if header is None:
        return Document({}, text)
    loaded = _load_header(header)
    if loaded is None:
        loaded = {}
    if not isinstance(loaded, dict):
        raise InvalidFrontmatter(
            f"the frontmatter is a YAML {type(loaded).__name__}, not a mapping",
            hint="write key: value lines between the '---' fences",
        )
    return Document({str(k): _jsonable(v) for k, v in loaded.items()}, body)


def parse_lenient(data: bytes) -> Document:
    """Parse a file already in the bucket; anything malformed degrades to empty frontmatter."""
    text = data.decode("utf-8", errors="replace")
    try:
        return parse_strict(text.encode("utf-8"))
    except InvalidFrontmatter:
        _header, body = _split(text.removeprefix(_BOM))
        return Document({}, body)


def _emits_alike(frontmatter: dict[str, Any]) -> bool:
    """Whether libyaml's emitter writes `frontmatter` exactly as PyYAML's does: plain
    scalars and lists of them, every string printable and in the Basic Multilingual Plane.
    (libyaml escapes characters beyond it, an emoji say, which PyYAML writes as they are;
    both read back the same, but a file in the bucket should not change with the build.)"""
    for key, value in frontmatter.items():
        if not isinstance(key, str) or not _plain_text(key):
            return False
        for item in value if isinstance(value, list) else (value,):
            if isinstance(item, str):
                if not _plain_text(item):
                    return False
            elif not isinstance(item, _SCALARS):
                return False
    return True


def _plain_text(text: str) -> bool:
    return text.isprintable() and (text.isascii() or max(text) < "\U00010000")


def check_message_keys(frontmatter: dict[str, Any]) -> None:
    """Enforce the message frontmatter allowlist and scalar-only values."""
    if "broadcast" in frontmatter:
        raise NotOrganizer(
            "only organizers can broadcast; 'broadcast' is not allowed in source frontmatter",
            hint="remove the broadcast key",
        )
    for key in DIRECTIVE_KEYS:
        if key in frontmatter:
            raise NotOrganizer(
                f"only organizers post directives; {key!r} is not allowed in source frontmatter",
                hint=f"remove the {key} key (organizers use POST /v1/directives)",
            )
    if "channel" in frontmatter:
        raise InvalidFrontmatter(
            "'channel' is set by the server, not by source frontmatter",
            hint="remove the channel key",
        )
    for key, value in frontmatter.items():
        if key not in MESSAGE_KEYS:
            raise InvalidFrontmatter(
                f"frontmatter key {key!r} is not allowed on a message",
                hint="allowed keys: " + ", ".join(sorted(MESSAGE_KEYS)),
            )
        if key == "refs" and isinstance(value, list):
            if not all(isinstance(v, _SCALARS) for v in value):
                raise InvalidFrontmatter("'refs' must be a list of filenames, not nested values")
        elif not isinstance(value, _SCALARS):
            raise InvalidFrontmatter(
                f"frontmatter key {key!r} must be a scalar value, got {type(value).__name__}"
            )


def render(frontmatter: dict[str, Any], body: str) -> bytes:
    alike = _FAST_DUMPER is not None and _emits_alike(frontmatter)
    dumper = (_FAST_DUMPER if alike else None) or yaml.SafeDumper
    header = yaml.dump(frontmatter, Dumper=dumper, sort_keys=False, allow_unicode=True, width=1000)
    body = body if body.endswith("\n") or not body else body + "\n"
    return f"---\n{header}---\n\n{body}".encode()
