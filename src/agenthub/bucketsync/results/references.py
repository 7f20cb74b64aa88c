"""`builds_on` references: what a result names as the work it built on, and whether it is
there.

A reference names a result (`results/{stamp}_{agent}.md`), a board message
(`message_board/{stamp}_{agent}.md`), an artifact (`artifacts/{slug}_{agent}/…`, a file
or the folder) or a shared resource (`shared_resources/…_{agent}…`), by its path in the
central bucket, the same path as an `hf://buckets/{central}/…` URI, or — for a result or
a message — by its bare filename (a result first, then a board message). Each resolves
to one node of the lineage graph: its central path, its kind and its author.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from agenthub.bucketsync.core import naming
from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.errors import InvalidPath

FIELD = "builds_on"
ARTIFACTS = "artifacts/"
SHARED = "shared_resources/"
RESULT, MESSAGE, ARTIFACT, SHARED_RESOURCE = "result", "message", "artifact", "shared_resource"
MAX_REFERENCES = 50  # per result: a lineage, not a bibliography dump
EXAMPLE = f"{FIELD}: [results/20260101-120000-000_agent-1.md, message_board/…, artifacts/…]"


@dataclass(frozen=True)
class Node:
    """One node of the graph: a central path, its kind, and its author (None when the
    path names none, e.g. a shared resource outside the `_{agent}` convention)."""

    path: str
    kind: str
    agent: str | None

    @property
    def name(self) -> str:
        """How routes name it: a result or message by filename, anything else by path."""
        return self.path.rsplit("/", 1)[-1] if self.kind in (RESULT, MESSAGE) else self.path


def _agent_suffix(component: str) -> str | None:
    stem = component.split(".", 1)[0]
    if "_" not in stem:
        return None
    candidate = stem.rsplit("_", 1)[1]
    return candidate if naming.AGENT_ID_RE.match(candidate) else None


def parse(raw: object, *, central: str) -> list[Node] | str:
    """The candidate nodes `raw` may name (two for a bare filename: result, then
    message), or why it names none."""
    if not isinstance(raw, str) or not raw.strip():
        return f"a {FIELD} entry must be a path or filename, got {raw!r}"
    text = raw.strip()
    for prefix in (f"hf://buckets/{central}/", f"{central}/"):
        text = text.removeprefix(prefix)
    text = text.rstrip("/")
    try:
        parts = naming.validate_components(text)
    except InvalidPath as exc:
        return exc.message
    if len(parts) == 1:
        parsed = naming.parse_stamped_filename(text)
        if parsed is None:
            return f"{raw!r} is not a result or message filename ({{stamp}}_{{agent}}.md)"
        return [
            Node(f"{naming.RESULTS}{text}", RESULT, parsed[1]),
            Node(f"{naming.MESSAGE_BOARD}{text}", MESSAGE, parsed[1]),
        ]
    folder, rest = parts[0] + "/", parts[1:]
    if folder in (naming.RESULTS, naming.MESSAGE_BOARD):
        parsed = naming.parse_stamped_filename(rest[0]) if len(rest) == 1 else None
        if parsed is None:
            return f"{raw!r} is not a {folder}{{stamp}}_{{agent}}.md file"
        return [Node(text, RESULT if folder == naming.RESULTS else MESSAGE, parsed[1])]
    if folder == ARTIFACTS:
        return [Node(text, ARTIFACT, _agent_suffix(rest[0]))]
    if folder == SHARED:
        author = next((a for a in map(_agent_suffix, rest) if a is not None), None)
        return [Node(text, SHARED_RESOURCE, author)]
    return f"{raw!r} names no result, board message, artifact or shared resource"


def raw_list(fm: Mapping[str, Any]) -> list[object] | None:
    """The `builds_on` entries as written (a single string is one entry); None when the
    field is absent, or not a list or string."""
    value = fm.get(FIELD)
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return list(value)
    return None


def stored(fm: Mapping[str, Any], *, central: str, is_result: Callable[[str], bool]) -> list[Node]:
    """The nodes a stored result builds on, read without touching the bucket: a bare
    filename is a result when one is listed by that name, else a message; entries that
    parse to nothing are skipped (promotion refused them; an edited file may hold any)."""
    found: dict[str, Node] = {}
    for raw in raw_list(fm) or []:
        candidates = parse(raw, central=central)
        if isinstance(candidates, str):
            continue
        chosen = next((n for n in candidates if n.kind != RESULT or is_result(n.path)), None)
        chosen = chosen or candidates[0]
        found.setdefault(chosen.path, chosen)
    return list(found.values())


def exists(hub: Hub, node: Node) -> bool:
    """Whether `node` is in the central bucket now (results and messages from the read
    model, artifacts and shared resources from one listing of their prefix)."""
    if node.kind == RESULT:
        return node.path in hub.read_model.entries(naming.RESULTS)
    if node.kind == MESSAGE:
        return node.path in hub.read_model.entries(naming.MESSAGE_BOARD)
    listed = hub.store.list(hub.central, node.path, recursive=True)
    return any(e.path == node.path or e.path.startswith(node.path + "/") for e in listed)


def resolve(hub: Hub, raw: object) -> Node | str:
    """The existing node `raw` names, or what is wrong with it (the problem's message)."""
    candidates = parse(raw, central=hub.central)
    if isinstance(candidates, str):
        return candidates
    for node in candidates:
        if exists(hub, node):
            return node
    where = " or ".join(n.path for n in candidates)
    return f"{FIELD}: {raw!r} does not exist (looked for {where})"
