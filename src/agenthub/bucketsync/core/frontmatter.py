"""Markdown-with-YAML-frontmatter: strict parsing for promoted sources, lenient parsing
for what is already in the bucket, the message-key allowlist, and serialization."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import yaml

from agenthub.bucketsync.errors import InvalidFrontmatter, NotOrganizer

# libyaml's loader when PyYAML was built with it: the same safe subset, ~8x faster,
# which is most of a cold read of a large folder.
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# Keys a promoted message may carry (seed §13, cursor integrity): anything else, notably a
# response-shaped key such as `filename`, `cursor`, `next` or `watch`, is refused.
MESSAGE_KEYS = frozenset({"type", "refs", "agent", "timestamp", "via", "broadcast", "channel"})

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
    """Parse a source being promoted: non-UTF-8, unparseable or non-mapping frontmatter
    is a 400 INVALID_FRONTMATTER."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidFrontmatter(
            "the source is not valid UTF-8 text", hint="save the file as UTF-8 markdown"
        ) from None
    header, body = _split(text)
    if header is None:
        return Document({}, text)
    try:
        loaded = yaml.load(header, Loader=_SAFE_LOADER) if header.strip() else {}
    except yaml.YAMLError as exc:
        raise InvalidFrontmatter(
            f"the frontmatter is not valid YAML: {str(exc).splitlines()[0]}",
            hint="frontmatter is a YAML mapping between two '---' lines",
        ) from None
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
        _header, body = _split(text)
        return Document({}, body)


def check_message_keys(frontmatter: dict[str, Any]) -> None:
    """Enforce the message frontmatter allowlist and scalar-only values."""
    if "broadcast" in frontmatter:
        raise NotOrganizer(
            "only organizers can broadcast; 'broadcast' is not allowed in source frontmatter",
            hint="remove the broadcast key",
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
    header = yaml.safe_dump(frontmatter, sort_keys=False, allow_unicode=True, width=1000)
    body = body if body.endswith("\n") or not body else body + "\n"
    return f"---\n{header}---\n\n{body}".encode()
