"""The time zone database in zic's compact input form (Debian: tzdata).

``tzdata-zi``: ``/usr/share/zoneinfo/tzdata.zi``, the whole tz database as ``zishrink``
writes it for ``zic``: a few ``#`` lines, then daylight-saving rules, zones and links, one
a line, each marked by its first letter and its words abbreviated (``o`` only, ``ma``
max, ``Su>=1``, month names cut to one to three letters):

* ``R NAME FROM TO - IN ON AT SAVE LETTER``: a rule of the rule set NAME (its names are
  abbreviated too: ``u``, ``NY``, ``E``); the rules of a set mostly follow one another,
  though two sets may interleave;
* ``Z NAME STDOFF RULES FORMAT [UNTIL]``: a zone, then continuation lines ``STDOFF RULES
  FORMAT [UNTIL]`` without the ``Z``, one for each period; the last one, with no UNTIL,
  holds today. Its RULES names a rule set (or is ``-`` or a fixed amount);
* ``L TARGET ALIAS``: another name for a zone.

Records here: a run of consecutive rules of one set (a ``rule set``, holding its rules, which
have no name), a zone (its first offset, its current offset, rules and format from its last
line: the current rules name a rule set) and a link.
"""

from __future__ import annotations

from pathlib import Path

from model import Field, Format, Record

from readers._answers import answerable

_PATH = Path("/usr/share/zoneinfo/tzdata.zi")


def parse(text: str) -> list[Record]:
    records: list[Record] = []
    rule_set: Record | None = None
    zone: Record | None = None
    pos = 0
    for line in text.splitlines(keepends=True):
        start, pos = pos, pos + len(line)
        words = line.split()
        if not words or words[0].startswith("#"):
            rule_set = zone = None
            continue
        if words[0] == "R" and len(words) >= 10:
            zone = None
            if rule_set is None or rule_set.name != words[1]:
                rule_set = Record(words[1], {"first_year": words[2]}, start, pos)
                records.append(rule_set)
            rule_set.end = pos
            records.append(Record("", {}, start, pos, parent=rule_set.name))
        elif words[0] == "Z" and len(words) >= 5:
            rule_set = None
            zone = Record(words[1], {"first_offset": words[2]}, start, pos)
            zone.fields.update(_period(words[2:]))
            records.append(zone)
        elif words[0] == "L" and len(words) == 3:
            rule_set = zone = None
            records.append(Record(words[2], {"target": words[1]}, start, pos))
        elif zone is not None and len(words) >= 3:
            zone.fields.update(_period(words))
            zone.end = pos
        else:
            rule_set = zone = None
    return records


def _period(words: list[str]) -> dict[str, str]:
    return {"offset": words[0], "rules": words[1], "format": words[2]}


FORMATS = [
    Format(name="tzdata-zi", split="dev", source="Debian: tzdata (zoneinfo/tzdata.zi)",
           text="the compact time zone source (tzdata.zi)", thing="entry", things="entries",
           fields=(Field("offset", "the current standard offset (STDOFF of its last line)"),
                   Field("first_offset", "the first standard offset (STDOFF of its first line)"),
                   Field("rules", "the current rules (RULES of its last line)", count=True),
                   Field("format", "the current format (FORMAT of its last line)", count=True),
                   Field("target", "the target zone"),
                   Field("first_year", "the first year (FROM of its first rule)")),
           files=lambda: [_PATH] if _PATH.is_file() else [], parse=answerable(parse),
           link=Field("rules", "the current rules (RULES of its last line)"), holder="rule set", held="rules"),
]
