"""Debian package changelogs (``/usr/share/doc/*/changelog.Debian.gz``, one per installed package).

Each file is one source package's history, newest first. An entry is a header line
``gzip (1.12-1) unstable; urgency=high``, indented change items (``  * ...``, sub-items
``    - ...``), and a trailer `` -- Name <email>  Sat, 09 Apr 2022 22:22:26 -0400``. The
files are concatenated in path order, one per source package (binary packages of one source
ship the same file); the entries of a file nest under its package.

* ``debian-changelog``: entries (named by their version) held by packages.
"""

from __future__ import annotations

import gzip
import re
from pathlib import Path

from model import Field, Format, Record

_HEADER = re.compile(r"^(\S+) \(([^()\s]+)\) ([^;]+);\s*(.*)$")
_TRAILER = re.compile(r"^ -- (.*?) <([^>]*)>\s+(\S.*?)\s*$")
_URGENCY = re.compile(r"urgency=(\w+)", re.I)


def _files() -> list[Path]:
    """One changelog per source package: the first in path order (others repeat it)."""
    seen: set[str] = set()
    paths = []
    for path in sorted(Path("/usr/share/doc").glob("*/changelog.Debian.gz")):
        if path.is_symlink() or not path.is_file():
            continue
        try:
            first = gzip.decompress(path.read_bytes()).split(b"\n", 1)[0].decode("utf-8", "replace")
        except (OSError, EOFError):
            continue
        m = _HEADER.match(first)
        if m and m.group(1) not in seen:
            seen.add(m.group(1))
            paths.append(path)
    return paths


def parse(text: str) -> list[Record]:
    records: list[Record] = []
    package: Record | None = None
    entry: Record | None = None
    pos = 0
    for line in text.splitlines(keepends=True):
        start, pos = pos, pos + len(line)
        body = line.rstrip("\n")
        m = _HEADER.match(body)
        if m:
            name = m.group(1)
            if package is None or package.name != name:
                package = Record(name, {}, start, pos)
                records.append(package)
            urgency = _URGENCY.search(m.group(4))
            entry = Record(m.group(2), {"distribution": m.group(3).strip(),
                                        "urgency": urgency.group(1) if urgency else ""},
                           start, pos, parent=name)
            continue
        t = _TRAILER.match(body)
        if t and entry is not None and package is not None:
            entry.fields.update(maintainer=t.group(1).strip(), email=t.group(2), date=t.group(3))
            entry.end = package.end = pos
            records.append(entry)
            entry = None
    return records


FORMATS = [
    Format(name="debian-changelog", split="dev", source="Debian: every installed package's changelog.Debian.gz",
           text="the Debian package changelogs", thing="changelog entry", things="changelog entries",
           fields=(Field("distribution", "the target distribution", count=True),
                   Field("urgency", "the urgency", count=True),
                   Field("maintainer", "the name in the sign-off line", count=True),
                   Field("email", "the e-mail address in the sign-off line"),
                   Field("date", "the date in the sign-off line")),
           files=_files, parse=parse, holder="package", held="changelog entries"),
]
