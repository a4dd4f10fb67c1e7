"""Machine-readable Debian copyright files (DEP-5: ``/usr/share/doc/*/copyright``).

A file is paragraphs of ``Field: value`` lines (a value continues on lines starting with a
space; `` .`` stands for a blank line in it) separated by blank lines: a header paragraph
(``Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/``,
``Upstream-Name:``, ``Source:``), ``Files:`` paragraphs (patterns, ``Copyright:`` holders,
``License:`` short name) and stand-alone ``License:`` paragraphs with the license text.
Only the files in this format are taken (the others are free text), concatenated in path
order, a file whose text repeats an earlier one's left out.

* ``debian-copyright``: ``Files:`` paragraphs, named by their patterns, held by the header
  paragraph's upstream project (``Upstream-Name``).
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from model import Field, Format, Record

_FIELD = re.compile(r"^([A-Za-z][A-Za-z0-9-]*):[ \t]?(.*)$")


def _files() -> list[Path]:
    seen: set[bytes] = set()
    paths = []
    for path in sorted(Path("/usr/share/doc").glob("*/copyright")):
        if not path.is_file():
            continue
        data = path.read_bytes()
        first = data.split(b"\n", 1)[0]
        if not (first.startswith(b"Format:") and b"copyright-format" in first):
            continue
        digest = hashlib.sha256(data).digest()
        if digest not in seen:
            seen.add(digest)
            paths.append(path)
    return paths


def _paragraphs(text: str):
    """(start, end, {field: [lines of its value]}) for each run of non-blank lines."""
    pos, start, fields, key = 0, None, {}, None
    end = 0
    for line in text.splitlines(keepends=True):
        begin, pos = pos, pos + len(line)
        if not line.strip():
            if start is not None:
                yield start, end, fields
            start, fields, key = None, {}, None
            continue
        if start is None:
            start = begin
        end = pos
        m = _FIELD.match(line.rstrip("\n"))
        if m and not line[0].isspace():
            key = m.group(1).lower()
            fields.setdefault(key, []).append(m.group(2).strip())
        elif key is not None:
            fields[key].append(line.strip())
    if start is not None:
        yield start, end, fields


def parse(text: str) -> list[Record]:
    records: list[Record] = []
    holder: Record | None = None
    for start, end, fields in _paragraphs(text):
        if "format" in fields:
            name = fields.get("upstream-name", [""])[0]
            holder = Record(name, {}, start, end) if name else None  # no name: its paragraphs stand alone
            if holder is not None:
                records.append(holder)
        elif "files" in fields:
            if holder is not None:
                holder.end = end
            name = " ".join(" ".join(fields["files"]).split())
            copyright_ = next((v for v in fields.get("copyright", []) if v), "")
            records.append(Record(name, {"license": fields.get("license", [""])[0], "copyright": copyright_},
                                  start, end, parent=holder.name if holder is not None else None))
        elif holder is not None and fields:
            holder.end = end
    return records


FORMATS = [
    Format(name="debian-copyright", split="dev", source="Debian: every installed package's machine-readable "
           "/usr/share/doc/*/copyright", text="the Debian machine-readable copyright files",
           thing="Files paragraph", things="Files paragraphs",
           fields=(Field("license", "the license", count=True), Field("copyright", "the first Copyright line")),
           files=_files, parse=parse, holder="upstream project", held="Files paragraphs"),
]
