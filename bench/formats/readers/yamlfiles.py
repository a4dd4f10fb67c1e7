"""RuboCop's default configuration (Debian: rubocop,
``/usr/share/rubygems-integration/all/gems/rubocop-*/config/default.yml``).

One YAML mapping: ``AllCops:`` (global settings), then one key a cop,
``Layout/ArgumentAlignment:``, whose indented mapping holds ``Description:`` (plain, quoted or
a folded ``>-`` block over several lines), ``StyleGuide:``, ``Enabled: true|false|pending``,
``VersionAdded: '0.68'``, ``VersionChanged:``, ``Safe:``, ``EnforcedStyle:`` with its
``SupportedStyles:`` list, and comments. Banner comments
``#################### Layout ####...`` open each department's cops.

* ``rubocop-config``: cops, named by their key. No setting names another cop, and a cop's
  department is its name's prefix, so no multi-hop question is asked.
"""

from __future__ import annotations

import re
from pathlib import Path

from model import Field, Format, Record

_KEY = re.compile(r"^([A-Za-z][\w/]*):\s*$")
_SETTING = re.compile(r"^  (\w+):\s*(.*?)\s*$")
_KEYS = {"Description": "description", "StyleGuide": "style", "Enabled": "enabled", "VersionAdded": "added",
         "VersionChanged": "changed", "Safe": "safe", "EnforcedStyle": "style_default"}


def _files() -> list[Path]:
    found = sorted(Path("/usr/share/rubygems-integration/all/gems").glob("rubocop-[0-9]*/config/default.yml"))
    return found[-1:]


def _scalar(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def parse(text: str) -> list[Record]:
    records: list[Record] = []
    cop: Record | None = None
    folding: str | None = None  # the key whose folded block goes on
    pos = 0
    for line in text.splitlines(keepends=True):
        start, pos = pos, pos + len(line)
        body = line.rstrip("\n")
        key = _KEY.match(body)
        if key:
            cop = Record(key.group(1), {}, start, pos)
            records.append(cop)
            folding = None
            continue
        if cop is None or not body.startswith(" ") or not body.strip():
            continue
        cop.end = pos
        setting = _SETTING.match(body)
        if setting:
            folding = None
            name = _KEYS.get(setting.group(1))
            if name and setting.group(2) in (">-", ">", "|", "|-"):
                folding, cop.fields[name] = name, ""
            elif name:
                cop.fields[name] = _scalar(setting.group(2))
        elif folding and body.startswith("    ") and not body.lstrip().startswith("#"):
            cop.fields[folding] = (cop.fields[folding] + " " + body.strip()).strip()
    return records


FORMATS = [
    Format(name="rubocop-config", split="heldout", source="Debian: rubocop (config/default.yml)",
           text="RuboCop's default configuration YAML", thing="cop", things="cops",
           fields=(Field("description", "the description"), Field("enabled", "the Enabled setting", count=True),
                   Field("added", "the VersionAdded setting", count=True),
                   Field("changed", "the VersionChanged setting", count=True),
                   Field("style", "the StyleGuide setting"), Field("safe", "the Safe setting", count=True),
                   Field("style_default", "the EnforcedStyle setting")),
           files=_files, parse=parse),
]
