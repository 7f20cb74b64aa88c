"""`GET /v1/lineage/{name}`: a work's ancestors and descendants, bounded, and the credit
blocks the leaderboard and the digest carry."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agenthub.bucketsync.core import naming
from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.errors import InvalidQuery, NotFound
from agenthub.bucketsync.results import lineage, references
from agenthub.bucketsync.results.lineage import Graph
from agenthub.bucketsync.results.references import Node

DEFAULT_DEPTH, MAX_DEPTH = 3, 10
DEFAULT_LIMIT, MAX_LIMIT = 100, 500
DIGEST_CREDITS = 10


def _bounded(params: Mapping[str, str], name: str, default: int, top: int) -> int:
    raw = params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if not 1 <= value <= top:
        raise InvalidQuery(f"{name}={raw!r} is not valid", hint=f"an integer from 1 to {top}")
    return value


def _node(graph: Graph, name: str, found: Node | None = None) -> Node:
    known = graph.nodes.get(name) or found
    if known is not None:
        return known
    parsed = naming.parse_stamped_filename(name)
    return Node(name, references.MESSAGE, parsed[1] if parsed else None)


def _render(graph: Graph, name: str, depth: int, scores: Mapping[str, Any]) -> dict[str, Any]:
    node = _node(graph, name)
    shown: dict[str, Any] = {
        "name": name,
        "kind": node.kind,
        "path": node.path,
        "agent": node.agent,
        "depth": depth,
        "builds_on": graph.builds_on(name),
    }
    if node.kind == references.RESULT:
        shown["score"] = scores.get(name)
    return shown


def _side(found: dict[str, int], limit: int) -> tuple[list[str], bool]:
    ordered = sorted(found, key=lambda name: (found[name], name))
    return ordered[:limit], len(ordered) > limit


def lineage_of(hub: Hub, name: str, params: Mapping[str, str]) -> dict[str, Any]:
    """The work `name` (a result or message filename, or an artifact or shared-resource
    path), what it builds on (`ancestors`) and what builds on it (`descendants`), each up
    to `depth` steps and `limit` nodes nearest first, and the edges among them."""
    depth = _bounded(params, "depth", DEFAULT_DEPTH, MAX_DEPTH)
    limit = _bounded(params, "limit", DEFAULT_LIMIT, MAX_LIMIT)
    graph = lineage.graph_of(hub)
    resolved = references.resolve(hub, name)
    if isinstance(resolved, str):
        if name not in graph.nodes:
            raise NotFound(
                f"no result, message, artifact or shared resource {name!r}",
                hint="name a result filename (GET /v1/results) or a central path",
            )
        resolved = graph.nodes[name]
    key = resolved.name
    graph.nodes.setdefault(key, resolved)
    up = graph.ancestors_of([key], depth=depth)
    down = graph.descendants_of([key], depth=depth)
    ancestors, more_up = _side(up, limit)
    descendants, more_down = _side(down, limit)
    shown = {key, *ancestors, *descendants}
    results = [f"{naming.RESULTS}{n}" for n in shown if _node(graph, n).kind == references.RESULT]
    field = hub.settings.score_field
    scores = {
        record.filename: record.frontmatter.get(field)
        for record in hub.read_model.records(results, naming.RESULTS).values()
    }
    return {
        "node": _render(graph, key, 0, scores),
        "depth": depth,
        "limit": limit,
        "ancestors": [_render(graph, n, up[n], scores) for n in ancestors],
        "descendants": [_render(graph, n, down[n], scores) for n in descendants],
        "edges": sorted(
            [source, target]
            for source in shown
            for target in graph.builds_on(source)
            if target in shown
        ),
        "truncated": {"ancestors": more_up, "descendants": more_down},
        "credit": lineage.credit_of(hub, resolved.agent) if resolved.agent else None,
    }


def digest_block(hub: Hub) -> dict[str, Any]:
    """The digest's `lineage`: the most built-on agents and how many results build on
    others' work."""
    graph = lineage.graph_of(hub)
    return {
        "credits": lineage.top_credits(hub, DIGEST_CREDITS),
        "results_building_on_others": graph.crediting,
    }
