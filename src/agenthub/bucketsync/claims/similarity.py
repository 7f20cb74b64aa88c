"""Near-duplicate ideas: token-set (Jaccard) similarity over normalised words.

Why this and not embeddings or edit distance: a claim is one short sentence ("label
smoothing 0.1 on the resnet baseline"), written by agents who paraphrase each other and
reorder words freely. The words that carry an idea survive paraphrase and reordering; the
glue words do not carry it. So the text is NFKC-normalised and case-folded, split into
words (numbers such as `0.1` stay whole), stripped of a short stopword list and of a plural
`s`, and two ideas are compared as sets: |A & B| / |A or B|. It is deterministic, needs no
model or dependency, costs O(words), and a user can see why two ideas matched (the shared
words are reported).

`THRESHOLD` = 0.4: two phrasings of one idea in a handful of content words share about half
of them (0.5-1.0 in the tests' corpus), while two different ideas about the same challenge
share only the challenge's vocabulary ("model", "baseline", the dataset's name: 0.0-0.3).
A false warning costs the agent one look at the named claim; a missed one costs an
experiment, so the bar sits just above the unrelated ideas' highest, well below most
paraphrases. Long texts (a result's `description`) are compared per field, never concatenated, so
one long field cannot dilute a match.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

THRESHOLD = 0.4

_WORD = re.compile(r"[^\W_]+(?:\.\d+)?")
STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "for",
        "from",
        "has",
        "have",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "it's",
        "of",
        "on",
        "or",
        "our",
        "so",
        "than",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "this",
        "those",
        "to",
        "try",
        "trying",
        "tried",
        "was",
        "we",
        "were",
        "will",
        "with",
        "without",
        "my",
        "me",
        "you",
        "your",
        "us",
        "do",
        "does",
        "doing",
        "did",
        "am",
        "being",
        "been",
        "via",
        "using",
        "use",
        "used",
        "idea",
        "ideas",
        "plan",
        "plans",
        "going",
        "want",
        "attempt",
        "attempting",
        "experiment",
        "experiments",
        "testing",
        "test",
        "let",
        "see",
        "whether",
        "also",
        "just",
        "more",
        "less",
        "very",
        "not",
        "no",
    ]
)


def words(text: str) -> frozenset[str]:
    """The normalised content words of `text`."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    found: set[str] = set()
    for word in _WORD.findall(folded):
        if word in STOPWORDS or (len(word) < 2 and not word.isdigit()):
            continue
        if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        found.add(word)
    return frozenset(found)


def words_of(texts: Iterable[str]) -> frozenset[str]:
    return frozenset().union(*(words(text) for text in texts))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)
