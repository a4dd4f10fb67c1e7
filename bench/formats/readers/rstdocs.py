"""The Python Library Reference's reStructuredText sources (Debian: python3.N-doc,
``/usr/share/doc/python3.N/html/_sources/library/*.rst.txt``), concatenated in path order.

Sphinx markup: section titles underlined (``=====``), ``.. module:: shutil`` and
``.. currentmodule::`` setting the module, and object directives
``.. function:: copyfile(src, dst, *, follow_symlinks=True)`` (also ``class``, ``method``,
``attribute``, ``data``, ``exception``, ``decorator``, ...) whose body is indented under
them: prose with roles (``:func:`copy```), ``.. versionadded:: 3.8`` and, under a class,
its own indented ``.. method::`` directives (a function's body may hold some too).

* ``python-docs-rst``: object directives (API entries), named by their name as written
  (``Path.cwd``); an entry holds the entries indented in its body.
"""

from __future__ import annotations

import re
from pathlib import Path

from model import Field, Format, Record

_KINDS = ("function", "class", "method", "attribute", "data", "exception", "decorator", "classmethod",
          "staticmethod", "coroutinefunction", "coroutinemethod", "decoratormethod", "abstractmethod")
_DIRECTIVE = re.compile(r"^( *)\.\. (" + "|".join(_KINDS) + r")::\s*(\S.*)$")
_MODULE = re.compile(r"^\s*\.\. (?:module|currentmodule|py:module|py:currentmodule)::\s*(\S+)")
_ADDED = re.compile(r"^ *\.\. versionadded::\s*(\S+)")


def _files() -> list[Path]:
    dirs = [d for d in Path("/usr/share/doc").glob("python3.*") if re.fullmatch(r"python3\.\d+", d.name)
            and (d / "html/_sources/library").is_dir()]
    if not dirs:
        return []
    newest = max(dirs, key=lambda d: int(d.name.split(".")[1]))
    return sorted(p for p in (newest / "html/_sources/library").glob("*.rst.txt") if p.is_file())


def parse(text: str) -> list[Record]:
    records: list[Record] = []
    open_: list[tuple[int, Record]] = []  # the directives whose body goes on: (indent, record)
    module = ""
    pos = 0
    for line in text.splitlines(keepends=True):
        start, pos = pos, pos + len(line)
        body = line.rstrip("\n")
        if not body.strip():
            continue
        indent = len(body) - len(body.lstrip(" "))
        while open_ and indent <= open_[-1][0]:
            open_.pop()
        for _, rec in open_:
            rec.end = pos
        added = _ADDED.match(body)
        if added and open_ and "added" not in open_[-1][1].fields:
            open_[-1][1].fields["added"] = added.group(1)
            continue
        m = _MODULE.match(body)
        if m:
            module = m.group(1)
            continue
        d = _DIRECTIVE.match(body)
        if d:
            signature = d.group(3).strip()
            name, paren, rest = signature.partition("(")
            parent = open_[-1][1] if open_ else None
            rec = Record(name.strip(), {"kind": d.group(2), "module": module,
                                        "signature": paren + rest if paren else ""},
                         start, pos, parent=parent.name if parent is not None else None)
            records.append(rec)
            open_.append((indent, rec))
    return records


FORMATS = [
    Format(name="python-docs-rst", split="heldout", source="Debian: python3.N-doc (library reference reST sources)",
           text="the Python library reference sources", thing="API entry", things="API entries",
           fields=(Field("signature", "the signature"), Field("module", "the current module", count=True),
                   Field("added", "the versionadded version", count=True)),
           files=_files, parse=parse, holder="API entry", held="nested API entries"),
]
