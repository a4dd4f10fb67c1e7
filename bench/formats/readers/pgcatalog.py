"""PostgreSQL's bootstrap catalog data (Debian: postgresql-15).

``postgres-bki``: ``/usr/share/postgresql/<version>/postgres.bki``, the BKI script
``initdb`` runs to create the system catalogs. A table is declared by ``create pg_type 1247
[bootstrap] [rowtype_oid 71]`` (its name and OID) and a parenthesized list of its columns,
one a line (`` typlen = int2 ,``); ``open pg_type`` (for all but the first tables), then
its rows as ``insert ( 23 int4 11 10 4 t b N ... )``: the values in the order of the
columns, unlabelled, separated by spaces (``'...'`` quotes a value with spaces or symbols,
``_null_`` is null, ``-`` an empty procedure); ``close pg_type`` ends it. OIDs tie rows
together: a function's ``prorettype`` or an operator's ``oprresult`` is the ``oid`` of a
``pg_type`` row. ``declare index`` lines and ``build indices`` end the file.

Records here: a table (from ``create`` to ``close``, no field asked: a question's words
call every record a row) holding its rows; a row named by its first column of type
``name`` (``proname``, ``typname``, ``oprname``...), a ``pg_description`` row by its
``description`` (rows of other tables without a name, like ``pg_amop``, are held but not
named); its fields the values of a few columns, read through the column list of its table.
"""

from __future__ import annotations

import re
from pathlib import Path

from model import Field, Format, Record

from readers._answers import answerable

_VALUE = re.compile(r"'(?:[^']|'')*'|\S+")
_COLUMNS = ("oid", "pronargs", "prorettype", "provolatile", "prokind", "prolang", "prosrc", "typlen", "typtype",
            "typcategory", "typelem", "typarray", "typalign", "oprkind", "oprleft", "oprright", "oprresult", "oprcode", "objoid", "classoid")
_CATEGORICAL = ("provolatile", "prokind", "prolang", "typtype", "typcategory", "typalign", "oprkind", "classoid")


def _files() -> list[Path]:
    found = sorted(Path("/usr/share/postgresql").glob("*/postgres.bki"))
    return found[-1:]


def parse(text: str) -> list[Record]:
    records: list[Record] = []
    table: Record | None = None
    columns: list[tuple[str, str]] = []  # (column, type) of the table being read
    pos = 0
    for line in text.splitlines(keepends=True):
        start, pos = pos, pos + len(line)
        words = line.split()
        if not words:
            continue
        if words[0] == "create" and len(words) >= 3:
            table = Record(words[1], {"table_oid": words[2]}, start, pos)
            records.append(table)
            columns = []
        elif table is None:
            continue
        elif len(words) >= 3 and words[1] == "=" and words[0] != "insert":
            columns.append((words[0], words[2]))
        elif words[0] == "insert" and words[1] == "(" and words[-1] == ")":
            values = _VALUE.findall(line.strip()[len("insert ("):-1])
            if len(values) != len(columns):
                raise ValueError(f"{table.name}: {len(values)} values for {len(columns)} columns: {line!r}")
            row = dict(zip((c for c, _ in columns), values, strict=True))
            name = next((v for (c, t), v in zip(columns, values, strict=True) if t == "name"), row.get("description", ""))
            fields = {c: v for c, v in row.items() if c in _COLUMNS}
            result = row.get("prorettype") or row.get("oprresult")
            if result and result != "0":
                fields["result"] = result
            records.append(Record(name.strip("'"), fields, start, pos, parent=table.name))
            table.end = pos
        elif words[0] == "close":
            table.end = pos
            table = None
    return records


FORMATS = [
    Format(name="postgres-bki", split="heldout", source="Debian: postgresql-15 (/usr/share/postgresql/15/postgres.bki)",
           text="the PostgreSQL bootstrap catalog script (postgres.bki)", thing="row", things="rows",
           fields=tuple(Field(c, f"the {c} column value", count=c in _CATEGORICAL) for c in _COLUMNS),
           files=_files, parse=answerable(parse), link=Field("result", "the result type (prorettype or oprresult)"), link_key="oid",
           holder="table", held="rows"),
]
