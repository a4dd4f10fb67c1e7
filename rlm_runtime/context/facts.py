"""Facts: fields read out of prose whose sentences each state one fact about one named thing.

Generated reports, exported databases and logs written as sentences say the same few
things about many things in the same few sentence forms: "Harbour 7 is a depot. Its
manager is Ines Roy. Harbour 7 opened in 1998." Such text has fields as surely as a table
does, only spelled as sentences. This module finds those sentence forms in a sample of the
text, without being told any of them, and reads each paragraph into a record: the thing it
is about (its name), then one field per sentence.

How the forms are found (``mine``), on the sample's paragraphs (or lines, when the text has
no blank lines):

* *common words* are those in at least half the paragraphs ("is", "the", the field words);
* a paragraph's *name* is the word sequence, starting and ending with an uncommon word,
  that the most of its sentences hold (the longest on a tie); with no repeats, the first
  such sequence of its first sentence. Each occurrence becomes the placeholder ``KEY``;
* a *form* is a sentence's longest start (or end) that at least ``MIN_SHARE`` of the
  paragraphs share and that different words follow (precede) in different paragraphs:
  "the manager of KEY is" + "Ines Roy"; what is left is the value. A form holds a word
  other than the placeholder and grammar; the value never holds the name;
* the field's name is the form's words without the placeholder and grammar words
  ("the home port of KEY is" -> "home port").

Parsing applies the mined forms to every paragraph: linear in the text, each sentence
tried against at most ``MAX_TOKENS`` starts and ends by dictionary lookups. Sentences no
form reads are kept, in order, in the record's ``text`` field.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

#: A form is shared by at least this share of the sample's paragraphs (and by 3 of them).
MIN_SHARE = 0.2
#: Words of a sentence looked at (a longer sentence is not read as a fact).
MAX_TOKENS = 40
#: Sentences of a paragraph looked at for its name (and, in the sample, for forms).
MAX_SENTENCES = 60
#: Words in a name, at most.
MAX_NAME_WORDS = 6
#: A text is read as facts when its forms read at least this share of the sample's sentences.
MIN_READ = 0.6
#: Paragraphs the sample must have.
MIN_PARAGRAPHS = 4

KEY = "\x00"

# Grammar: never a field's name, never a whole form's content.
_GRAMMAR = frozenset("""
a an the of is are was were be been being has have had its it it's their his her hers this that these those
by in on at to for from with and or as called named which who whose there here 's ’s also
""".split())
# A sentence ends at . ! ? or ; before a space; ", and ..." starts a clause of its own (one
# fact each), as do "but" and "while". A comma alone does not: values hold commas.
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|,\s+(?:and|but|while|whereas)\s+")
_EDGE_PUNCT = "\"'“”‘’()[]{},:"


@dataclass(frozen=True)
class Facts:
    """The sentence forms of a text: ``starts`` and ``ends`` map a form (casefolded words,
    ``KEY`` for the name) to its field; ``stop`` is the sample's common words and grammar;
    ``by_line`` says a record is a line, not a paragraph."""

    starts: dict[tuple[str, ...], str]
    ends: dict[tuple[str, ...], str]
    stop: frozenset[str]
    by_line: bool
    #: The share of the sample's sentences the forms read (a name-only sentence counts as read).
    coverage: float = 1.0

    @property
    def fields(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys([*self.starts.values(), *self.ends.values()]))

    def __hash__(self) -> int:  # the dicts make the generated hash fail; a Shape hashes its Facts
        return hash((tuple(sorted(self.starts)), tuple(sorted(self.ends)), self.by_line))


# ------------------------------------------------------------------------ words


def _sentences(paragraph: str) -> list[str]:
    out = []
    for s in _SENTENCE_END.split(paragraph.strip()):
        s = s.strip().rstrip(".!?;").strip()
        if s:
            out.append(s)
    return out


def split_words(text: str, limit: int) -> list[str]:
    """The first ``limit`` words of ``text``, outer quotes, brackets and commas off, a
    possessive ``'s`` its own word."""
    out: list[str] = []
    for raw in text.split()[:limit]:
        word = raw.strip(_EDGE_PUNCT)
        if not word:
            continue
        if len(word) > 2 and word[-2] in "'’" and word[-1] in "sS":
            out += [word[:-2], word[-2:].lower()]
        else:
            out.append(word)
    return out


_FULL_STOP = re.compile(r"[.!?]\s+\S")


def sentences_a_line(lines: Sequence[str]) -> float:
    """How many sentences (ended by . ! or ?) a non-blank line holds, on average."""
    counts = [1 + len(_FULL_STOP.findall(line)) for line in lines if line.strip()]
    return sum(counts) / len(counts) if counts else 0.0


def grammar_word(word: str) -> bool:
    """Whether a (casefolded) word is grammar: never a field's name on its own."""
    return word in _GRAMMAR


def _words(sentence: str) -> list[str]:
    return split_words(sentence, MAX_TOKENS + 1)


def units(lines: Sequence[str], by_line: bool) -> Iterator[tuple[int, str]]:
    """(first line number, text) of each paragraph (blank-line separated), or of each line."""
    if by_line:
        for k, line in enumerate(lines):
            if line.strip():
                yield 1 + k, line.strip()
        return
    start, parts = 1, list[str]()
    for k, line in enumerate(lines):
        if line.strip():
            if not parts:
                start = 1 + k
            parts.append(line.strip())
        elif parts:
            yield start, " ".join(parts)
            parts = []
    if parts:
        yield start, " ".join(parts)


# ------------------------------------------------------------------------ names


def _name(sentences: list[list[str]], stop: frozenset[str]) -> tuple[str, ...] | None:
    """The paragraph's name (casefolded words) from its sentences' casefolded words: the
    word sequence the most sentences hold, the longest on a tie (see the module docstring);
    ``stop`` is the common words and grammar."""
    times: Counter[str] = Counter()
    for low in sentences:
        times.update(set(low) - stop)
    if not times:
        return None
    most = max(times.values())
    if most < 2:  # nothing repeats: the first run of uncommon words
        for low in sentences:
            for i, w in enumerate(low):
                if w not in stop:
                    run = []
                    for x in low[i:i + MAX_NAME_WORDS]:
                        if x in stop:
                            break
                        run.append(x)
                    return tuple(run)
        return None
    # The best sequence is held by `most` sentences, so each of its uncommon words is too:
    # only sequences of those words (grammar between them allowed) are counted.
    top = {w for w, n in times.items() if n == most}
    held: Counter[tuple[str, ...]] = Counter()
    for low in sentences:
        seen: set[tuple[str, ...]] = set()
        for i, w in enumerate(low):
            if w not in top:
                continue
            for j in range(i, min(len(low), i + MAX_NAME_WORDS)):
                x = low[j]
                if x in top:
                    seen.add(tuple(low[i:j + 1]))
                elif x not in stop or x in ("'s", "’s"):
                    break
        held.update(seen)
    best, _ = max(held.items(), key=lambda kv: (kv[1], len(kv[0])))
    return best


def _skeleton(low: list[str], name: tuple[str, ...], *, once: bool = False) -> list[str]:
    """The casefolded words of a sentence, each occurrence of the name (the first, when
    ``once``) one ``KEY``."""
    n = len(name)
    if not n or name[0] not in low:
        return list(low)
    out: list[str] = []
    i = 0
    while i < len(low):
        if low[i] == name[0] and tuple(low[i:i + n]) == name and not (once and KEY in out):
            out.append(KEY)
            i += n
        else:
            out.append(low[i])
            i += 1
    return out


def _unkey(words: list[str], skeleton: list[str], width: int) -> list[str]:
    """``skeleton`` with each ``KEY`` the original ``width`` words it stands for, joined."""
    out: list[str] = []
    w = 0
    for s in skeleton:
        if s == KEY:
            out.append(" ".join(words[w:w + width]))
            w += width
        else:
            out.append(words[w])
            w += 1
    return out


def _field_name(form: tuple[str, ...]) -> str:
    """The words of a form that name its field; "" when it holds a separator (a word with no
    letter or digit, "|"): a separator never names a field."""
    words = [w for w in form if w != KEY and w not in _GRAMMAR]
    return "" if any(not any(c.isalnum() for c in w) for w in words) else " ".join(words)


# ------------------------------------------------------------------------ mining


def _paragraph_words(text: str) -> list[list[str]]:
    """The casefolded words of the paragraph's first sentences (those short enough to read)."""
    return [[x.casefold() for x in w] for s in _sentences(text)[:MAX_SENTENCES] if (w := _words(s)) and len(w) <= MAX_TOKENS]


def mine(lines: Sequence[str]) -> Facts | None:
    """The sentence forms of the sample ``lines`` (raw lines, blank ones included), or None
    when they do not read at least ``MIN_READ`` of its sentences as facts."""
    nonblank = [line for line in lines if line.strip()]
    blank = len(lines) - len(nonblank)
    by_line = blank < 2
    paragraphs = [_paragraph_words(text) for _, text in units(lines, by_line)]
    paragraphs = [p for p in paragraphs if p]
    if len(paragraphs) < MIN_PARAGRAPHS:
        return None
    df: Counter[str] = Counter()
    for p in paragraphs:
        df.update({w for words in p for w in words})
    stop = _GRAMMAR | {w for w, n in df.items() if n >= 0.5 * len(paragraphs)}
    skeletons: list[list[list[str]]] = []
    for p in paragraphs:
        name = _name(p, stop)
        skeletons.append([_skeleton(words, name or ()) for words in p])
    least = max(3, int(MIN_SHARE * len(paragraphs) + 0.999))
    starts = _forms(skeletons, least, reverse=False)
    ends = _forms(skeletons, least, reverse=True)
    facts = Facts(starts, ends, stop, by_line)
    read = total = 0
    for p in skeletons:
        for sk in p:
            total += 1
            read += _only_name(sk, stop) or _read(facts, sk) is not None
    if not facts.fields or read < MIN_READ * total:
        return None
    return Facts(starts, ends, stop, by_line, read / total)


def _forms(skeletons: list[list[list[str]]], least: int, *, reverse: bool) -> dict[tuple[str, ...], str]:
    """The forms (starts, or ends when ``reverse``) shared by ``least`` paragraphs and
    followed by different words, each sentence's longest; form -> field name."""
    support: Counter[tuple[str, ...]] = Counter()
    after: dict[tuple[str, ...], set[str]] = {}
    for p in skeletons:
        seen: set[tuple[str, ...]] = set()
        for sk in p:
            seq = sk[::-1] if reverse else sk
            for m in range(1, len(seq)):
                form = tuple(seq[:m])
                seen.add(form)
                nxt = after.setdefault(form, set())
                if len(nxt) < 2:
                    nxt.add(seq[m])
        support.update(seen)
    out: dict[tuple[str, ...], str] = {}
    for p in skeletons:
        for sk in p:
            seq = sk[::-1] if reverse else sk
            for m in range(len(seq) - 1, 0, -1):
                form = tuple(seq[:m])
                if support[form] < least or len(after.get(form, ())) < 2:
                    continue
                if KEY in seq[m:] or not _field_name(form):
                    break  # the value would hold the name, or the form is grammar only
                out[tuple(reversed(form)) if reverse else form] = _field_name(form[::-1] if reverse else form)
                break
    return out


def _only_name(skeleton: list[str], stop: frozenset[str]) -> bool:
    """A sentence that names the thing and says nothing else ("There is a host called KEY")."""
    return KEY in skeleton and all(w == KEY or w in stop for w in skeleton)


def _read(facts: Facts, skeleton: list[str]) -> tuple[str, int, int] | None:
    """(field, lo, hi): the value is ``skeleton[lo:hi]``; None when no form reads it."""
    n = len(skeleton)
    for m in range(n - 1, 0, -1):
        field = facts.starts.get(tuple(skeleton[:m]))
        if field is not None and KEY not in skeleton[m:]:
            return field, m, n
    for m in range(n - 1, 0, -1):
        field = facts.ends.get(tuple(skeleton[n - m:]))
        if field is not None and KEY not in skeleton[:n - m]:
            return field, 0, n - m
    return None


# ------------------------------------------------------------------------ parsing


def parse(lines: Sequence[str], facts: Facts) -> Iterator[tuple[int, list[tuple[str, str]]]]:
    """(first line, fields) of each paragraph (or line): ``name`` first, then one field per
    sentence a form reads, then ``text`` with the sentences none reads."""
    for start, fields, _, _ in _read_units(lines, facts):
        yield start, fields


def coverage(lines: Sequence[str], facts: Facts) -> float:
    """The share of the non-blank ``lines`` that ``parse`` reads into fields: each paragraph
    (or line) counts its lines times the share of its sentences read (a sentence only naming
    the thing counts as read when another is read into a field), so the figure compares with
    a reader of lines."""
    size: dict[int, int] = {}
    start = 0
    for k, line in enumerate(lines):
        if not line.strip():
            start = 0
            continue
        if facts.by_line or not start:
            start = 1 + k
        size[start] = size.get(start, 0) + 1
    read = 0.0
    for first, fields, unread, n in _read_units(lines, facts):
        # A paragraph whose only field is its name reads nothing into fields.
        if n and any(name not in ("name", "text") for name, _ in fields):
            read += size.get(first, 1) * (n - unread) / n
    total = sum(size.values())
    return read / total if total else 0.0


def _read_units(lines: Sequence[str], facts: Facts) -> Iterator[tuple[int, list[tuple[str, str]], int, int]]:
    """(first line, fields, sentences not read, sentences) of each paragraph (or line)."""
    for start, text in units(lines, facts.by_line):
        said = [(sentence, words, [w.casefold() for w in words]) for sentence in _sentences(text)
                for words in (_words(sentence),)]
        name = _name([low for _, w, low in said[:MAX_SENTENCES] if w and len(w) <= MAX_TOKENS], facts.stop) or ()
        fields: list[tuple[str, str]] = []
        spelled = None
        rest: list[str] = []
        for sentence, words, low in said:
            if not words or len(words) > MAX_TOKENS:
                rest.append(sentence)
                continue
            sk = _skeleton(low, name)
            if spelled is None and KEY in sk:
                spelled = _unkey(words, sk, len(name))[sk.index(KEY)]
            named_only = _only_name(sk, facts.stop)
            got = _read(facts, sk)
            # A value holding the name ("the annex of north mill is north mill annex"; "its
            # annex is north mill annex"): the name once, as the form has it, or not at all.
            for other in ((_skeleton(low, name, once=True),) if sk.count(KEY) > 1 else ()) + ((list(low),) if KEY in sk else ()):
                if got is not None:
                    break
                sk, got = other, _read(facts, other)
            if got is not None:
                field, lo, hi = got
                fields.append((field, " ".join(_unkey(words, sk, len(name))[lo:hi])))
            elif not named_only:
                rest.append(sentence)
        head = [("name", spelled)] if spelled else []
        yield start, head + fields + ([("text", ". ".join(rest))] if rest else []), len(rest), len(said)
