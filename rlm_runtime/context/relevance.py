"""Relevance: which words of a question are worth searching for, and how well a text matches them.

Keywords from a question only *rank* documents. They never decide that a document is left
out: in a multi-hop question ("where does the person Casey reports to work?") the second
fact sits in a document that shares no word with the question. Only keywords a user
configured explicitly (``ProbeConfig.keywords``) may gate.

Hits are counted in one RE2 pass over the text for all keywords together (an alternation of
literals, case-insensitive); a keyword stops being searched once it reached its cap.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache

import re2

from rlm_runtime.context.buffer import TextBuffer

#: Keywords taken from one question, at most.
MAX_QUESTION_KEYWORDS = 8
#: Longer keywords are cut: a keyword is a literal to find, not a passage.
MAX_KEYWORD_CHARS = 80

# English function words, plus the words questions are made of ("which document mentions").
_STOPWORDS = frozenset("""
a about above after again against all also am an and any are as at be because been before being below between both
but by can could did do does doing done down during each either else ever every few for from further get gets got had
has have having he her here hers herself him himself his how however i if in into is it its itself just least less let
like made make many may me might more most much must my myself neither no nor not now of off often on once one only or
other others otherwise our ours ourselves out over own per perhaps please quite rather really same shall she should
since so some such than that the their theirs them themselves then there therefore these they thing things this those
though through thus to too under until up upon us very via was we were what whatever when whenever where whereas
wherever whether which while who whoever whom whose why will with within without would yes yet you your yours yourself
yourselves
answer answers ask asked asking according based called compare context contexts count describe document documents
exactly explain file files find give given how's identify list listed mention mentioned mentions name named number
question questions say said says show state stated summarize summarise tell text texts total value what's
who's word words
""".split())
_CONTRACTIONS = frozenset({"t", "re", "ll", "ve", "d", "m"})

_QUOTED = re.compile(r"\"([^\"\n]{2,200})\"|“([^”\n]{2,200})”|`([^`\n]{2,200})`|(?<!\w)'([^'\n]{2,200})'(?!\w)|‘([^’\n]{2,200})’")
# A word, or an identifier joining words with _ . - / @ : (load_probe_config, v1.2, a/b, x@y.z).
_TOKEN = re.compile(r"\w(?:[\w'’.\-/@:]*\w)?")
_CAMEL = re.compile(r"[a-z][A-Z]|[A-Z]{2,}[a-z]")


def keywords_from_question(question: str, most: int = MAX_QUESTION_KEYWORDS) -> tuple[str, ...]:
    """The words of ``question`` worth grepping for, most distinctive first, at most ``most``.

    Kept: quoted phrases (whole), identifiers (snake_case, camelCase, dotted, ALLCAPS,
    letters with digits), numbers of two digits or more, capitalised names, and other
    words of four letters or more (a final plural "s" dropped: the search is by substring,
    so "employee" still finds "employees"). Dropped: English stopwords, the words questions
    are made of, words under three letters, repeats (ignoring case).
    """
    found: list[tuple[int, int, str]] = []  # (rank, position, keyword)
    rest = question
    for m in _QUOTED.finditer(question):
        phrase = next(g for g in m.groups() if g is not None).strip()
        if phrase:
            found.append((0, m.start(), phrase))
        rest = rest[: m.start()] + " " * (m.end() - m.start()) + rest[m.end():]
    for m in _TOKEN.finditer(rest):
        word = _strip_apostrophe(m.group())
        if word is None:
            continue
        rank = _rank(word)
        if rank is not None:
            found.append((rank, m.start(), word if rank < 3 else _singular(word)))
    found.sort(key=lambda x: (x[0], x[1]))
    return unique(w[:MAX_KEYWORD_CHARS] for _, _, w in found)[: max(most, 0)]


def _strip_apostrophe(word: str) -> str | None:
    """``Paris's`` -> ``Paris``; a contraction (``don't``) -> None; ``O'Brien`` unchanged."""
    head, sep, tail = word.replace("’", "'").rpartition("'")
    if not sep:
        return word
    if tail.lower() == "s":
        return head
    if tail.lower() in _CONTRACTIONS:
        return None
    return word


def _rank(word: str) -> int | None:
    """0 is kept for quoted phrases; 1 identifiers; 2 numbers and names; 3 long words; 4 three-letter words."""
    low = word.lower()
    if low in _STOPWORDS:
        return None
    has_digit = any(c.isdigit() for c in word)
    has_alpha = any(c.isalpha() for c in word)
    if has_digit and not has_alpha:
        digits = sum(c.isdigit() for c in word)
        return 2 if digits >= 2 else None
    if any(c in word for c in "_.-/@:") or (has_digit and has_alpha) or _CAMEL.search(word) or (word.isupper() and len(word) >= 2):
        return 1
    if word[0].isupper() and len(word) >= 2:
        return 2
    if len(word) >= 4:
        return 3
    if len(word) == 3:
        return 4
    return None


def _singular(word: str) -> str:
    low = word.lower()
    if len(word) >= 5 and low.endswith("s") and not low.endswith(("ss", "us", "is", "ous")):
        return word[:-1]
    return word


def unique(words: Iterable[str]) -> tuple[str, ...]:
    """``words`` without blanks and repeats (ignoring case), in order."""
    seen: set[str] = set()
    out = []
    for word in words:
        word = word.strip()
        key = word.casefold()
        if word and key not in seen:
            seen.add(key)
            out.append(word)
    return tuple(out)


def merge_keywords(configured: Sequence[str], from_question: Sequence[str]) -> tuple[str, ...]:
    """The configured keywords, then those of the question that are new (ignoring case)."""
    return unique([*configured, *from_question])


# ------------------------------------------------------------------------- scoring


def relevance(hits: dict[str, int]) -> float:
    """0..1 from matching-line counts per keyword: mostly how many keywords occur at all,
    partly how often (each counted up to 10). 1.0 without keywords: nothing to judge by."""
    if not hits:
        return 1.0
    present = sum(1 for n in hits.values() if n)
    density = sum(min(n, 10) for n in hits.values()) / (10 * len(hits))
    return round(0.7 * present / len(hits) + 0.3 * density, 3)


@lru_cache(maxsize=64)
def _literal_regex(words: tuple[str, ...]) -> re2._Regexp:
    options = re2.Options()
    options.log_errors = False
    options.case_sensitive = False
    options.never_nl = True
    options.max_mem = 64 << 20
    return re2.compile("|".join(re.escape(w) for w in words).encode("utf-8"), options)


def keyword_hits(buf: TextBuffer, keywords: Sequence[str], cap: int = 50, caps: Mapping[str, int] | None = None) -> dict[str, int]:
    """Lines of ``buf`` holding each keyword (case-insensitive, literal), each counted up to ``cap``
    (or its own entry in ``caps``): the fewer lines a keyword needs, the sooner the scan drops it.

    Equal to ``len(grep(re2_escape(word), ignore_case=True, max_matches=cap))`` for every
    keyword, in one pass over the text instead of one per keyword.
    """
    limit = {w: (caps or {}).get(w, cap) for w in keywords}
    hits = dict.fromkeys(keywords, 0)
    live = tuple(w for w in hits if w.strip() and limit[w] > 0)
    lowered = {w: w.lower().encode("utf-8") for w in live if w.isascii()}
    view, n = buf.view, buf.nbytes
    pos = 0
    while live and pos < n:
        m = _literal_regex(live).search(view, pos)
        if m is None or m.start() >= n:
            break
        start, end = buf.line_span(m.start())
        del m  # a match pins the buffer, which a corpus scan closes after
        # The alternation reports one keyword per position: test each on the line itself.
        # On an ASCII line, ASCII lower-casing is exactly RE2's case folding, and runs in C.
        line = view[start:end].tobytes()
        low = line.lower() if line.isascii() else None
        for word in live:
            if low is not None and word in lowered:
                found = lowered[word] in low
            else:
                found = _literal_regex((word,)).search(line) is not None
            hits[word] += found
        live = tuple(w for w in live if hits[w] < limit[w])
        pos = end + 1
    return hits
