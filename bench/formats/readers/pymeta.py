"""Python packages' core metadata with markdown descriptions (PyPI wheels: every installed
``*.dist-info/METADATA`` whose ``Description-Content-Type`` is markdown).

Each file is an email-style header (``Metadata-Version``, ``Name``, ``Version``, ``Summary``,
``Requires-Python``, repeated ``Requires-Dist`` and ``Classifier`` lines), a blank line, and
the package's long description in markdown: prose, lists, fenced code, tables, and ATX
headings (``#`` to ``######``) of several levels. Files are concatenated in path order; the
text never says where one file ends but by the next ``Metadata-Version:`` line.

* ``py-metadata-md``: entries are the packages (named by ``Name``, with ``Version``,
  ``Summary`` and ``Requires-Python``) and the headings of their descriptions (named by
  their text, with the first line of text under them); a package holds its top headings and
  a heading holds the deeper headings under it, up to the next heading of its level or
  higher. A heading inside fenced code is code, not a heading.
"""

from __future__ import annotations

import re
import sysconfig
from pathlib import Path

from model import Field, Format, Record

_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$")
_FENCE = re.compile(r"^[ \t]{0,3}(```|~~~)")
_HEADER_KEYS = {"Name": "name", "Version": "version", "Summary": "summary", "Requires-Python": "requires_python"}


def _files() -> list[Path]:
    root = Path(sysconfig.get_paths()["purelib"])
    out = []
    for path in sorted(root.glob("*.dist-info/METADATA")):
        head = path.read_text(encoding="utf-8", errors="replace").split("\n\n", 1)[0]
        if re.search(r"^Description-Content-Type:\s*text/markdown", head, re.M | re.I):
            out.append(path)
    return out


def _first_line(lines: list[str], start: int, stop: int) -> str:
    """The first line of prose under a heading: not blank, not a heading, a fence, a table
    rule, an image or an HTML tag."""
    for line in lines[start:stop]:
        text = line.strip()
        if _FENCE.match(text):
            return ""  # code first: no line of text to ask for
        if text and not _HEADING.match(text) and not text.startswith(("<", "![", "[![", "|", "---", "===")):
            return text
    return ""


def parse(text: str) -> list[Record]:
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    docs = [i for i, line in enumerate(lines) if line.startswith("Metadata-Version:")] + [len(lines)]
    records: list[Record] = []
    for d in range(len(docs) - 1):
        first, stop = docs[d], docs[d + 1]
        body = next((i for i in range(first, stop) if not lines[i].strip()), stop)
        fields: dict[str, str] = {}
        for line in lines[first:body]:
            key, colon, value = line.rstrip("\n").partition(":")
            if colon and key in _HEADER_KEYS and _HEADER_KEYS[key] not in fields:
                fields[_HEADER_KEYS[key]] = value.strip()
        package = fields.pop("name", "")
        records.append(Record(package, fields, offsets[first], offsets[stop]))
        headings: list[tuple[int, int, str]] = []  # (line, level, text)
        fenced = False
        for i in range(body, stop):
            line = lines[i].rstrip("\n")
            if _FENCE.match(line):
                fenced = not fenced
                continue
            m = None if fenced else _HEADING.match(line)
            if m:
                headings.append((i, len(m.group(1)), m.group(2).strip()))
        for k, (i, level, name) in enumerate(headings):
            end = next((j for j, lv, _ in headings[k + 1:] if lv <= level), stop)
            nxt = headings[k + 1][0] if k + 1 < len(headings) else stop
            parent = next((nm for _, lv, nm in reversed(headings[:k]) if lv < level), package)
            said = _first_line(lines, i + 1, nxt)
            own = {"first_line": said} if said else {}
            records.append(Record(name, own, offsets[i], offsets[end], parent))
    return records


FORMATS = [
    Format(name="py-metadata-md", split="dev",
           source="PyPI wheels: every installed *.dist-info/METADATA with a markdown description",
           text="the Python packages' metadata files (headers and markdown descriptions)", thing="entry",
           things="entries",
           fields=(Field("version", "the Version"), Field("summary", "the Summary"),
                   Field("requires_python", "the Requires-Python setting", count=True),
                   Field("first_line", "the first line of text")),
           files=_files, parse=parse, holder="entry", held="entries"),
]
