"""Slots: fields read out of lines that state several facts each in the same words.

Logs and exports written for people put a line's values between the same words on every
line: "2024-03-02 10:01:00 INFO host db-07 reported status down (rack r3, owner data
team)". The words every line has ("host", "status", "rack") name the values after them.
This module finds those words in a sample of the lines, without being told any, and reads
each line into a record: a field per value, named by the words just before it.

How (``mine``, on the sample's non-blank lines):

* the *frame* is the words in at least ``FRAME_SHARE`` of the lines, less the *values*
  among them: a frame word that follows another frame word whose followers vary (three or
  more different words, none in 90% of lines) is a value ("status up" on most lines: "up"
  is a value of "status", not part of the frame);
* a line's *slots* are its runs of words outside the frame; each is named by the frame
  words before it, grammar left out ("reported status" -> "reported status"; "rack" ->
  "rack"); a slot with no frame words before it is ``start``; frame words that end a line
  after its last slot belong to that slot's value ("data team");
* the lines are read this way when most have at least ``MIN_SLOTS`` slots, and at least two
  field names are on most lines.

Parsing is one pass over each line's words (at most ``MAX_WORDS`` are read; a longer line
is kept whole in ``text``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from rlm_runtime.context.facts import grammar_word, split_words

#: A word on at least this share of the sample's lines is a frame word (unless a value).
FRAME_SHARE = 0.6
#: A line is read as slots when it has at least this many.
MIN_SLOTS = 2
#: The sample needs this many lines.
MIN_LINES = 6
#: Words of a line read; a longer line is kept whole.
MAX_WORDS = 80


@dataclass(frozen=True)
class Slots:
    """The frame words of a text's lines (casefolded)."""

    frame: frozenset[str]
    fields: tuple[str, ...]


def _lows(words: list[str]) -> list[str]:
    return [w.casefold() for w in words]


def line_words(line: str) -> list[str]:
    """A line's words for slots: as ``split_words`` gives them, a sentence's end off each,
    and no word of punctuation alone ("-", "|")."""
    out = []
    for word in split_words(line, MAX_WORDS + 1):
        word = word.rstrip(".;!?")
        if any(c.isalnum() for c in word):
            out.append(word)
    return out


def read_line(words: list[str], frame: frozenset[str]) -> list[tuple[str, str]]:
    """(field, value) for each slot of a line's words (see the module docstring)."""
    out: list[tuple[str, str]] = []
    low = _lows(words)
    label: list[str] = []
    value: list[str] = []
    for word, w in zip(words, low, strict=True):
        if w in frame:
            if value:
                out.append((_name(label), " ".join(value)))
                label, value = [], []
            label.append(w)
        else:
            value.append(word)
    if value:
        out.append((_name(label), " ".join(value)))
    elif label and out:
        # frame words after the last value end that value ("owner data team")
        field, last = out[-1]
        out[-1] = (field, " ".join([last, *words[len(words) - len(label):]]))
    return out


def _name(label: list[str]) -> str:
    if not label:
        return "start"
    content = [w for w in label if not grammar_word(w)]
    return " ".join(content or label)


def mine(lines: Sequence[str]) -> Slots | None:
    """The frame of the sample ``lines``, or None when they are not lines of slots."""
    rows = [_lows(w) for line in lines if line.strip() and len(w := line_words(line)) <= MAX_WORDS]
    if len(rows) < MIN_LINES:
        return None
    df: Counter[str] = Counter()
    for low in rows:
        df.update(set(low))
    common = {w for w, n in df.items() if n >= FRAME_SHARE * len(rows)}
    followers: dict[str, Counter[str]] = {}
    for low in rows:
        for a, b in zip(low, low[1:], strict=False):
            if a in common:
                followers.setdefault(a, Counter())[b] += 1
    values: set[str] = set()
    for after in followers.values():
        total = sum(after.values())
        if len(after) >= 2:
            values.update(w for w, n in after.items() if w in common and n < 0.9 * total)
    frame = frozenset(common - values)
    if not frame:
        return None
    named: Counter[str] = Counter()
    slotted = repeated = 0
    for low in rows:
        pairs = read_line(low, frame)
        names = [f for f, _ in pairs]
        slotted += len(pairs) >= MIN_SLOTS
        repeated += len(set(names)) < len(names)
        named.update(set(names))
    fields = tuple(f for f, n in named.most_common() if n >= 0.5 * len(rows))
    worded = [f for f in fields if any(not grammar_word(w) for w in f.split()) and f != "start"]
    # Sentences (the same few words, "is", "of", between every value) name no field; nor
    # does a frame that names the same field twice on most lines.
    if slotted < 0.8 * len(rows) or len(worded) < 2 or repeated > 0.5 * len(rows):
        return None
    return Slots(frame, fields)


def parse(lines: Sequence[str], slots: Slots) -> Iterator[tuple[int, list[tuple[str, str]]]]:
    """(line number, fields) of each non-blank line."""
    for k, line in enumerate(lines):
        if not line.strip():
            continue
        words = line_words(line)
        if len(words) > MAX_WORDS:
            yield 1 + k, [("text", line.strip())]
            continue
        yield 1 + k, read_line(words, slots.frame) or [("text", line.strip())]
