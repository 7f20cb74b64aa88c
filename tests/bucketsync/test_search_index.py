"""`q=` through the search index: the same matches as a scan, loading only candidates."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agenthub.bucketsync.core import listing
from agenthub.bucketsync.core.readmodel import ReadModel, Record
from agenthub.bucketsync.core.search import SearchIndex
from agenthub.bucketsync.core.vocabulary import Vocabulary
from agenthub.bucketsync.storage.base import Batch
from agenthub.bucketsync.storage.local import LocalBucketStore
from agenthub.clock import FrozenClock
from tests.bucketsync.conftest import World

BUCKET = "acme/central"
BOARD = "message_board/"
WORDS = ("alpha", "beta", "gamma", "delta", "Theta", "iota", "kappa", "naïve", "x-ray", "42")
QUERIES = (
    "beta", "ETA", "ta io", "a-r", "gamma delta", "ï", "4", "--", " ", "kappa\n", "type: note",
    "nothing-here", "iota kappa beta",
)  # fmt: skip


def _board(tmp_path: Path, clock: FrozenClock, count: int) -> LocalBucketStore:
    rng = random.Random(3)
    store = LocalBucketStore(tmp_path / "store", clock=clock)
    store.create(BUCKET, creator="bucket-sync")
    files = []
    for i in range(count):
        body = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 6)))
        kind = rng.choice(("note", "result"))
        files.append(
            (
                f"{BOARD}20260101-000000-{i:03d}_agent-1.md",
                f"---\ntype: {kind}\n---\n{body}\n".encode(),
            )
        )
    store.write_batch(BUCKET, Batch(adds=files))
    return store


def _search(
    model: ReadModel, q: str, loads: list[int] | None = None, type_: str | None = None
) -> list[str]:
    entries = model.entries(BOARD)
    keys = sorted(path[len(BOARD) :] for path in entries)
    listed = listing.Listed(keys=keys, paths={k: BOARD + k for k in keys}, count=len(keys))

    def load(paths: Sequence[str]) -> dict[str, Record]:
        if loads is not None:
            loads.append(len(paths))
        return model.records(paths, BOARD)

    params = {"q": q, "limit": "50", "order": "asc", **({"type": type_} if type_ else {})}
    query = listing.parse_query(params, expand_max=50)
    body = listing.page(
        listed,
        query,
        load=load,
        render=lambda key, _record: {"key": key},
        memo=model.filter_memo(BOARD),
    )
    assert body["matched"] == len(body["items"])  # one page holds every match
    return list(body["items"])


def _scan(model: ReadModel, q: str) -> list[str]:
    records = model.records(list(model.entries(BOARD)), BOARD)
    return sorted(
        path[len(BOARD) :] for path, record in records.items() if q.lower() in record.search_text
    )


def test_the_index_narrows_to_words_holding_the_longest_run() -> None:
    index = SearchIndex()
    index.add("a", "hello wide world")
    index.add("b", "worldly")
    index.add("c", "nothing")
    assert index.candidates("orld") == {"a", "b"}
    assert index.candidates("de wor") == {"a"}  # "wide world": neighbours ending/starting so
    assert index.candidates("hello world") == set()  # both words, but not neighbours
    assert index.candidates("--") is None  # no word characters: cannot narrow
    index.remove("b")
    assert index.candidates("orld") == {"a"}
    assert "b" not in index and len(index) == 2


# Few letters, so words share pieces; punctuation, case and a non-ASCII letter, so runs
# split and lower where a naive tokenizer would not.
TEXTS = st.text(alphabet="abAB ._-\nï", max_size=24).map(str.lower)


@settings(max_examples=400, deadline=None)
@given(
    texts=st.dictionaries(st.sampled_from("hijklmnop"), TEXTS, max_size=8),
    removed=st.sets(st.sampled_from("hijklmnop")),
    unindexed=st.dictionaries(st.sampled_from("qrstu"), TEXTS, max_size=3),
    query=TEXTS,
)
def test_search_is_the_substring_scan(
    texts: dict[str, str], removed: set[str], unindexed: dict[str, str], query: str
) -> None:
    """The index's answer is exactly the documents a plain `in` finds, its candidates a
    superset; what it does not hold it hands back to be checked, never drops."""
    index = SearchIndex()
    for content_hash, text in texts.items():
        index.add(content_hash, text)
    index.candidates("warm")  # build the vocabulary, so removals have to keep it right
    for content_hash in removed:
        index.remove(content_hash)
    held = {h: t for h, t in texts.items() if h not in removed}
    scan = {h for h, t in held.items() if query in t}
    among = {*texts, *unindexed}
    found = index.search(query, among, among)
    if found is None:  # no word characters to narrow by
        assert not any(c.isalnum() or c == "_" for c in query)
        return
    matching, not_held = found
    assert matching == scan
    assert sorted(not_held) == sorted(among - held.keys())
    candidates = index.candidates(query)
    assert candidates is not None and scan <= candidates


@pytest.mark.parametrize("cache_bytes", [1 << 24, 2000], ids=["cached", "evicting"])
def test_q_matches_a_scan(tmp_path: Path, clock: FrozenClock, cache_bytes: int) -> None:
    store = _board(tmp_path, clock, 50)
    model = ReadModel(store, BUCKET, clock, ttl_s=30, content_cache_max_bytes=cache_bytes)
    scanner = ReadModel(store, BUCKET, clock, ttl_s=30, content_cache_max_bytes=1 << 24)
    for q in QUERIES:
        found = _search(model, q)
        assert sorted(found) == _scan(scanner, q), q


def test_a_new_query_is_answered_by_the_index(tmp_path: Path, clock: FrozenClock) -> None:
    store = _board(tmp_path, clock, 50)
    model = ReadModel(store, BUCKET, clock, ttl_s=30, content_cache_max_bytes=1 << 24)
    loads: list[int] = []
    _search(model, "alpha", loads)  # the first query parses (and indexes) every record
    assert loads == [50]
    loads.clear()
    assert len(_search(model, "x-ray", loads)) == len(_scan(model, "x-ray"))
    assert loads == []  # `q=` alone: the index checked the text itself
    reads = store.read_many_calls
    _search(model, "naïve", loads)
    assert store.read_many_calls == reads


def test_q_with_another_content_filter_loads_only_its_candidates(
    tmp_path: Path, clock: FrozenClock
) -> None:
    store = _board(tmp_path, clock, 50)
    model = ReadModel(store, BUCKET, clock, ttl_s=30, content_cache_max_bytes=1 << 24)
    _search(model, "alpha")
    loads: list[int] = []
    found = _search(model, "x-ray", loads, type_="note")
    scan = [k for k in _scan(model, "x-ray") if k in _scan(model, "type: note")]
    assert sorted(found) == scan
    assert loads and loads[0] < 50


def test_q_over_http_sees_a_message_written_after_the_index(world: World) -> None:
    world.agent("agent-1")
    world.raw("agent-1", "first zebra")
    assert len(world.client.get("/v1/messages?q=zebr").json()["items"]) == 1
    world.raw("agent-1", "second zebra crossing")
    items = world.client.get("/v1/messages?q=zebra%20cross").json()["items"]
    assert len(items) == 1
    assert len(world.client.get("/v1/messages?q=EBRA").json()["items"]) == 2


def test_the_vocabulary_finds_short_and_long_pieces() -> None:
    vocabulary = Vocabulary()
    for term in ("beta", "zeta", "eta\tmu", "mu"):
        vocabulary.add(term)
    assert sorted(vocabulary.holding("eta")) == ["beta", "eta\tmu", "zeta"]  # by its pieces
    assert sorted(vocabulary.holding("mu")) == ["eta\tmu", "mu"]  # too short: a scan
    assert vocabulary.holding("ta\tm") == ["eta\tmu"]
    vocabulary.remove("zeta")
    assert sorted(vocabulary.holding("eta")) == ["beta", "eta\tmu"]
    assert vocabulary.holding("zet") == [] and vocabulary.holding("ze") == []
    assert len(vocabulary) == 3
