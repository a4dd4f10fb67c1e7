"""Words of a text as the store sees them outside SQLite: the stop-word list shared by search
(stop words are dropped from queries) and linking (stop words are never key terms), and the
key terms of a chunk (its most frequent distinctive words, what ``related_to`` links share).

FTS5 stems with porter inside SQLite; these helpers work on plain lower-cased words, which is
enough to pick candidates: the index decides what matches.
"""

from __future__ import annotations

import re
from collections import Counter

#: English function words: dropped from a search query that has other words.
STOPWORDS = frozenset(
    """a about above after again against all also am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have having he
    her here hers herself him himself his how i if in into is it its itself just me more most my myself no nor not
    now of off on once only or other our ours ourselves out over own same she should so some such than that the
    their theirs them themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself yourselves""".split()
)
#: Never key terms for linking: stop words, and words so common in code and docs that two
#: chunks sharing them say nothing about each other.
LINK_STOPWORDS = STOPWORDS | frozenset(
    """one two may must might shall use used using get gets set sets see new make made like way well yes via per etc
    def class self return none true false import from pass else elif try except finally raise lambda yield assert
    global nonlocal del await async print args kwargs cls int str list dict value values name names type object
    file line data code function method default example following note""".split()
)

_ASCII_WORD = re.compile(r"\b[a-z][a-z0-9_]{3,63}\b")
_WORD = re.compile(r"\b[^\W\d_]\w{3,63}\b")
_TOKEN = re.compile(r"\w+")


def words(text: str) -> list[str]:
    """The lower-cased words of ``text`` (letters, digits and underscores)."""
    return _TOKEN.findall(text.lower())


def is_stop_phrase(phrase: str) -> bool:
    """Whether every word of ``phrase`` is a stop word (a phrase without words counts as one)."""
    return all(w in STOPWORDS for w in words(phrase))


def key_terms(text: str, limit: int) -> list[str]:
    """Up to ``limit`` distinctive words of ``text``: its most frequent words of 4+ characters
    that start with a letter and are not link stop words (ties: first seen first). Plain
    Python over one chunk, no store lookup: ~50 us for a 1 KB chunk, the regex most of it."""
    lowered = text.lower()
    counts = Counter((_ASCII_WORD if lowered.isascii() else _WORD).findall(lowered))
    for stop in LINK_STOPWORDS.intersection(counts):
        del counts[stop]
    return [w for w, _ in counts.most_common(limit)]
