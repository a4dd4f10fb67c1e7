"""The real text the built-in suites are made of, and the names they plant in it.

Prose (the haystack): the paragraphs of Python's language reference as the standard library
ships it (``pydoc_data/topics.py``, ~0.5 MB), then the long docstrings of the standard
library's own modules (~1.8 MB, read from the ``.py`` files, never imported). Both are part of
CPython, under the Python Software Foundation License (PSF-2.0). A context longer than both
(beyond ~2.2 MB) reuses the paragraphs in another order. The text differs between Python
versions, so a suite is deterministic for a seed on one Python version.

Source (code QA): the standard library's ``.py`` files (tests, idlelib, lib2to3 and
site-packages left out), same licence.

Planted facts use made-up names built from syllables, so they never occur in the prose.
"""

from __future__ import annotations

import random
import re
import sysconfig
from functools import lru_cache
from pathlib import Path

TEXT_SOURCE = ("Python's language reference (pydoc_data/topics.py) and the docstrings of the standard library; "
               "PSF License 2.0")
CODE_SOURCE = "the Python standard library's .py files; PSF License 2.0"

_SKIP_PARTS = {"test", "tests", "idlelib", "lib2to3", "site-packages", "dist-packages", "turtledemo", "__pycache__",
               "ensurepip", "venv"}
_DOCSTRING = re.compile(r'"""(.*?)"""', re.S)
_SYLLABLES = ("ka", "lo", "mir", "ven", "dor", "tal", "bri", "sen", "qua", "rho", "zel", "pim", "nov", "gar", "tis",
              "vel", "mon", "dra", "lux", "fen", "oro", "cai", "bel", "rust", "whit", "yar", "jun", "pex", "sul", "tor")


def stdlib_dir() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


@lru_cache(maxsize=1)
def stdlib_files() -> tuple[Path, ...]:
    """The standard library's own ``.py`` files, sorted by their relative path."""
    root = stdlib_dir()
    found = [p for p in root.rglob("*.py") if not (_SKIP_PARTS & set(p.relative_to(root).parts))]
    return tuple(sorted(found, key=lambda p: p.relative_to(root).as_posix()))


def _clean(paragraph: str) -> str:
    return " ".join(paragraph.split())


@lru_cache(maxsize=1)
def reference_paragraphs() -> tuple[str, ...]:
    """Paragraphs of the language reference, in the order the module lists them."""
    import pydoc_data.topics as topics

    out: list[str] = []
    for key in sorted(topics.topics):
        for block in re.split(r"\n\s*\n", topics.topics[key]):
            text = _clean(block)
            if len(text) >= 60 and sum(c.isalpha() for c in text) > 0.6 * len(text):
                out.append(text)
    return tuple(out)


@lru_cache(maxsize=1)
def docstring_paragraphs() -> tuple[str, ...]:
    """Prose paragraphs of the standard library's long docstrings."""
    out: list[str] = []
    for path in stdlib_files():
        try:
            source = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for m in _DOCSTRING.finditer(source):
            for block in re.split(r"\n\s*\n", m.group(1)):
                text = _clean(block)
                if len(text) >= 80 and sum(c.isalpha() for c in text) > 0.7 * len(text):
                    out.append(text)
    return tuple(out)


def prose_lines(rng: random.Random, chars: int) -> list[str]:
    """Paragraphs (one per line) of about ``chars`` characters in all, in an order drawn from ``rng``."""
    pool = list(reference_paragraphs())
    if sum(len(p) + 1 for p in pool) < chars:
        pool += docstring_paragraphs()
    lines: list[str] = []
    size = 0
    while size < chars:
        order = pool[:]
        rng.shuffle(order)
        for p in order:
            if size >= chars:
                break
            if size + len(p) + 1 > chars and len(p) > 200:  # trim the last one to land near the length
                p = p[: max(60, chars - size - 1)].rsplit(" ", 1)[0] + "."
            lines.append(p)
            size += len(p) + 1
    return lines


def plant(lines: list[str], facts: list[str], rng: random.Random, *, spread: bool = True) -> list[str]:
    """``lines`` with each fact inserted as a line of its own at a random place."""
    out = list(lines)
    for fact in facts:
        out.insert(rng.randint(0, len(out)) if spread else len(out), fact)
    return out


def join(lines: list[str]) -> str:
    return "\n".join(lines) + "\n"


def made_up_names(rng: random.Random, n: int, *, syllables: tuple[int, int] = (2, 3), taken: set[str] | None = None) -> list[str]:
    """``n`` distinct capitalised made-up names (``Velorin``, ``Brisenta``...)."""
    taken = set() if taken is None else taken
    names: list[str] = []
    while len(names) < n:
        name = "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(*syllables))).capitalize()
        if name not in taken and len(name) >= 5:
            taken.add(name)
            names.append(name)
    return names


def people(rng: random.Random, n: int, taken: set[str] | None = None) -> list[str]:
    """``n`` distinct made-up full names ("Velorin Dragast")."""
    taken = set() if taken is None else taken
    first = made_up_names(rng, n, syllables=(2, 2), taken=taken)
    last = made_up_names(rng, n, syllables=(2, 3), taken=taken)
    return [f"{a} {b}" for a, b in zip(first, last, strict=True)]


def words(rng: random.Random, n: int) -> str:
    """A short fragment of real prose (``n`` consecutive words of a reference paragraph)."""
    paragraphs = reference_paragraphs()
    for _ in range(20):
        tokens = rng.choice(paragraphs).split()
        if len(tokens) > n:
            start = rng.randint(0, len(tokens) - n)
            return " ".join(tokens[start:start + n]).strip(".,;:").lower()
    return "no further details given"
