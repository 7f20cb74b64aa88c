"""Lineage: the graph of what each result `builds_on`, and the credit it gives.

The graph has no store of its own: it is derived from the stored results through the
read model (the `results/` listing and the content cache the leaderboard also reads), and
kept per read model across listing versions, so a new result costs one parse and its
edges, not a rebuild (`Graph.current`). Edges run from a result to each node it names
(results, board messages, artifacts, shared resources); only results have out-edges.

Credit: agent A is credited once for each result by another agent that builds on at
least one of A's works; building on your own work earns nothing.

At promotion (`problems`, `closing_problems`) every reference must exist, and a result
may neither name itself nor close a cycle (possible only through a stored result that
names a filename not yet written, e.g. one edited out of band).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from agenthub.bucketsync.core import naming
from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.core.perreadmodel import PerReadModel
from agenthub.bucketsync.results import references
from agenthub.bucketsync.results.references import FIELD, Node
from agenthub.bucketsync.storage.base import FileEntry


def _problem(message: str, hint: str = references.EXAMPLE) -> dict[str, str]:
    return {"field": FIELD, "message": message, "hint": hint}


def problems(hub: Hub, author: str, fm: Mapping[str, Any]) -> list[dict[str, str]]:
    """Every problem of a new result's `builds_on` (its shape, each reference's
    existence), in entry order. A missing reference to one of the author's own results
    is left to `closing_problems`: it may be the result being promoted (a self-reference)."""
    raw = references.raw_list(fm)
    if raw is None:
        return [_problem(f"{FIELD} must be a list of paths or filenames")]
    if len(raw) > references.MAX_REFERENCES:
        return [_problem(f"{FIELD} names {len(raw)} works; at most {references.MAX_REFERENCES}")]
    found: list[dict[str, str]] = []
    for entry in raw:
        node = references.resolve(hub, entry)
        if isinstance(node, Node):
            continue
        parsed = references.parse(entry, central=hub.central)
        if isinstance(parsed, list) and (parsed[0].kind, parsed[0].agent) == (
            references.RESULT,
            author,
        ):
            continue  # decided once the new result has its filename
        hint = (
            "list what exists with GET /v1/results or GET /v1/messages"
            if "does not exist" in node
            else references.EXAMPLE
        )
        found.append(_problem(node, hint))
    return found


def closing_problems(hub: Hub, filename: str, fm: Mapping[str, Any]) -> list[dict[str, str]]:
    """The problems only the new result's filename shows: a reference to itself, one to
    an own result that does not exist, and a cycle closed through a stored result."""
    graph = graph_of(hub)
    parsed_name = naming.parse_stamped_filename(filename)
    author = parsed_name[1] if parsed_name else None
    found: list[dict[str, str]] = []
    for entry in references.raw_list(fm) or []:
        parsed = references.parse(entry, central=hub.central)
        if isinstance(parsed, str):
            continue  # reported by `problems`
        name = parsed[0].name
        if name == filename:
            found.append(_problem(f"{FIELD} names this result itself ({filename})", "drop it"))
        elif (
            parsed[0].kind == references.RESULT
            and parsed[0].agent == author
            and isinstance(references.resolve(hub, entry), str)
        ):
            found.append(
                _problem(f"{FIELD}: {entry!r} does not exist", "list them with GET /v1/results")
            )
        elif filename in graph.ancestors_of([name]):
            found.append(
                _problem(
                    f"{FIELD}: {name!r} already builds on {filename}: that would be a cycle",
                    "a result builds only on earlier work; drop the reference",
                )
            )
    return found


def credited(hub: Hub, author: str, fm: Mapping[str, Any]) -> dict[str, list[str]]:
    """Owner -> the names of their works a new result by `author` builds on (others only)."""
    listed = hub.read_model.entries(naming.RESULTS)
    owners: dict[str, list[str]] = {}
    for node in references.stored(fm, central=hub.central, is_result=listed.__contains__):
        if node.agent is not None and node.agent != author:
            owners.setdefault(node.agent, []).append(node.name)
    return owners


@dataclass(frozen=True)
class Edges:
    """One result's out-edges as the graph holds them."""

    author: str
    nodes: tuple[Node, ...]

    @property
    def owners(self) -> frozenset[str]:
        return frozenset(n.agent for n in self.nodes if n.agent is not None) - {self.author}


class Graph:
    """The lineage graph of one read model, updated per `results/` listing version.

    Nodes are keyed by `Node.name`: results and messages by filename (stamps are unique
    across the board, channels and results), so a stored reference to a result written
    later joins the graph once that result exists; anything else by its path."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._version = -1
        self._read: dict[str, FileEntry] = {}  # result path -> the entry it was read at
        self._other: set[str] = set()  # listed paths that are no result (pins, the index)
        self.out: dict[str, Edges] = {}  # result filename -> what it builds on
        self.into: dict[str, set[str]] = {}  # node name -> results building on it
        self.nodes: dict[str, Node] = {}  # node name -> the node (results: as listed)
        self.credit: Counter[str] = Counter()  # agent -> results of others on their work
        self.builders: dict[str, Counter[str]] = {}  # agent -> builder -> results
        self.crediting = 0  # results that build on at least one other agent's work

    def _unlink(self, name: str) -> None:
        edges = self.out.pop(name, None)
        if edges is None:
            return
        self.crediting -= bool(edges.owners)
        for node in edges.nodes:
            self.into.get(node.name, set()).discard(name)
        for owner in edges.owners:
            self.credit[owner] -= 1
            self.builders[owner][edges.author] -= 1
            if not self.builders[owner][edges.author]:
                del self.builders[owner][edges.author]

    def _link(self, name: str, edges: Edges) -> None:
        self.out[name] = edges
        self.crediting += bool(edges.owners)
        for node in edges.nodes:
            self.into.setdefault(node.name, set()).add(name)
            self.nodes.setdefault(node.name, node)
        for owner in edges.owners:
            self.credit[owner] += 1
            self.builders.setdefault(owner, Counter())[edges.author] += 1

    def current(self, hub: Hub) -> Graph:
        """This graph brought up to the `results/` listing (a no-op when it is)."""
        version = hub.read_model.version(naming.RESULTS)
        listed = hub.read_model.entries(naming.RESULTS)
        with self._lock:
            if version == self._version:
                return self
            changed, seen = [], 0
            # Unchanged entries are the same objects across listing versions (writes copy
            # the listing): an identity check per result, a name check per new path.
            for path, entry in listed.items():
                known = self._read.get(path)
                if known is None:
                    if path in self._other:
                        continue
                    if _is_result(path):
                        changed.append(path)
                    else:
                        self._other.add(path)
                    continue
                seen += 1
                if known is not entry and known.content_hash != entry.content_hash:
                    changed.append(path)
            if seen < len(self._read):  # some result left the listing
                for gone in [p for p in self._read if p not in listed]:
                    del self._read[gone]
                    self._unlink(gone[len(naming.RESULTS) :])
            for record in hub.read_model.records(changed, naming.RESULTS).values():
                name = record.filename
                self._unlink(name)
                self._read[record.path] = listed[record.path]
                author = naming.parse_stamped_filename(name)
                by = author[1] if author else ""
                self.nodes[name] = Node(record.path, references.RESULT, by)
                nodes = references.stored(
                    record.frontmatter, central=hub.central, is_result=listed.__contains__
                )
                if nodes:
                    self._link(name, Edges(by, tuple(nodes)))
            self._version = version
            return self

    def ancestors_of(self, start: Iterable[str], *, depth: int = 10_000) -> dict[str, int]:
        """Node name -> its distance from `start` (1 for what they name directly)."""
        return self._walk(start, self.builds_on, depth)

    def descendants_of(self, start: Iterable[str], *, depth: int = 10_000) -> dict[str, int]:
        return self._walk(start, lambda name: sorted(self.into.get(name, ())), depth)

    def builds_on(self, name: str) -> list[str]:
        """The names result `name` builds on (none for anything else)."""
        edges = self.out.get(name)
        return [n.name for n in edges.nodes] if edges is not None else []

    def _walk(
        self, start: Iterable[str], step: Callable[[str], list[str]], depth: int
    ) -> dict[str, int]:
        """Breadth first from `start` up to `depth` steps (a stored cycle ends the walk)."""
        with self._lock:
            seen: dict[str, int] = {}
            frontier = list(start)
            for level in range(1, depth + 1):
                following = []
                for name in frontier:
                    for nxt in step(name):
                        if nxt not in seen:
                            seen[nxt] = level
                            following.append(nxt)
                if not following:
                    break
                frontier = following
            return seen


def _is_result(path: str) -> bool:
    rest = path[len(naming.RESULTS) :]
    return "/" not in rest and naming.parse_stamped_filename(rest) is not None


_GRAPHS = PerReadModel(Graph)


def graph_of(hub: Hub) -> Graph:
    return _GRAPHS.of(hub.read_model).current(hub)


def credit_of(hub: Hub, agent: str) -> dict[str, int]:
    """`{credit, built_on_by}`: results of others that build on `agent`'s work, and how
    many distinct agents wrote them."""
    return credits_of(hub, [agent])[agent]


def credits_of(hub: Hub, agents: Iterable[str]) -> dict[str, dict[str, int]]:
    graph = graph_of(hub)
    with graph._lock:
        return {
            a: {"credit": graph.credit[a], "built_on_by": len(graph.builders.get(a, ()))}
            for a in agents
        }


def top_credits(hub: Hub, limit: int = 10) -> list[dict[str, Any]]:
    """The most built-on agents, most credit first (then agent id)."""
    graph = graph_of(hub)
    with graph._lock:
        ranked = sorted((-n, a) for a, n in graph.credit.items() if n > 0)[:limit]
    return [
        {"agent": a, **credit} for a, credit in credits_of(hub, [a for _n, a in ranked]).items()
    ]
