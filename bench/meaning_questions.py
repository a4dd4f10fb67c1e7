"""Paraphrase questions for bench/search_meaning.py: questions that share no word with their answer.

A question names a chunk's key things in other words. For a chunk of prose, its nouns are
ranked by tf-idf (count in the chunk times the log of how rare they are among all chunks);
only words that are nouns first (their noun senses are tagged more often in WordNet's
sense-tagged corpus than their senses of any other part of speech) and not vague ("thing",
"part") count. Each of the best is then said otherwise, by one of two rules:

* ``synonym``: another word of its first (most frequent) WordNet sense, or, when the sense has
  no other word, a word of that sense's first hypernym: ``licence`` -> "permit", ``car`` ->
  "automobile", ``refund`` -> "payment". The question: "Which part is about permit, payment
  and automobile?"
* ``gloss`` (harder; the crossword-clue rule): the definition of its first sense, up to its
  first ';': ``refund`` -> "money returned to a payer".

Two or three of them make a question. No model writes anything: WordNet's words and
definitions are human-made, the choice is mechanical, and the same seed gives the same
questions.

A replacement is kept only if it shares no word with the answer chunk as the search index
itself reads words (FTS5, porter stemming, lower case, accents folded): each content word is
looked up in the answer chunk through the index (``chunks_fts MATCH word AND rowid = answer``),
and a replacement with any hit is dropped (the next noun is tried). So BM25 cannot find the
answer chunk through any word of the question: it scores 0 there by construction, and what a
method finds, it finds by meaning.

WordNet comes from Debian's ``wordnet-base`` package (``apt-get install wordnet-base``: the
WordNet 3.0 database under /usr/share/wordnet), read directly from its index and data files.
"""

from __future__ import annotations

import math
import random
import re
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

from rlm_runtime.memory.terms import STOPWORDS

WORDNET = Path("/usr/share/wordnet")
NOUN = re.compile(r"\b[a-z]{4,}\b")
WORD = re.compile(r"[A-Za-z0-9]+")
#: Nouns too vague to name a chunk by.
VAGUE = frozenset("""thing things part parts kind kinds sort type types case cases time times way ways number numbers
    something anything nothing example examples information file files line lines text word words name names use uses
    value values item items list lists point points place fact form forms order end side group set sets people person
    year years lot work""".split())
RULES = ("synonym", "gloss")


class WordNet:
    """Nouns, their first sense's words, hypernym and definition, from WordNet's files."""

    def __init__(self, folder: Path = WORDNET) -> None:
        if not (folder / "index.noun").is_file():
            raise FileNotFoundError(f"no WordNet at {folder}: apt-get install wordnet-base")
        self.first: dict[str, int] = {}
        tagged: dict[str, int] = {}
        for line in self._lines(folder / "index.noun"):
            p = line.split()
            offsets = p[4 + int(p[3]) + 2:]
            if offsets and "_" not in p[0]:
                self.first[p[0]] = int(offsets[0])
                tagged[p[0]] = int(p[4 + int(p[3]) + 1])
        for pos in ("verb", "adj", "adv"):
            for line in self._lines(folder / f"index.{pos}"):
                p = line.split()
                if p[0] in tagged and int(p[4 + int(p[3]) + 1]) >= tagged[p[0]]:
                    del self.first[p[0]]  # mostly another part of speech ("good", "over", "left")
                    del tagged[p[0]]
        self.data = (folder / "data.noun").open("rb")

    @staticmethod
    def _lines(path: Path) -> list[str]:
        with path.open(encoding="utf-8") as f:
            return [line for line in f if not line.startswith(" ")]

    def _synset(self, offset: int) -> tuple[list[str], list[int], str]:
        self.data.seek(offset)
        line = self.data.readline().decode("utf-8", "replace")
        head, _, gloss = line.partition(" | ")
        p = head.split()
        count = int(p[3], 16)
        words = [p[4 + 2 * i].replace("_", " ") for i in range(count)]
        rest = p[4 + 2 * count:]
        pointers = [rest[1 + 4 * i: 5 + 4 * i] for i in range(int(rest[0]))]
        hypernyms = [int(ptr[1]) for ptr in pointers if ptr[0] in ("@", "@i")]
        return words, hypernyms, gloss

    def synonyms(self, noun: str) -> list[str]:
        """The other words of the noun's first sense, else those of its first hypernym."""
        offset = self.first.get(noun)
        if offset is None:
            return []
        words, hypernyms, _ = self._synset(offset)
        out = [w for w in words if w.lower() != noun and w.islower()]
        if not out and hypernyms:
            out = [w for w in self._synset(hypernyms[0])[0] if w.islower()]
        return out

    def gloss(self, noun: str) -> list[str]:
        """The definition of the noun's first sense (before its first ';', without brackets)."""
        offset = self.first.get(noun)
        if offset is None:
            return []
        text = self._synset(offset)[2].split(";", 1)[0]
        text = " ".join(re.sub(r"\([^)]*\)", "", text).replace('"', "").split()).strip(" .,")
        return [text] if 2 <= len(text.split()) <= 16 else []


def is_prose(text: str) -> bool:
    """Mostly letters and spaces, and sentences: documentation or essays, not code or tables."""
    if len(text) < 300:
        return False
    letters = sum(ch.isalpha() or ch == " " for ch in text)
    return letters >= 0.85 * len(text) and text.count(". ") >= 3


def content(text: str) -> list[str]:
    """The words of ``text`` that are not stop words (what BM25 ranks by; the store drops the rest)."""
    return [w for w in WORD.findall(text) if w.lower() not in STOPWORDS]


def shares_a_word(conn: sqlite3.Connection, words: list[str], chunk_id: int) -> bool:
    """Whether the index finds any of ``words`` in the chunk ``chunk_id`` (its own stemming)."""
    for w in words:
        row = conn.execute("SELECT 1 FROM chunks_fts WHERE chunks_fts MATCH ? AND rowid = ?", ('"' + w + '"', chunk_id)).fetchone()
        if row:
            return True
    return False


def questions(index_db: Path, n: int, rng: random.Random, rule: str, wordnet: WordNet | None = None,
              only: set[int] | None = None) -> list[dict[str, Any]]:
    """Up to ``n`` questions by ``rule`` (``synonym`` or ``gloss``), one per prose chunk drawn
    at random (among ``only``, chunk ids, when given), from the index of a ``ChunkSearch``
    context. Each: ``question``, ``query`` (its content words, what every method searches
    for), ``answer`` (``c0.<chunk id>``), ``nouns`` (the chunk's words it says otherwise),
    ``family`` (the rule)."""
    wn = wordnet or WordNet()
    say_otherwise = wn.synonyms if rule == "synonym" else wn.gloss
    conn = sqlite3.connect(f"{index_db.resolve().as_uri()}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT id, text FROM chunks ORDER BY id").fetchall()
        df: Counter[str] = Counter()
        for _, text in rows:
            df.update(set(NOUN.findall(text.lower())))
        order = list(range(len(rows)))
        rng.shuffle(order)
        out: list[dict[str, Any]] = []
        for i in order:
            if len(out) >= n:
                break
            chunk_id, text = int(rows[i][0]), str(rows[i][1])
            if (only is not None and chunk_id not in only) or not is_prose(text):
                continue
            tf = Counter(w for w in NOUN.findall(text.lower()) if w in wn.first and w not in VAGUE)
            ranked = sorted(tf, key=lambda w: (-tf[w] * math.log(len(rows) / df[w]), w))
            said: list[tuple[str, str]] = []
            for noun in ranked[:12]:
                for other in say_otherwise(noun):
                    words = content(other)
                    if words and other not in (s for _, s in said) and not shares_a_word(conn, words, chunk_id):
                        said.append((noun, other))
                        break
                if len(said) == 3:
                    break
            if len(said) < 2:
                continue
            parts = [s for _, s in said]
            question = f"Which part is about {', '.join(parts[:-1])} and {parts[-1]}?"
            out.append({"question": question, "query": " ".join(w for p in parts for w in content(p)), "answer": f"c0.{chunk_id}",
                        "nouns": [w for w, _ in said], "family": rule})
        return out
    finally:
        conn.close()
