"""The X Window System's keyboard data (Debian: libx11-data, xkb-data).

* ``x11-compose``: ``/usr/share/X11/locale/en_US.UTF-8/Compose``, the compose sequences of
  UTF-8 locales: one a line, ``<Multi_key> <o> <o> : "°" degree # DEGREE SIGN`` (the keys
  pressed, the string produced in double quotes, optionally its keysym, a ``#`` comment
  naming the character), under ``# Heading`` comment lines that group them (``# Latin-1
  Supplement``, ``# Arrows``); a commented-out sequence (``# "₭" U20ad KIP SIGN``) is no
  heading. Records: a section (a heading and the sequences up to the next one) holding its
  sequences, each named by its keys as written.
* ``xkb-registry``: ``/usr/share/X11/xkb/rules/base.xml`` then ``base.extras.xml``, the XKB
  configuration registry: ``<modelList>`` of ``<model>``s, ``<layoutList>`` of ``<layout>``s
  each with a ``<variantList>`` of ``<variant>``s, ``<optionList>`` of option ``<group>``s
  of ``<option>``s; each of these has a ``<configItem>`` with ``<name>`` (the XKB name,
  ``us``), ``<description>`` (``English (US)``), maybe ``<shortDescription>``,
  ``<vendor>``, ``<countryList>``/``<languageList>``. Records: models, layouts (holding
  their variants), variants and options (an option group is no record: its options stand
  alone), each named by its description.
"""

from __future__ import annotations

import re
from pathlib import Path

from model import Field, Format, Record

from readers._answers import answerable

_COMPOSE = Path("/usr/share/X11/locale/en_US.UTF-8/Compose")
_XKB = [Path("/usr/share/X11/xkb/rules/base.xml"), Path("/usr/share/X11/xkb/rules/base.extras.xml")]
_SEQUENCE = re.compile(r'^(?P<keys><[^:]*?>)\s*:\s*"(?P<result>(?:[^"\\]|\\.)*)"\s*(?P<keysym>[A-Za-z0-9_]+)?\s*(?:#\s*(?P<comment>.*?))?\s*$')
_TAG = re.compile(r"^<(\w+)>(.*)</\1>$")


def _present(paths: list[Path]) -> list[Path]:
    return [p for p in paths if p.is_file()]


def parse_compose(text: str) -> list[Record]:
    records: list[Record] = []
    section: Record | None = None
    pos = 0
    for line in text.splitlines(keepends=True):
        start, pos = pos, pos + len(line)
        body = line.strip()
        if body.startswith("#"):
            heading = body.lstrip("#").strip()
            if heading and not heading.startswith('"'):
                section = Record(heading, {}, start, pos)
                records.append(section)
            continue
        m = _SEQUENCE.match(body)
        if not m:
            continue
        fields = {k: v for k, v in (("keysym", m.group("keysym")), ("comment", m.group("comment"))) if v}
        if "\\" not in m.group("result"):
            fields["result"] = m.group("result")
        records.append(Record(m.group("keys"), fields, start, pos, parent=section.name if section else None))
        if section is not None:
            section.end = pos
    return records


_KINDS = {"model", "layout", "variant", "option"}
_FIELDS = {"name": "id", "shortDescription": "short", "vendor": "vendor", "iso3166Id": "country", "iso639Id": "language"}


def parse_xkb(text: str) -> list[Record]:
    records: list[Record] = []
    stack: list[tuple[str, Record]] = []  # the elements open, innermost last
    held: list[tuple[Record, Record]] = []  # (variant, its layout): names are read after the element opens
    in_item = False
    pos = 0
    for line in text.splitlines(keepends=True):
        start, pos = pos, pos + len(line)
        body = line.strip()
        tag = re.match(r"^<(/?)(\w+)", body)
        if not tag:
            continue
        closing, name = tag.group(1) == "/", tag.group(2)
        if name in _KINDS and not body.endswith("/>"):
            if not closing:
                record = Record("", {}, start, pos)
                if name == "variant" and stack and stack[-1][0] == "layout":
                    held.append((record, stack[-1][1]))
                stack.append((name, record))
                records.append(record)
            elif stack and stack[-1][0] == name:
                stack.pop()[1].end = pos
        elif name == "configItem":
            in_item = not closing and not body.endswith("/>")
        elif in_item and stack and (m := _TAG.match(body)):
            record = stack[-1][1]
            if m.group(1) == "description":
                record.name = record.name or m.group(2)
            elif m.group(1) in _FIELDS and _FIELDS[m.group(1)] not in record.fields:
                record.fields[_FIELDS[m.group(1)]] = m.group(2)
    for variant, layout in held:
        variant.parent = layout.name or None
    return [r for r in records if r.name]


FORMATS = [
    Format(name="x11-compose", split="heldout", source="Debian: libx11-data (X11/locale/en_US.UTF-8/Compose)",
           text="the X11 Compose file", thing="compose sequence", things="compose sequences",
           fields=(Field("result", "the output string"), Field("keysym", "the output keysym"),
                   Field("comment", "the comment (character name)")),
           files=lambda: _present([_COMPOSE]), parse=answerable(parse_compose), holder="section", held="compose sequences"),
    Format(name="xkb-registry", split="dev", source="Debian: xkb-data (X11/xkb/rules/base.xml, base.extras.xml)",
           text="the XKB keyboard configuration registry", thing="entry", things="entries",
           fields=(Field("id", "the XKB name (<name>)"), Field("short", "the short description"),
                   Field("vendor", "the vendor", count=True), Field("country", "the first country code (iso3166Id)"),
                   Field("language", "the first language code (iso639Id)")),
           files=lambda: _present(_XKB), parse=answerable(parse_xkb), holder="layout", held="variants"),
]
