"""Mozilla's Public Suffix List (Debian: publicsuffix).

``public-suffix``: ``/usr/share/publicsuffix/public_suffix_list.dat``, the domains under
which anyone may register names, one rule a line (``co.uk``, ``*.ck``, ``!www.ck``), in
two divisions (``// ===BEGIN ICANN DOMAINS===`` ... ``// ===END ICANN DOMAINS===``, then the
PRIVATE ones). Rules come in blocks separated by blank lines, each headed by ``//`` comments:
the first names the block and says where it comes from (``// ac : http://nic.ac/rules.htm``,
``// zone : 2013-11-14 Binky Moon, LLC`` for a generic top-level domain, with the date it
was added and its registry operator; ``// Adobe : https://www.adobe.com/`` for a private
one), often followed by ``// Submitted by NAME <EMAIL>`` (sometimes lower case); comments
inside a block annotate.

Records here: a section (a block with rules, named by the text before `` : `` in its first
heading comment that has one, else by its first comment) holding its rules, each named by the
rule as written (the rule that repeats the section's own name, ``ac`` in section ``ac``, is
held but not named, so that the name stays the section's).
"""

from __future__ import annotations

import re
from pathlib import Path

from model import Field, Format, Record

from readers._answers import answerable

_PATH = Path("/usr/share/publicsuffix/public_suffix_list.dat")
_DATED = re.compile(r"^(\d{4}-\d{2}-\d{2}) (.+)$")
_HEADING = re.compile(r"^([^:]+?)\s*:\s+(.*)$")
_TRAILING_URL = re.compile(r"^(.+?)\s+(https?://\S+)$")


def parse(text: str) -> list[Record]:
    records: list[Record] = []
    section: Record | None = None
    started = False  # no section before the first division begins
    block: list[tuple[int, str]] = []  # the comments heading the block so far: (start, text)
    pos = 0
    for line in text.splitlines(keepends=True):
        start, pos = pos, pos + len(line)
        body = line.strip()
        if not body or body.startswith("// ==="):
            started = started if not body else "BEGIN" in body
            block, section = [], None
        elif body.startswith("//"):
            if section is None:
                block.append((start, body[2:].strip()))
        elif started:
            if section is None and block:
                section = _section(block)
                records.append(section)
            # The rule that is the section's own name is held but not named (two records, one name).
            name = "" if section is not None and body == section.name else body
            records.append(Record(name, {}, start, pos, parent=section.name if section else None))
            if section is not None:
                section.end = pos
    return records


def _section(block: list[tuple[int, str]]) -> Record:
    """A section from the comments heading its block: named by the first ``NAME : ...``."""
    fields: dict[str, str] = {}
    name = ""
    for _, comment in block:
        if m := _HEADING.match(comment):
            name, rest = m.group(1), m.group(2)
            if m := _DATED.match(rest):
                fields.update(date=m.group(1), registry=m.group(2))
            elif rest.startswith("http") and " " not in rest:
                fields["url"] = rest
            break
    if not name:
        m = _TRAILING_URL.match(block[0][1])
        name, url = (m.group(1), m.group(2)) if m else (block[0][1], "")
        if url:
            fields["url"] = url
    for _, comment in block:
        if comment.lower().startswith("submitted by "):
            fields["submitter"] = comment[len("submitted by "):].split("<")[0].strip()
            break
    return Record(name, fields, block[0][0], block[-1][0])


FORMATS = [
    Format(name="public-suffix", split="dev", source="Debian: publicsuffix (public_suffix_list.dat)",
           text="the Public Suffix List", thing="entry", things="entries",
           fields=(Field("url", "the web address in the heading comment"), Field("submitter", "the submitter"),
                   Field("date", "the date in the heading comment"), Field("registry", "the registry operator", count=True)),
           files=lambda: [_PATH] if _PATH.is_file() else [], parse=answerable(parse), holder="section", held="rules"),
]
