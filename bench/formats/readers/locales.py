"""glibc's locale sources, one after another (Debian: locales).

``glibc-locales``: the files ``/usr/share/i18n/locales/ll_CC`` (and ``ll_CC@variant``),
the POSIX ``localedef`` input glibc compiles its locales from, in name order. Each begins
with ``comment_char %`` and ``escape_char /`` (either first), ``%`` comments, then
categories ``LC_IDENTIFICATION`` ... ``END LC_IDENTIFICATION``, ``LC_CTYPE``, ``LC_TIME``,
``LC_MONETARY``, ``LC_ADDRESS``, ``LC_TELEPHONE`` and so on, each a list of ``keyword
value`` lines (strings in double quotes, ``;`` between list items, ``/`` at a line's end
continuing it, ``<U00E5>`` for a character by its code point) or ``copy "other_locale"``
taking the whole category from another locale. The text never writes a locale's own file
name, so a ``copy`` names nothing a reader of the text can find: no question goes through it.

Records here: a locale (one file), named by its ``title``; its fields are the first value of
a few keywords, kept only when written plainly (no ``/`` escape, no ``<U...>``, no list).
"""

from __future__ import annotations

import re
from pathlib import Path

from model import Field, Format, Record

from readers._answers import answerable

_DIR = Path("/usr/share/i18n/locales")
_NAME = re.compile(r"^[a-z]{2,3}_[A-Z]{2}(@[a-z]+)?$")
_LINE = re.compile(r"^(\w+)[ \t]+(.*?)\s*$")
_KEYS = ("title", "source", "language", "territory", "revision", "date", "int_curr_symbol", "currency_symbol",
         "d_fmt", "first_weekday", "country_name", "lang_name", "int_prefix")
_START = ("comment_char", "escape_char")


def _files() -> list[Path]:
    return sorted(p for p in _DIR.glob("*_*") if _NAME.match(p.name) and p.is_file()) if _DIR.is_dir() else []


def parse(text: str) -> list[Record]:
    records: list[Record] = []
    current: Record | None = None
    previous = ""
    pos = 0
    for line in text.splitlines(keepends=True):
        start, pos = pos, pos + len(line)
        word = line.split(maxsplit=1)[0] if line.strip() else ""
        if word in _START and previous not in _START:
            current = Record("", {}, start, pos)
            records.append(current)
        previous = word
        if current is None:
            continue
        current.end = pos
        m = _LINE.match(line)
        if m and m.group(1) in _KEYS and m.group(1) not in current.fields:
            value = m.group(2)
            if len(value) >= 2 and value[0] == value[-1] == '"':
                value = value[1:-1]
            if m.group(1) == "title":
                current.name = value
            elif '"' not in value and "/" not in value and "<U" not in value and ";" not in value:
                current.fields[m.group(1)] = value.strip()
    return [r for r in records if r.name]


FORMATS = [
    Format(name="glibc-locales", split="heldout", source="Debian: locales (/usr/share/i18n/locales/ll_CC*)",
           text="the glibc locale sources", thing="locale", things="locales",
           fields=(Field("language", "the language (LC_IDENTIFICATION)", count=True),
                   Field("territory", "the territory (LC_IDENTIFICATION)", count=True),
                   Field("source", "the source (LC_IDENTIFICATION)", count=True),
                   Field("revision", "the revision"), Field("date", "the date (LC_IDENTIFICATION)"),
                   Field("int_curr_symbol", "the international currency symbol (int_curr_symbol)"),
                   Field("currency_symbol", "the currency symbol"), Field("d_fmt", "the date format (d_fmt)"),
                   Field("first_weekday", "the first weekday (first_weekday)"),
                   Field("country_name", "the country name (LC_ADDRESS)"), Field("lang_name", "the language name (LC_ADDRESS)"),
                   Field("int_prefix", "the international dialing prefix (int_prefix)")),
           files=_files, parse=answerable(parse)),
]
