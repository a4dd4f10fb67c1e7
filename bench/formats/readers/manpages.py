"""Linux system call manual pages, groff sources (Debian: manpages-dev, ``/usr/share/man/man2/*.2.gz``).

Each page is troff source: a block of ``.\\"`` comments (copyright, history), then
``.TH open 2 2023-02-05 "Linux man-pages 6.03"``, sections ``.SH NAME``, ``.SH LIBRARY``,
``.SH SYNOPSIS`` (``.B #include <fcntl.h>``), ``.SH DESCRIPTION`` (tagged paragraphs
``.TP`` / ``.B O_CREAT``), ... and ``.SH SEE ALSO`` (``.BR chmod (2),`` one a line). Some
files are one line, ``.so man2/other.2`` (the page is elsewhere). The files are concatenated
in path order, a page whose text repeats an earlier one's left out.

* ``man-syscalls``: pages, named by their ``.TH`` title; the first page under SEE ALSO
  names another page.
"""

from __future__ import annotations

import gzip
import hashlib
import re
import shlex
from pathlib import Path

from model import Field, Format, Record

_SEE = re.compile(r'^\.BR?\s+"?([\w.+-]+)"?\s*\((\w+)\)')
_INCLUDE = re.compile(r"#include\s+(<[^>]+>)")


def _files() -> list[Path]:
    seen: set[bytes] = set()
    paths = []
    for path in sorted(Path("/usr/share/man/man2").glob("*.2.gz")):
        if path.is_symlink() or not path.is_file():
            continue
        digest = hashlib.sha256(gzip.decompress(path.read_bytes())).digest()
        if digest not in seen:
            seen.add(digest)
            paths.append(path)
    return paths


def _comment(line: str) -> bool:
    return line.startswith(('.\\"', "'\\\"", '\\"')) or line.strip() == "."


def _th(line: str) -> list[str]:
    try:
        return shlex.split(line[3:])
    except ValueError:
        return line[3:].split()


def parse(text: str) -> list[Record]:
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    th = [i for i, line in enumerate(lines) if line.startswith(".TH ")]
    records = []
    for k, i in enumerate(th):
        first = i
        while first > 0 and _comment(lines[first - 1]) and (k == 0 or first - 1 > th[k - 1]):
            first -= 1
        stop = th[k + 1] if k + 1 < len(th) else len(lines)
        while stop > i + 1 and k + 1 < len(th) and _comment(lines[stop - 1]):
            stop -= 1  # the next page's leading comments
        for j in range(i + 1, stop):
            if lines[j].startswith(".so "):
                stop = j  # a one-line file naming another page
                break
        while stop > i + 1 and not lines[stop - 1].strip():
            stop -= 1
        args = _th(lines[i].rstrip("\n"))
        if len(args) < 3:
            continue
        fields = {"date": args[2], "source": args[3] if len(args) > 3 else ""}
        section = ""
        for j in range(i + 1, stop):
            body = lines[j].rstrip("\n")
            if body.startswith(".SH"):
                section = body[3:].strip().strip('"')
                continue
            if section == "NAME" and "summary" not in fields and "\\-" in body:
                fields["summary"] = body.split("\\-", 1)[1].strip()
            elif section == "LIBRARY" and "library" not in fields and body and not body.startswith("."):
                fields["library"] = body.strip()
            elif section == "SYNOPSIS" and "header" not in fields and _INCLUDE.search(body):
                fields["header"] = _INCLUDE.search(body).group(1)  # type: ignore[union-attr]
            elif section == "SEE ALSO" and "see_also" not in fields and _SEE.match(body):
                fields["see_also"] = _SEE.match(body).group(1)  # type: ignore[union-attr]
        records.append(Record(args[0], fields, offsets[first], offsets[stop]))
    return records


FORMATS = [
    Format(name="man-syscalls", split="heldout", source="Debian: manpages-dev (man2 groff sources)",
           text="the Linux system call manual page sources", thing="manual page", things="manual pages",
           fields=(Field("date", "the date in the title line", count=True),
                   Field("summary", "the one-line description in the NAME section"),
                   Field("library", "the library named in the LIBRARY section", count=True),
                   Field("header", "the first header file included in the SYNOPSIS", count=True)),
           files=_files, parse=parse, link=Field("see_also", "the first page listed under SEE ALSO")),
]
