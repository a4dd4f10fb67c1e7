"""GNU Info manuals, one after another (Debian: coreutils, diffutils, findutils, gettext, grep, gzip, sed, wget).

``gnu-info``: the manuals of coreutils, diffutils, findutils (``find.info-1``,
``find.info-2``), gettext, grep, gzip, sed and wget from ``/usr/share/info``, decompressed,
in that order (a fixed list: what else is installed there varies): the
manuals ``makeinfo`` produces from Texinfo. A file is a preamble, then nodes, each after a
line holding only the control character ``\\x1f`` and opening with a header line such as
``File: sed.info,  Node: Introduction,  Next: Invoking sed,  Prev: Top,  Up: Top``
(``Up: (dir)`` for the top node), then its text, often with a ``* Menu:`` of ``* Node
name::`` entries. A file ends with a ``Tag Table:`` of node offsets (``Node: Top\\x7f1201``);
a long manual is split into ``name.info-1``, ``name.info-2`` with an ``Indirect:`` table in
``name.info``. Index nodes carry ``\\x00\\x08[index\\x00\\x08]`` markers.

Records here: a node, named by its ``Node:``, from its header line to the line before the
next ``\\x1f``; its ``Up:`` names another node (multi-hop through it only when that name is
one node's in the whole text and in the same file: ``Top`` and ``Overview`` are in many).
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from model import Field, Format, Record

from readers._answers import answerable

_DIR = Path("/usr/share/info")
_PAIR = re.compile(r"(File|Node|Next|Prev|Up): (.*?)(?=,\s+(?:File|Node|Next|Prev|Up): |$)")


_MANUALS = ("coreutils.info.gz", "diffutils.info.gz", "find.info-1.gz", "find.info-2.gz", "gettext.info.gz",
            "grep.info.gz", "gzip.info.gz", "sed.info.gz", "wget.info.gz")


def _files() -> list[Path]:
    return [_DIR / name for name in _MANUALS if (_DIR / name).is_file()]


def parse(text: str) -> list[Record]:
    records: list[Record] = []
    current: Record | None = None
    after_mark = False
    pos = 0
    for line in text.splitlines(keepends=True):
        start, pos = pos, pos + len(line)
        if line.startswith("\x1f"):
            current, after_mark = None, True
            continue
        if after_mark and line.startswith("File: "):
            pairs = dict(_PAIR.findall(line.rstrip("\n")))
            if "Node" in pairs:
                current = Record(pairs.pop("Node"), {k.lower(): v for k, v in pairs.items()}, start, pos)
                records.append(current)
        elif current is not None:
            current.end = pos
        after_mark = False
    names = Counter(r.name for r in records)
    file_of = {r.name: r.fields.get("file") for r in records}
    for r in records:
        up = r.fields.get("up", "")
        if names[up] == 1 and file_of[up] == r.fields.get("file"):
            r.fields["up_link"] = up
    return records


FORMATS = [
    Format(name="gnu-info", split="heldout", source="Debian: coreutils, diffutils, findutils, gettext, grep, gzip, sed, wget (/usr/share/info)",
           text="the GNU Info manuals", thing="node", things="nodes",
           fields=(Field("file", "the file (File:)"), Field("next", "the next node (Next:)"),
                   Field("prev", "the previous node (Prev:)"), Field("up", "the up node (Up:)", count=True)),
           files=_files, parse=answerable(parse), link=Field("up_link", "the up node (Up:)")),
]
