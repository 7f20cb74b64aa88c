"""Server-derived names: agent ids, handles, stamps, central paths, and source URIs.

Every central target path is composed here from an agent id and a server stamp; clients
never choose destination paths (seed §2).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import unquote

from agenthub.bucketsync.errors import InvalidPath, InvalidQuery

AGENT_ID_RE = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,38}[a-z0-9])?$")
HUMAN_HANDLE_RE = re.compile(r"^human-[a-z0-9](?:[a-z0-9-]{0,38}[a-z0-9])?$")
STAMP_RE = re.compile(r"^\d{8}-\d{6}-\d{3}$")
STAMPED_FILENAME_RE = re.compile(
    r"^(?P<stamp>\d{8}-\d{6}-\d{3})_(?P<agent>[a-z0-9](?:[a-z0-9-]{0,38}[a-z0-9])?)\.md$"
)
STAMP_LEN = 19

AGENTS = "agents/"
MESSAGE_BOARD = "message_board/"
RESULTS = "results/"
INBOX = "inbox/"
BROADCASTS = "broadcasts/"
CLAIMS = "claims/"
ACKS = "acks/"
HANDSHAKE_FILE = ".bucket-sync-handshake"

BLOCKED_FILES = frozenset({"README.md", "LEADERBOARD.md", "shared_resources/README.md"})
BLOCKED_PREFIXES = ("audit/", "inbox/")


def validate_agent_id(agent_id: str, *, for_registration: bool = False) -> str:
    """Return the id if it is a valid agent id; raise INVALID_PATH with a hint otherwise."""
    if not isinstance(agent_id, str) or not agent_id:
        raise InvalidPath("agent_id is empty", hint="use 1-40 of [a-z0-9-], e.g. 'agent-1'")
    if agent_id != agent_id.lower() and AGENT_ID_RE.match(agent_id.lower()):
        raise InvalidPath(
            f"agent_id {agent_id!r} has upper-case letters; ids are lower-case",
            hint=f"use {agent_id.lower()!r}",
        )
    if for_registration and (agent_id == "human" or agent_id.startswith("human-")):
        raise InvalidPath(
            f"agent_id {agent_id!r} is reserved: 'human' and 'human-*' identify people",
            hint="pick an id that does not start with 'human'",
        )
    if not AGENT_ID_RE.match(agent_id):
        raise InvalidPath(
            f"agent_id {agent_id!r} is not valid",
            hint="1-40 characters of [a-z0-9-], starting and ending with a letter or digit",
        )
    return agent_id


def is_human_handle(handle: str) -> bool:
    return bool(HUMAN_HANDLE_RE.match(handle))


def validate_handle(handle: str) -> str:
    """An inbox handle: an agent id or `human-<name>`; bare `human` routes nowhere."""
    if is_human_handle(handle):
        return handle
    return validate_agent_id(handle)


def stamp(moment: datetime) -> str:
    moment = moment.astimezone(UTC)
    return moment.strftime("%Y%m%d-%H%M%S-") + f"{moment.microsecond // 1000:03d}"


def stamp_from_ms(epoch_ms: int) -> str:
    return stamp(datetime.fromtimestamp(epoch_ms / 1000, tz=UTC))


def stamp_to_iso(value: str) -> str:
    moment = datetime.strptime(value, "%Y%m%d-%H%M%S-%f").replace(tzinfo=UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def iso_now(moment: datetime, timespec: str = "seconds") -> str:
    """`moment` as the ISO 8601 UTC text with `Z` every response and frontmatter uses."""
    return moment.astimezone(UTC).isoformat(timespec=timespec).replace("+00:00", "Z")


# agent-collabs writes `joined`/`timestamp`/`promoted_at` as `YYYY-MM-DD HH:MM UTC`.
UPSTREAM_MOMENT_FORMAT = "%Y-%m-%d %H:%M UTC"


def parse_moment(value: object) -> datetime | None:
    """A frontmatter timestamp in any shape a bucket holds (ISO 8601 with or without `Z`,
    a YAML datetime, or agent-collabs' `YYYY-MM-DD HH:MM UTC`), as an aware UTC datetime;
    None when it is none of them."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if not isinstance(value, str):
        return None
    text = value.strip()
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        try:
            moment = datetime.strptime(text, UPSTREAM_MOMENT_FORMAT)
        except ValueError:
            return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def message_filename(stamp_value: str, agent_id: str) -> str:
    return f"{stamp_value}_{agent_id}.md"


def parse_stamped_filename(filename: str) -> tuple[str, str] | None:
    """`(stamp, agent)` for a `{stamp}_{agent}.md` filename, else None."""
    match = STAMPED_FILENAME_RE.match(filename)
    return (match["stamp"], match["agent"]) if match else None


# Board files not minted by our stamper, e.g. agent-collabs' dashboard human posts
# `YYYYMMDD-HHmmss_human-<name>_<uuid8>.md`: a time prefix (millis optional), an author.
_LOOSE_STAMPED_RE = re.compile(
    r"^(?P<stamp>\d{8}-\d{6})(?:-(?P<ms>\d{3}))?_(?P<author>[a-z0-9](?:[a-z0-9-]{0,78}[a-z0-9])?)"
    r"(?:_[^/]*)?\.md$"
)


def read_board_filename(filename: str) -> tuple[str | None, str | None] | None:
    """`(stamp, author)` for any markdown file a board-style folder holds, so nothing on
    the board is invisible: ours give both; a file with only a time prefix gives that
    prefix as a stamp (`-000` millis when it has none) and its author when it names one;
    any other `*.md` gives `(None, None)` (it sorts after every stamped file). None for
    what is not a visible markdown leaf."""
    parsed = parse_stamped_filename(filename)
    if parsed is not None:
        return parsed
    if "/" in filename or filename.startswith(".") or not filename.endswith(".md"):
        return None
    match = _LOOSE_STAMPED_RE.match(filename)
    if match is None:
        return None, None
    author = match["author"]
    if not (is_human_handle(author) or AGENT_ID_RE.match(author)):
        author = None
    return f"{match['stamp']}-{match['ms'] or '000'}", author


def registration_path(agent_id: str) -> str:
    return f"{AGENTS}{agent_id}.md"


def inbox_path(handle: str, filename: str) -> str:
    return f"{INBOX}{handle}/{filename}"


def broadcast_path(filename: str) -> str:
    return f"{BROADCASTS}{filename}"


def result_path(filename: str) -> str:
    return f"{RESULTS}{filename}"


def claim_path(filename: str) -> str:
    return f"{CLAIMS}{filename}"


def ack_path(directive: str, handle: str) -> str:
    """`acks/{directive stem}/{handle}.md`: one marker per acknowledging handle."""
    return f"{ACKS}{directive.removesuffix('.md')}/{validate_handle(handle)}.md"


# Conventions of features that plug in later (channels §12, traces §10), fixed here so every
# writer composes them the same way.
def channel_readme_path(channel: str) -> str:
    return f"channels/{validate_agent_id(channel)}/README.md"


def validate_room_name(name: str, *, kind: str, example: str) -> str:
    """A channel's or a taskforce's name: an agent-id-shaped slug; upper case is refused
    with the lower-case name as the hint."""
    if not AGENT_ID_RE.match(name):
        lowered = name.lower()
        hint = (
            f"{kind} names are lowercase: use {lowered!r}"
            if AGENT_ID_RE.match(lowered)
            else f"1-40 of a-z, 0-9 and inner hyphens, e.g. {example!r}"
        )
        raise InvalidPath(f"{name!r} is not a valid {kind} name", hint=hint)
    return name


def channel_message_path(channel: str, filename: str) -> str:
    return f"channels/{validate_agent_id(channel)}/{filename}"


def channel_member_path(channel: str, handle: str) -> str:
    return f"channels/{validate_agent_id(channel)}/members/{validate_handle(handle)}.md"


def trace_manifest_path(agent_id: str, session: str) -> str:
    validate_components(session)
    if "/" in session:
        raise InvalidPath(f"session {session!r} must be a single path component")
    return f"traces/{validate_agent_id(agent_id)}/{session}/manifest.md"


def normalize_time_bound(value: str, *, name: str) -> str:
    """`since`/`until` as a compact stamp prefix: ISO 8601 or `YYYYMMDD[-HHmmss[-mmm]]`."""
    value = value.strip()
    if re.fullmatch(r"\d{8}(-\d{6}(-\d{3})?)?", value):
        return value
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidQuery(
            f"{name}={value!r} is not a timestamp",
            hint="use ISO 8601 (2026-01-31T12:00:00Z) or a compact stamp (20260131-120000-000)",
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return stamp(moment)


def validate_components(path: str, *, allow_dotfiles: bool = False) -> list[str]:
    """Split a bucket-relative path and reject traversal, dot files and control characters."""
    if not path:
        raise InvalidPath("path is empty", hint="name a file, e.g. notes/msg.md")
    if path.startswith("/") or "\\" in path:
        raise InvalidPath(f"path {path!r} must be relative and use '/'")
    parts = path.split("/")
    for part in parts:
        for candidate in {part, unquote(part)}:
            if candidate in ("", ".", ".."):
                raise InvalidPath(
                    f"path {path!r} has an empty, '.' or '..' component",
                    hint="paths are plain relative names without traversal",
                )
            if "/" in candidate or "\\" in candidate:
                raise InvalidPath(f"path {path!r} has an encoded separator")
            if candidate.startswith(".") and not allow_dotfiles:
                raise InvalidPath(
                    f"path {path!r} has a dot-file component {candidate!r}",
                    hint="dot files are not promoted; rename the file",
                )
            if any(unicodedata.category(ch) in ("Cc", "Cf") for ch in candidate):
                raise InvalidPath(f"path {path!r} contains control characters")
    return parts


def check_not_blocked(target: str) -> None:
    if target in BLOCKED_FILES or target.startswith(BLOCKED_PREFIXES):
        raise InvalidPath(
            f"{target!r} is a protected path in the central bucket",
            hint="README.md, LEADERBOARD.md, shared_resources/README.md, audit/ and inbox/ "
            "are written only by the server",
        )


@dataclass(frozen=True)
class SourceRef:
    """A parsed `hf://buckets/{ORG}/{COLLAB_SLUG}-{agent_id}/{path}` source URI."""

    uri: str
    bucket: str
    agent_id: str
    path: str


def parse_source(uri: str, *, org: str, collab_slug: str) -> SourceRef:
    example = f"hf://buckets/{org}/{collab_slug}-<agent_id>/path/to/file.md"
    prefix = "hf://buckets/"
    if not isinstance(uri, str) or not uri.startswith(prefix):
        raise InvalidPath(f"source {uri!r} is not an hf://buckets/ URI", hint=f"use {example}")
    rest = uri[len(prefix) :]
    namespace, _, rest = rest.partition("/")
    bucket_name, _, path = rest.partition("/")
    if namespace != org:
        raise InvalidPath(
            f"source bucket must be in the org {org!r}, not {namespace!r}", hint=f"use {example}"
        )
    scratch_prefix = f"{collab_slug}-"
    if not bucket_name.startswith(scratch_prefix):
        raise InvalidPath(
            f"source must be in your scratch bucket {org}/{collab_slug}-<agent_id>",
            hint=f"use {example}",
        )
    agent_id = validate_agent_id(bucket_name[len(scratch_prefix) :])
    # One trailing slash names a folder (syncs); no other empty component is allowed.
    validate_components(path[:-1] if path.endswith("/") else path)
    return SourceRef(uri=uri, bucket=f"{org}/{bucket_name}", agent_id=agent_id, path=path)
