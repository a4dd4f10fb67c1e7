"""Python's documentation prose as reStructuredText (Debian: python3.N-doc,
``/usr/share/doc/python3.N/html/_sources/**/*.rst.txt``): the tutorial, HOWTOs, FAQs, the
language reference, What's New, installing and extending; the library and C API references
(object directives, ``rstdocs.py``) left out. Concatenated in path order.

Paragraphs of prose under section titles, a title being a line of text with an underline
(and sometimes an overline) of one repeated punctuation character at least as long:
``****`` over and under a chapter's title, then ``====``, ``----``, ``^^^^`` (and ``"``) under
its sections, by the Python documentation's convention. A title may follow a label,
``.. _tut-calculator:``, that cross references name it by.

* ``python-docs-prose``: sections, named by their title; a document's (overlined) title holds
  its sections, and a section the sections one level below it (by the convention's order of
  underlines); ``label`` is the label above it.
"""

from __future__ import annotations

import re
from pathlib import Path

from model import Field, Format, Record

#: The underlines in the order of the Python documentation's convention; an overlined title
#: is a document's (or a part's) title, above them all.
_RANKS = ["=", "-", "^", '"', "~", "*", "+", "'", "`", ".", ":", "#"]
_ADORNMENT = re.compile(r"^([=\-*#^\"~+`'.:])\1{2,}\s*$")
_LABEL = re.compile(r"^\.\. _([^:]+):\s*$")


def _files() -> list[Path]:
    dirs = [d for d in Path("/usr/share/doc").glob("python3.*") if re.fullmatch(r"python3\.\d+", d.name)
            and (d / "html/_sources").is_dir()]
    if not dirs:
        return []
    root = max(dirs, key=lambda d: int(d.name.split(".")[1])) / "html/_sources"
    return sorted((p for p in root.rglob("*.rst.txt") if p.is_file()
                   and p.relative_to(root).parts[0] not in ("library", "c-api")), key=lambda p: p.relative_to(root))


def parse(text: str) -> list[Record]:
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    heads = []  # (first line, rank, title, label)
    i = 1
    while i < len(lines):
        under = lines[i].rstrip("\n")
        title = lines[i - 1].rstrip("\n")
        m = _ADORNMENT.match(under)
        over = i >= 2 and lines[i - 2].rstrip("\n") == under
        if m and title.strip() and not _ADORNMENT.match(title) and (over or not title.startswith(" ")) \
                and len(under.rstrip()) >= len(title.rstrip()):
            first = i - 2 if over else i - 1
            rank = 0 if over else 1 + _RANKS.index(m.group(1))
            label = ""
            j = first - 1
            while j >= 0 and not lines[j].strip():
                j -= 1
            if j >= 0 and _LABEL.match(lines[j].rstrip("\n")):
                label = _LABEL.match(lines[j].rstrip("\n")).group(1)  # type: ignore[union-attr]
            heads.append((first, rank, title.strip(), label))
            i += 2
            continue
        i += 1
    records = []
    stack: list[tuple[int, str]] = []  # (rank, title) of the sections open
    for k, (first, rank, title, label) in enumerate(heads):
        stop = next((h[0] for h in heads[k + 1:] if h[1] <= rank), len(lines))
        while stop > first + 1 and (not lines[stop - 1].strip() or _LABEL.match(lines[stop - 1].rstrip("\n"))):
            stop -= 1  # the blank lines and the label that belong to the next section
        while stack and stack[-1][0] >= rank:
            stack.pop()
        records.append(Record(title, {"label": label}, offsets[first], offsets[stop],
                              parent=stack[-1][1] if stack else None))
        stack.append((rank, title))
    return records


FORMATS = [
    Format(name="python-docs-prose", split="heldout", source="Debian: python3.N-doc (tutorial, HOWTOs, FAQs, "
           "reference, What's New: reST sources)", text="the Python documentation sources", thing="section",
           things="sections", fields=(Field("label", "the cross-reference label"),),
           files=_files, parse=parse, holder="section", held="direct subsections"),
]
