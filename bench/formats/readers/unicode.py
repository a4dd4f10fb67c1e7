"""The Unicode Character Database's main table and its annotated names list (Debian: unicode-data).

* ``unicode-data``: ``UnicodeData.txt``, one character a line, 15 fields separated by ``;``
  with no labels (their meaning is in the standard, UAX #44).
* ``unicode-names``: ``NamesList.txt``, characters under block headers (``@@``) and
  subheads (``@``), each character's line followed by tab-indented annotations: ``=``
  aliases, ``*`` notes, ``x`` cross references, ``#`` decompositions.
"""

from __future__ import annotations

from pathlib import Path

from model import Field, Format, Record

from readers._answers import answerable

_DIR = Path("/usr/share/unicode")


def _files(name: str) -> list[Path]:
    path = _DIR / name
    return [path] if path.is_file() else []


def parse_data(text: str) -> list[Record]:
    records = []
    pos = 0
    for line in text.splitlines(keepends=True):
        start, pos = pos, pos + len(line)
        parts = line.rstrip("\n").split(";")
        if len(parts) != 15 or parts[1].startswith("<"):
            continue  # controls and ranges have no name of their own
        records.append(Record(parts[1], {"code": parts[0], "category": parts[2], "combining": parts[3],
                                         "bidi": parts[4], "decomposition": parts[5], "numeric": parts[8],
                                         "mirrored": parts[9], "upper": parts[12], "lower": parts[13]}, start, pos))
    return records


def parse_names(text: str) -> list[Record]:
    records: list[Record] = []
    block: Record | None = None
    current: Record | None = None
    pos = 0
    for line in text.splitlines(keepends=True):
        start, pos = pos, pos + len(line)
        body = line.rstrip("\n")
        if body.startswith("@@\t"):
            parts = body.split("\t")
            if len(parts) >= 4:
                block = Record(parts[2], {"first": parts[1], "last": parts[3]}, start, pos)
                records.append(block)
                current = None
            continue
        if body.startswith("@"):
            continue
        if body.startswith("\t") and current is not None:
            mark, _, rest = body.strip().partition(" ")
            if mark == "=" and "alias" not in current.fields:
                current.fields["alias"] = rest
            current.end = pos
            if block is not None:
                block.end = pos
            continue
        code, tab, name = body.partition("\t")
        if tab and code and all(c in "0123456789ABCDEF" for c in code) and not name.startswith("<"):
            current = Record(name, {"code": code}, start, pos, parent=block.name if block else None)
            records.append(current)
            if block is not None:
                block.end = pos
    return records


FORMATS = [
    Format(name="unicode-data", split="dev", source="Debian: unicode-data", text="the Unicode character table",
           thing="character", things="characters",
           fields=(Field("code", "the code point"), Field("category", "the general category", count=True),
                   Field("bidi", "the bidirectional class", count=True), Field("decomposition", "the decomposition"),
                   Field("combining", "the canonical combining class", count=True),
                   Field("mirrored", "the mirrored flag"), Field("numeric", "the numeric value")),
           files=lambda: _files("UnicodeData.txt"), parse=answerable(parse_data),
           link=Field("lower", "the lowercase mapping"), link_key="code"),
    Format(name="unicode-names", split="heldout", source="Debian: unicode-data", text="the Unicode names list",
           thing="character", things="characters",
           fields=(Field("code", "the code point"), Field("alias", "the first alias"),
                   Field("first", "the first code point"), Field("last", "the last code point")),
           files=lambda: _files("NamesList.txt"), parse=answerable(parse_names), holder="block", held="characters"),
]
