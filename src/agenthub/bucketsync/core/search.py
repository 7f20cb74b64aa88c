"""The `q=` index: the words of every parsed document, kept beside the content cache.

`q=` is a case-insensitive substring match on a record's `search_text`. A lone run of
word characters in the lowered query lies inside one word of every text containing it;
two neighbouring runs lie at the end of one word and the start of the next. So the
documents holding a word containing the run (a one-run query), or for every pair of
neighbouring runs a pair of neighbouring words ending and starting with them, are a
superset of the matches; the index keeps each document's text (the cached document's own
string), so it checks those candidates itself and answers with the exact matches: a new
query costs its candidates, not the board. The index is keyed by content hash (documents
are content-addressed) and follows the content cache: a document is indexed when it is
parsed and dropped when it is evicted; a document that is not indexed is always a
candidate, so the index never hides a match.
"""

from __future__ import annotations

import itertools
import re
import sys
import threading
from collections.abc import Container, Iterable

from agenthub.bucketsync.core.vocabulary import Vocabulary

WORD = re.compile(r"\w+")


def terms(text: str) -> frozenset[str]:
    """What a text is indexed under: its words, and each pair of neighbouring words
    joined by a tab (no word holds one)."""
    runs = WORD.findall(text)
    pairs = (f"{a}\t{b}" for a, b in itertools.pairwise(runs))
    # Interned: every document holding a term keeps the one copy, not a string of its own.
    return frozenset(map(sys.intern, (*runs, *pairs)))


class SearchIndex:
    def __init__(self) -> None:
        # Each indexed document's terms (to drop it again) and text (to check candidates:
        # a map of its own, one lookup per candidate, the hot loop of a search).
        self._terms_of: dict[str, tuple[str, ...]] = {}  # tuples: far smaller than sets
        self._text_of: dict[str, str] = {}
        self._postings: dict[str, set[str]] = {}
        self._lock = threading.Lock()
        self._vocabulary = Vocabulary()  # which terms hold a piece of the query
        self.removals = 0  # bumped when a document leaves: callers' "all indexed" goes stale

    def __contains__(self, content_hash: object) -> bool:
        return content_hash in self._terms_of

    def __len__(self) -> int:
        return len(self._terms_of)

    def add(self, content_hash: str, text: str) -> None:
        if content_hash in self._terms_of:
            return
        found = terms(text)
        with self._lock:
            if content_hash in self._terms_of:
                return
            self._terms_of[content_hash] = tuple(found)
            self._text_of[content_hash] = text
            for word in found:
                holders = self._postings.get(word)
                if holders is None:
                    self._postings[word] = {content_hash}
                    self._vocabulary.add(word)
                else:
                    holders.add(content_hash)

    def remove(self, content_hash: str) -> None:
        with self._lock:
            self.removals += 1
            self._text_of.pop(content_hash, None)
            for word in self._terms_of.pop(content_hash, ()):
                holders = self._postings[word]
                holders.discard(content_hash)
                if not holders:
                    del self._postings[word]
                    self._vocabulary.remove(word)

    def candidates(self, query: str) -> set[str] | None:
        """Content hashes of indexed documents that may contain the lowered `query`
        (each of its runs of word characters inside some word of theirs); None when the
        query has no word characters to narrow by."""
        with self._lock:
            return self._candidates(query)

    def search(
        self, query: str, among: Container[str], hashes: Iterable[str]
    ) -> tuple[set[str], list[str]] | None:
        """The content hashes in `among` of indexed documents whose text contains the
        lowered `query`, and those of `hashes` that are not indexed (the caller loads and
        checks them); None when the query has no word characters to narrow by. One look
        under the lock, so a document indexed or evicted meanwhile lands on one side or the
        other, never neither."""
        with self._lock:
            terms_of = self._terms_of
            unindexed = [h for h in hashes if h not in terms_of]
            found = self._candidates(query)
            if found is None:
                return None
            # `among` first: the index also holds other folders' documents.
            text_of = self._text_of
            return {h for h in found if h in among and query in text_of[h]}, unindexed

    def _candidates(self, query: str) -> set[str] | None:
        runs = WORD.findall(query)
        if not runs:
            return None
        # Neighbouring runs of the query are neighbouring words of a match, the first
        # ending with the one and the next starting with the other: "x\ty" holds "a\tb".
        needles = [f"{a}\t{b}" for a, b in itertools.pairwise(runs)] or runs
        holding = sorted((self._holding(needle) for needle in needles), key=len)
        # Smallest first, and a fresh set: the postings themselves are never handed out.
        return holding[0].intersection(*holding[1:])

    def _holding(self, needle: str) -> set[str]:
        """Documents with a term containing `needle`: the term's own postings when one term
        holds it (most do), so treat the result as read-only."""
        holders = [self._postings[term] for term in self._vocabulary.holding(needle)]
        if len(holders) == 1:
            return holders[0]
        return set().union(*holders)
