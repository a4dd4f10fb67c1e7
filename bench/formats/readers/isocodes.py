"""ISO code lists as Debian's iso-codes package ships them (Debian: iso-codes).

* ``iso-3166-2-json``: ``/usr/share/iso-codes/json/iso_3166-2.json``, the country
  subdivisions of ISO 3166-2 as one pretty-printed JSON object whose single key ``"3166-2"``
  holds a list of objects, one key a line: ``code`` (``"AZ-BAB"``), ``name``, ``type``
  (``"Province"``), and for a subdivision inside another one ``parent``, the other's code
  *without* the country prefix (``"parent": "NX"`` for ``AZ-NX``).
* ``iso-639-3-xml``: ``/usr/share/xml/iso-codes/iso_639-3.xml``, the languages of ISO 639-3
  in the package's older XML form: a comment and a DOCTYPE that declares the attributes,
  then one empty element ``<iso_639_3_entry .../>`` a language, one attribute a line
  (``id``, ``part1_code``, ``part2_code``, ``status``, ``scope``, ``type``,
  ``inverted_name``, ``reference_name``, ``name``). Flat: no attribute names another entry.
"""

from __future__ import annotations

import re
from pathlib import Path

from model import Field, Format, Record

from readers._answers import answerable

_JSON_PAIR = re.compile(r'^\s*"(\w+)": "(.*)",?$')
_XML_ATTR = re.compile(r'^\s*(\w+)="(.*)"')


def _files(path: str) -> list[Path]:
    p = Path(path)
    return [p] if p.is_file() else []


def parse_3166_2(text: str) -> list[Record]:
    """One record an object: from its ``    {`` line to its ``    }`` line."""
    records = []
    pos = 0
    current: Record | None = None
    for line in text.splitlines(keepends=True):
        start, pos = pos, pos + len(line)
        body = line.rstrip("\n")
        if body == "    {":
            current = Record("", {}, start, pos)
        elif current is not None and body in ("    }", "    },"):
            current.end = pos
            f = current.fields
            current.name = f.get("name", "")
            if "parent" in f and "code" in f:
                # The parent is written without the country prefix; the link names the full code.
                f["parent_code"] = f"{f['code'].split('-')[0]}-{f['parent']}"
            records.append(current)
            current = None
        elif current is not None and (m := _JSON_PAIR.match(body)):
            current.fields[m.group(1)] = m.group(2)
    return records


def head_3166_2(text: str) -> int:
    i = text.find("\n    {\n")
    return i + 1 if i >= 0 else 0


def parse_639_3(text: str) -> list[Record]:
    """One record an element: from its ``<iso_639_3_entry`` line to the line that closes it."""
    records = []
    pos = 0
    current: Record | None = None
    for line in text.splitlines(keepends=True):
        start, pos = pos, pos + len(line)
        body = line.strip()
        if body == "<iso_639_3_entry":
            current = Record("", {}, start, pos)
            continue
        if current is None:
            continue
        if m := _XML_ATTR.match(line):
            current.fields[m.group(1)] = m.group(2)
        if body.endswith("/>"):
            current.end = pos
            current.name = current.fields.get("reference_name", "")
            records.append(current)
            current = None
    return records


def head_639_3(text: str) -> int:
    i = text.find("\t<iso_639_3_entry\n")
    return max(i, 0)


FORMATS = [
    Format(name="iso-3166-2-json", split="dev", source="Debian: iso-codes (json/iso_3166-2.json)",
           text="the ISO 3166-2 subdivision list", thing="subdivision", things="subdivisions",
           fields=(Field("code", "the code"), Field("type", "the type", count=True)),
           files=lambda: _files("/usr/share/iso-codes/json/iso_3166-2.json"), parse=answerable(parse_3166_2),
           link=Field("parent_code", "the parent"), link_key="code", head=head_3166_2),
    Format(name="iso-639-3-xml", split="heldout", source="Debian: iso-codes (xml/iso-codes/iso_639-3.xml)",
           text="the ISO 639-3 language list", thing="language", things="languages",
           fields=(Field("id", "the three-letter code"), Field("part1_code", "the two-letter code (part1_code)"),
                   Field("part2_code", "the part2_code"), Field("inverted_name", "the inverted name"),
                   Field("scope", "the scope", count=True), Field("type", "the type", count=True)),
           files=lambda: _files("/usr/share/xml/iso-codes/iso_639-3.xml"), parse=answerable(parse_639_3), head=head_639_3),
]
