"""Ranking runbooks and KB articles for what an operator types or pastes.

A pasted log line is mostly noise for matching: timestamps, rank and host prefixes, PIDs, hex
addresses, paths, sizes. ``normalize`` strips those so the words that carry the signal
("watchdog", "collective", "timeout", "out of memory") decide the ranking. Each document is
scored by its best-matching phrase (title, symptoms, aliases, tags) with rapidfuzz, plus a
share for how many of the query's distinctive words the document knows at all.
"""

from __future__ import annotations

import math
import re
from typing import Any, NamedTuple

from rapidfuzz import fuzz

_NOISE = [
    r"\x1b\[[0-9;]*[a-zA-Z]",  # terminal colour codes in a pasted log
    r"\[\s*\d+\.\d+\]",  # dmesg timestamps [12345.678901]
    r"\d{4}-\d\d-\d\d[t ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:z|[+-]\d\d:?\d\d)?",  # ISO timestamps
    r"\b\d\d:\d\d:\d\d(?:[.,]\d+)?\b",  # clock times
    r"\[(?:rank\s*)?\d+(?:,\d+)?\](?:<std(?:out|err)>)?:?",  # [rank3]: / [1,0]<stderr>:
    r"\brank\s*\d+\b",
    r"\b[\w.-]+:\d+:\d+\b",  # NCCL's host:pid:tid prefix
    r"\b[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.\d\b",  # PCI addresses
    r"\b0x[0-9a-f]+\b",
    r"\b[0-9a-f]{12,}\b",  # GUIDs, hashes
    r"(?<![\w/])(?:~|\.{0,2})/[\w.@+-]+(?:/[\w.@+-]*)+",  # paths (NET/IB is not one)
    r"\b\d+(?:\.\d+)*\b",  # numbers, versions, sizes
]
_NOISE_RE = re.compile("|".join(f"(?:{p})" for p in _NOISE), re.IGNORECASE)
_ASCII_WORD = r"[a-z][a-z_-]*[a-z]|[a-z]"
_ASCII_WORD_RE = re.compile(_ASCII_WORD)
_WORD_RE: re.Pattern[str] | None = None  # with CJK: compiled when a text needs it (2 ms)
_STOPWORDS = frozenset({
    "a", "an", "the", "is", "are", "was", "were", "be", "been", "to", "of", "in", "on", "at",
    "for", "and", "or", "not", "no", "with", "by", "from", "it", "its", "this", "that", "my",
    "our", "we", "i", "me", "job", "jobs", "what", "why", "how", "when", "after", "before",
    "does", "do", "did",
    # What "it doesn't work" is made of: a contraction's halves, and "work" (NCCL's WorkNCCL is
    # one word), which say something is wrong and nothing about what.
    "t", "s", "doesn", "don", "didn", "isn", "won", "can", "cannot", "work", "works", "working",
})


def normalize(text: str) -> str:
    """Lowercase, noise removed, punctuation turned into spaces; CJK text kept as is."""
    text = _NOISE_RE.sub(" ", text.lower())
    if text.isascii():  # the CJK branch cannot match: the same words, without its compile
        return " ".join(_ASCII_WORD_RE.findall(text))
    global _WORD_RE
    if _WORD_RE is None:
        _WORD_RE = re.compile(_ASCII_WORD + r"|[\u3400-\u9fff]+")
    return " ".join(_WORD_RE.findall(text))


def _terms(text: str) -> list[str]:
    """Distinctive words, with a crude stem so "hangs"/"hang"/"hanging" meet."""
    terms = []
    for word in normalize(text).split():
        if word in _STOPWORDS:
            continue
        if word.isascii():
            for suffix in ("ing", "ed", "es", "s"):
                if len(word) > len(suffix) + 3 and word.endswith(suffix):
                    word = word[: -len(suffix)]
                    break
            terms.append(word)
        else:
            # Chinese has no spaces: overlapping character pairs stand in for words.
            terms.extend(word[i : i + 2] for i in range(max(1, len(word) - 1)))
    return terms


# NamedTuples, not dataclasses: `diag match` starts without importing dataclasses (and the
# inspect module behind it), and the cached index is plain data, quick to load.
class Document(NamedTuple):
    type: str  # "runbook" | "kb"
    id: str
    title: str
    phrases: tuple[str, ...]  # normalized
    terms: frozenset[str]


class Result(NamedTuple):
    type: str
    id: str
    title: str
    score: float

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "id": self.id, "title": self.title, "score": self.score}


class Index(NamedTuple):
    documents: tuple[Document, ...]
    idf: dict[str, float]


def build_index(sources: list[tuple[str, str, str, list[str]]]) -> Index:
    """sources: (type, id, title, phrases)."""
    documents = []
    for kind, doc_id, title, phrases in sources:
        normalized = tuple(dict.fromkeys(p for p in map(normalize, [title, *phrases]) if p))
        terms = frozenset(t for p in [title, *phrases] for t in _terms(p))
        documents.append(Document(kind, doc_id, title, normalized, terms))
    df: dict[str, int] = {}
    for doc in documents:
        for term in doc.terms:
            df[term] = df.get(term, 0) + 1
    n = len(documents)
    idf = {term: math.log((n + 1) / (count + 0.5)) for term, count in df.items()}
    return Index(tuple(documents), idf)


def shipped_index() -> Index:
    """The index of every runbook and article on the search path, kept in the content-keyed
    cache: its key covers this module's code and every byte the runbooks and articles are made
    from. Stored as plain data (JSON), so a start loads it without pickle."""
    from assistant import cache as content_cache
    from assistant.runbook.library import content_files

    key = content_cache.files_key([__file__, *content_files()], salt="match-index")
    return content_cache.cached_plain("match-index", key, _build_shipped_index, _index)


_PlainIndex = tuple[list[tuple[str, str, str, tuple[str, ...], frozenset[str]]], dict[str, float]]


def _index(plain: _PlainIndex) -> Index:
    documents, idf = plain
    return Index(tuple(Document(*doc) for doc in documents), idf)


def _build_shipped_index() -> _PlainIndex:
    from assistant.kb import load_articles
    from assistant.runbook.library import all_runbooks

    sources: list[tuple[str, str, str, list[str]]] = []
    for runbook in all_runbooks():
        sources.append(("runbook", runbook.id, runbook.title,
                        [*runbook.symptoms, *runbook.tags, runbook.id.replace("-", " ")]))
    for article in load_articles().values():
        sources.append(("kb", article.id, article.title, [*article.aliases, *article.tags]))
    index = build_index(sources)
    return [(d.type, d.id, d.title, d.phrases, d.terms) for d in index.documents], index.idf


# Runbooks are what an operator walks; at equal relevance they come before articles.
_TYPE_WEIGHT = {"runbook": 1.0, "kb": 0.93}


# A query must share some meaning with a document to match it at all. Either a good share of
# the query's distinctive weight is words the document knows (a short symptom: "带宽低",
# "slow allreduce"), or the two share several distinctive words outright (a pasted log line,
# whose many other words diag has never seen: an XID line shares "nvrm", "xid", "pid" with the
# crash runbook), or a phrase matches almost exactly. Otherwise fuzzy string likeness alone
# ranks "the weather is nice today" against whatever phrase happens to share letters with it.
MIN_OVERLAP = 0.3
MIN_SHARED_WEIGHT = 8.0  # about three words only one or two documents use
EXACT_PHRASE = 90.0


def score(query: str, doc: Document, idf: dict[str, float]) -> float:
    """How well *doc* answers *query* (0 when they share no meaning; above 20 is a match)."""
    return _Query(query, idf).score(doc)


class _Query:
    """What scoring needs of the query, worked out once for all documents (not once for each
    of them): its normalized text, its distinctive words and their total weight."""

    def __init__(self, query: str, idf: dict[str, float]) -> None:
        self.text = normalize(query)
        self.idf = idf
        self.terms = set(_terms(query))
        # A word no document knows weighs as much as the rarest known word: "lorem ipsum dolor
        # sit" is not a query about "sit" just because "sit" is the only word diag has seen.
        # (Chinese is cut into overlapping character pairs, and the pairs that straddle two
        # words are meaningless: an unknown pair weighs nothing.)
        unknown = max(idf.values(), default=1.0)
        self.weight = sum(idf.get(t, unknown if t.isascii() else 0.0) for t in self.terms)

    def score(self, doc: Document, fuzzy_of: dict[str, float] | None = None) -> float:
        if not self.text:
            return 0.0
        if fuzzy_of is None:
            fuzzy = max((_phrase_score(self.text, p) for p in doc.phrases), default=0.0)
        else:
            fuzzy = max((fuzzy_of[p] for p in doc.phrases), default=0.0)
        shared = sum(self.idf[t] for t in self.terms if t in doc.terms)
        overlap = shared / self.weight if self.weight else 0.0
        if overlap < MIN_OVERLAP and shared < MIN_SHARED_WEIGHT and fuzzy < EXACT_PHRASE:
            return 0.0
        return round((0.6 * fuzzy + 40.0 * overlap) * _TYPE_WEIGHT[doc.type], 1)


def _phrase_score(query: str, phrase: str) -> float:
    if len(query) <= len(phrase):
        return fuzz.token_set_ratio(query, phrase) if query.isascii() else fuzz.partial_ratio(
            query, phrase)
    # A long paste against a short phrase: how well the phrase appears inside it.
    return fuzz.partial_ratio(phrase, query) * min(1.0, 0.5 + len(phrase) / 40)


def _phrase_scores(query: str, phrases: set[str]) -> dict[str, float]:
    """``_phrase_score(query, p)`` for every phrase, in two calls into rapidfuzz's C++ loop
    instead of one Python call per phrase (most of a match's time): the same scorers on the
    same strings (partial_ratio is symmetric), so the same numbers."""
    from rapidfuzz import process

    scores = dict.fromkeys(phrases, 0.0)
    longer = [p for p in phrases if len(query) <= len(p)]
    shorter = [p for p in phrases if len(query) > len(p)]
    scorer = fuzz.token_set_ratio if query.isascii() else fuzz.partial_ratio
    for phrase, value, _ in process.extract(query, longer, scorer=scorer, limit=None):
        scores[phrase] = value
    for phrase, value, _ in process.extract(query, shorter, scorer=fuzz.partial_ratio,
                                            limit=None):
        scores[phrase] = value * min(1.0, 0.5 + len(phrase) / 40)
    return scores


def match(text: str, limit: int = 8, index: Index | None = None) -> list[Result]:
    """Runbooks and KB articles for *text*, best first (ties broken by type, then id)."""
    index = index or shipped_index()
    query = _Query(text, index.idf)
    fuzzy_of = _phrase_scores(query.text, {p for doc in index.documents for p in doc.phrases})
    scored = [Result(doc.type, doc.id, doc.title, query.score(doc, fuzzy_of))
              for doc in index.documents]
    scored = [r for r in scored if r.score > 20]
    scored.sort(key=lambda r: (-r.score, r.type != "runbook", r.id))
    return scored[:limit]
