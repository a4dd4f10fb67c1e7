"""GSettings schema sources of the GNOME desktop (Debian: gsettings-desktop-schemas,
``/usr/share/glib-2.0/schemas/*.gschema.xml``), concatenated in path order.

Each file is an XML ``<schemalist>`` of ``<schema id="org.gnome.desktop.background"
path="/org/gnome/desktop/background/">`` elements, each holding ``<key name="picture-uri"
type="s">`` elements (or ``enum="..."`` instead of a GVariant ``type``) with a
``<default>`` in GVariant text (``'zoom'``, ``true``, ``['a', 'b']``), a ``<summary>``, a
``<description>`` and sometimes a ``<range min=.. max=..>`` or ``<choices>``; a schema may
also name ``<child>`` schemas.

* ``gsettings-schemas``: keys, named by their name, held by their schema (named by its id).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from model import Field, Format, Record

_DIR = Path("/usr/share/glib-2.0/schemas")


def _files() -> list[Path]:
    return sorted(p for p in _DIR.glob("*.gschema.xml") if p.is_file()) if _DIR.is_dir() else []


def parse(text: str) -> list[Record]:
    records: list[Record] = []
    schema: Record | None = None
    key_start = None
    pos = 0
    for line in text.splitlines(keepends=True):
        start, pos = pos, pos + len(line)
        if line.startswith("  <schema "):
            element = ET.fromstring(line.strip().rstrip(">").rstrip("/") + "/>")
            schema = Record(element.get("id", ""), {}, start, pos)
            records.append(schema)
        elif line.startswith("  </schema>") and schema is not None:
            schema.end = pos
            schema = None
        elif line.startswith("    <key "):
            key_start = start
        elif line.startswith("    </key>") and key_start is not None:
            key = ET.fromstring(text[key_start:pos])
            rng = key.find("range")
            records.append(Record(key.get("name", ""), {
                "type": key.get("type", ""), "enum": key.get("enum", ""),
                "default": (key.findtext("default") or "").strip(), "summary": (key.findtext("summary") or "").strip(),
                "max": rng.get("max", "") if rng is not None else ""},
                key_start, pos, parent=schema.name if schema is not None else None))
            key_start = None
    return records


FORMATS = [
    Format(name="gsettings-schemas", split="dev", source="Debian: gsettings-desktop-schemas (*.gschema.xml)",
           text="the GNOME desktop GSettings schema files", thing="key", things="keys",
           fields=(Field("type", "the GVariant type", count=True), Field("enum", "the enum type", count=True),
                   Field("default", "the default value"), Field("summary", "the summary"),
                   Field("max", "the range maximum")),
           files=_files, parse=parse, holder="schema", held="keys"),
]
