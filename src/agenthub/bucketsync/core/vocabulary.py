"""The search index's vocabulary: every term, and which of them contain a given piece.

A piece of three characters or more is looked up through its three-character pieces:
each maps to the terms holding it, so the terms holding the whole piece are among those
of its rarest three characters, and a lookup costs those, not the vocabulary. A shorter
piece has no such key; it is found by one C-level scan of the newline-joined terms,
rebuilt when the vocabulary changed since the last short lookup.
"""

from __future__ import annotations

import bisect

GRAM = 3


def _grams(text: str) -> set[str]:
    return {text[i : i + GRAM] for i in range(len(text) - GRAM + 1)}


class Vocabulary:
    """Not thread-safe: the search index calls it under its own lock."""

    def __init__(self) -> None:
        self._terms_with: dict[str, set[str]] = {}  # three characters -> the terms holding them
        self._terms: set[str] = set()
        self._sorted: list[str] = []
        self._starts: list[int] = []
        self._joined = ""
        self._stale = False

    def __len__(self) -> int:
        return len(self._terms)

    def add(self, term: str) -> None:
        self._terms.add(term)
        self._stale = True
        for gram in _grams(term):
            holders = self._terms_with.get(gram)
            if holders is None:
                self._terms_with[gram] = {term}
            else:
                holders.add(term)

    def remove(self, term: str) -> None:
        self._terms.discard(term)
        self._stale = True
        for gram in _grams(term):
            holders = self._terms_with[gram]
            holders.discard(term)
            if not holders:
                del self._terms_with[gram]

    def holding(self, piece: str) -> list[str]:
        """The terms that contain `piece`."""
        if len(piece) < GRAM:
            return self._scan(piece)
        fewest: set[str] = set()
        for gram in _grams(piece):
            holders = self._terms_with.get(gram)
            if holders is None:
                return []
            if not fewest or len(holders) < len(fewest):
                fewest = holders
        return [term for term in fewest if piece in term]

    def _scan(self, piece: str) -> list[str]:
        if self._stale:
            self._sorted = list(self._terms)
            self._starts = []
            offset = 0
            for term in self._sorted:
                self._starts.append(offset)
                offset += len(term) + 1
            self._joined = "\n".join(self._sorted)
            self._stale = False
        joined, starts, terms = self._joined, self._starts, self._sorted
        found: list[str] = []
        at = joined.find(piece)
        while at >= 0:
            index = bisect.bisect_right(starts, at) - 1
            found.append(terms[index])
            # Continue after this term: one hit per term is enough.
            at = joined.find(piece, starts[index] + len(terms[index]) + 1)
        return found
