"""The shared MIME-info database's source (Debian: shared-mime-info,
``/usr/share/mime/packages/freedesktop.org.xml``).

One XML document: a DTD, then ``<mime-info>`` holding ``<mime-type type="application/x-tar">``
elements, each with its ``<comment>`` in English and in dozens of languages
(``xml:lang``), optional ``<acronym>``/``<expanded-acronym>``, ``<generic-icon name=..>``,
``<glob pattern="*.tar"/>``, ``<magic>`` byte matches, ``<alias type=..>`` and
``<sub-class-of type=..>`` naming the type it is a kind of.

* ``mime-database``: MIME types, named by their type; ``sub-class-of`` names another type.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from model import Field, Format, Record

_PATH = Path("/usr/share/mime/packages/freedesktop.org.xml")
_LANG = "{http://www.w3.org/XML/1998/namespace}lang"


def _first(element: ET.Element, tag: str, attr: str | None = None) -> str:
    for child in element.findall(tag):
        if attr is None:
            if _LANG not in child.attrib:
                return (child.text or "").strip()
        elif child.get(attr):
            return child.get(attr, "")
    return ""


def parse(text: str) -> list[Record]:
    records = []
    pos = 0
    start = None
    for line in text.splitlines(keepends=True):
        begin, pos = pos, pos + len(line)
        if line.startswith("  <mime-type "):
            start = begin
        elif line.startswith("  </mime-type>") and start is not None:
            element = ET.fromstring(text[start:pos])
            records.append(Record(element.get("type", ""), {
                "comment": _first(element, "comment"), "acronym": _first(element, "acronym"),
                "expanded": _first(element, "expanded-acronym"),
                "icon": _first(element, "generic-icon", "name"), "glob": _first(element, "glob", "pattern"),
                "alias": _first(element, "alias", "type"), "parent": _first(element, "sub-class-of", "type")},
                start, pos))
            start = None
    return records


def _head(text: str) -> int:
    at = text.find("\n  <mime-type ")
    return at + 1 if at >= 0 else 0


FORMATS = [
    Format(name="mime-database", split="heldout", source="Debian: shared-mime-info (freedesktop.org.xml)",
           text="the shared MIME-info database XML", thing="MIME type", things="MIME types",
           fields=(Field("comment", "the English comment"), Field("acronym", "the acronym"),
                   Field("expanded", "the expanded acronym"),
                   Field("icon", "the generic icon", count=True), Field("glob", "the first glob pattern"),
                   Field("alias", "the first alias"), Field("parent", "the first sub-class-of type", count=True)),
           files=lambda: [_PATH] if _PATH.is_file() else [], parse=parse,
           link=Field("parent", "the first sub-class-of type"), head=_head),
]
