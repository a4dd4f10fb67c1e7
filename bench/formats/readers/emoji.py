"""Unicode's emoji test data and the Script property (Debian: unicode-data).

* ``emoji-test``: ``/usr/share/unicode/emoji/emoji-test.txt`` (UTS #51): a ``#`` header
  explaining the fields, then ``# group: Smileys & Emotion`` lines, each followed by
  ``# subgroup: face-smiling`` blocks of emoji, one a line: ``1F600 ; fully-qualified #
  😀 E1.0 grinning face`` (code points, status, then after ``#`` the emoji, the version
  that added it and its name); ``# Smileys & Emotion subtotal:`` lines close a group, a
  ``# Status Counts`` block ends the file. Records: a subgroup holding its emoji, each
  named by its name, its group (from the ``# group:`` line above) a field; the unqualified
  form of an emoji shares its name with the fully-qualified one, so such names make no
  question.
* ``unicode-scripts``: ``/usr/share/unicode/Scripts.txt`` (UAX #24): a header, then one
  line a code point or range: ``0021..0023    ; Common # Po   [3] EXCLAMATION
  MARK..NUMBER SIGN`` (range, script, then after ``#`` the general category, the number of
  code points in brackets when more than one, and the first and last names), in sections
  one a script, each ending ``# Total code points: 8301``. Records: a line (an entry),
  named by its names; flat (the sections have no heading but their script).
"""

from __future__ import annotations

import re
from pathlib import Path

from model import Field, Format, Record

from readers._answers import answerable

_EMOJI = Path("/usr/share/unicode/emoji/emoji-test.txt")
_SCRIPTS = Path("/usr/share/unicode/Scripts.txt")
_EMOJI_LINE = re.compile(r"^([0-9A-F ]+?)\s*;\s*([a-z-]+)\s*#\s*(\S+) (E\d+\.\d+) (.+)$")
_SCRIPT_LINE = re.compile(r"^([0-9A-F.]+)\s*;\s*(\w+)\s*#\s*(\S+)\s+(?:\[(\d+)\])?\s*(.+)$")


def _present(path: Path) -> list[Path]:
    return [path] if path.is_file() else []


def parse_emoji(text: str) -> list[Record]:
    records: list[Record] = []
    group = ""
    subgroup: Record | None = None
    pos = 0
    for line in text.splitlines(keepends=True):
        start, pos = pos, pos + len(line)
        body = line.rstrip("\n")
        if body.startswith("# group: "):
            group, subgroup = body[len("# group: "):].strip(), None
        elif body.startswith("# subgroup: "):
            subgroup = Record(body[len("# subgroup: "):].strip(), {}, start, pos)
            records.append(subgroup)
        elif subgroup is not None and (m := _EMOJI_LINE.match(body)):
            records.append(Record(m.group(5), {"code": m.group(1), "status": m.group(2), "emoji": m.group(3),
                                               "version": m.group(4), "group": group}, start, pos, parent=subgroup.name))
            subgroup.end = pos
        elif not body:
            subgroup = None
    return records


def head_emoji(text: str) -> int:
    i = text.find("\n# group: ")
    return i + 1 if i >= 0 else 0


def parse_scripts(text: str) -> list[Record]:
    records = []
    pos = 0
    for line in text.splitlines(keepends=True):
        start, pos = pos, pos + len(line)
        if m := _SCRIPT_LINE.match(line.rstrip("\n")):
            fields = {"range": m.group(1), "script": m.group(2), "category": m.group(3)}
            if m.group(4):
                fields["count"] = m.group(4)
            records.append(Record(m.group(5), fields, start, pos))
    return records


def head_scripts(text: str) -> int:
    i = text.find("\n# ================================================\n\n0")
    return i + len("\n# ================================================\n\n") if i >= 0 else 0


FORMATS = [
    Format(name="emoji-test", split="heldout", source="Debian: unicode-data (emoji/emoji-test.txt)",
           text="the emoji test file (emoji-test.txt)", thing="emoji", things="emoji",
           fields=(Field("code", "the code points"), Field("status", "the status", count=True),
                   Field("version", "the emoji version (E...)", count=True), Field("group", "the group")),
           files=lambda: _present(_EMOJI), parse=answerable(parse_emoji), holder="subgroup", held="emoji", head=head_emoji),
    Format(name="unicode-scripts", split="dev", source="Debian: unicode-data (Scripts.txt)",
           text="the Unicode Scripts.txt file", thing="entry", things="entries",
           fields=(Field("range", "the code point range"), Field("script", "the script", count=True),
                   Field("category", "the general category", count=True),
                   Field("count", "the number of code points (in brackets)")),
           files=lambda: _present(_SCRIPTS), parse=answerable(parse_scripts), head=head_scripts),
]
