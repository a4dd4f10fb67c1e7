"""Values a ``contains`` answer can be scored on: the scorer (``rlm_runtime.eval.scorers``)
lower-cases, drops punctuation and the articles a, an, the, and matches whole words, so a
value that normalizes to nothing (``-``, ``€``, ``A``, ``the``) matches no prediction.
``answerable`` wraps a reader so that such values are not fields and such names name nothing
(the record stays, held and counted); the pattern here is the scorer's, copied (build.py is
stdlib only and imports nothing of the runtime).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from model import Record

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = re.compile(r"[^\w\s.\-:]|(?<!\w)[.\-:]|[.\-:](?!\w)")


def scoreable(value: str) -> bool:
    return bool(_ARTICLES.sub(" ", _PUNCT.sub(" ", value.lower())).split())


def answerable(parse: Callable[[str], list[Record]]) -> Callable[[str], list[Record]]:
    def wrapped(text: str) -> list[Record]:
        records = parse(text)
        for r in records:
            r.fields = {k: v for k, v in r.fields.items() if scoreable(v)}
            if not scoreable(r.name):
                r.name = ""
        return records
    wrapped.__doc__ = parse.__doc__
    return wrapped
