"""Text shapes: one registry of ways to write the same records as text, each with its parser.

A record is an ordered ``{field: value}`` dict whose first field is its key (the entity it
is about: ``{"host": "db-07", "status": "down", ...}``). A shape writes a list of records as
text (a header, if it has one, then one piece of text per record, so a generator can stop
adding records at a target length) and parses that text back into the same records. The
parsers exist for the tests (every gold answer is re-derived from the rendered text) and as a
reference of what each shape means; nothing in the runtime reads them.

Shapes: ``line`` (one record a line, ``field=value | ...``), ``block`` (``Field: value``
lines, a blank line between records), ``csv`` and ``tsv`` (a header row), ``jsonl`` (one
JSON object a line), ``markdown`` (a heading per record, a bullet per field), ``prose`` (a
paragraph per record, one sentence per fact). Field names are written with underscores
where a format would (``home_port``) and read back with spaces.

Values must not hold a line break, ``|``, a tab, or a full stop followed by a space: the
record generators (``records.py``) draw none.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Callable
from dataclasses import dataclass

Record = dict[str, str]


@dataclass(frozen=True)
class Shape:
    """A text shape: ``head(fields)`` and ``row(record)`` write it, ``parse(text)`` reads it back."""

    name: str
    description: str
    head: Callable[[list[str]], str]
    row: Callable[[Record], str]
    parse: Callable[[str], list[Record]]

    def render(self, records: list[Record]) -> str:
        """The whole text of ``records`` (all with the same fields, in the same order)."""
        if not records:
            return ""
        return self.head(list(records[0])) + "".join(self.row(r) for r in records)


def field_name(name: str) -> str:
    """A field name as read back from any shape: lower case, spaces for underscores."""
    return name.strip().lower().replace("_", " ")


def _snake(name: str) -> str:
    return name.replace(" ", "_")


def _no_head(fields: list[str]) -> str:
    return ""


# line: "host=db-07 | status=down | failover=db-12"

def _line_row(r: Record) -> str:
    return " | ".join(f"{_snake(k)}={v}" for k, v in r.items()) + "\n"


def _line_parse(text: str) -> list[Record]:
    out = []
    for line in text.splitlines():
        if line.strip():
            out.append({field_name(k): v for k, v in (part.split("=", 1) for part in line.split(" | "))})
    return out


# block: "Host: db-07\nStatus: down\n\n"

def _block_row(r: Record) -> str:
    return "".join(f"{k[0].upper() + k[1:]}: {v}\n" for k, v in r.items()) + "\n"


def _block_parse(text: str) -> list[Record]:
    out = []
    for block in re.split(r"\n\s*\n", text):
        lines = [x for x in block.splitlines() if x.strip()]
        if lines:
            out.append({field_name(k): v for k, v in (x.split(": ", 1) for x in lines)})
    return out


# csv / tsv: a header row, then one row a record

def _table(delimiter: str) -> tuple[Callable[[list[str]], str], Callable[[Record], str], Callable[[str], list[Record]]]:
    def write(values: list[str]) -> str:
        buf = io.StringIO()
        csv.writer(buf, delimiter=delimiter, lineterminator="\n").writerow(values)
        return buf.getvalue()

    def parse(text: str) -> list[Record]:
        rows = list(csv.reader(io.StringIO(text), delimiter=delimiter))
        header = [field_name(h) for h in rows[0]]
        return [dict(zip(header, row, strict=True)) for row in rows[1:] if row]

    return (lambda fields: write([_snake(f) for f in fields])), (lambda r: write(list(r.values()))), parse


# jsonl: {"host": "db-07", "status": "down"}

def _jsonl_row(r: Record) -> str:
    return json.dumps({_snake(k): v for k, v in r.items()}, ensure_ascii=False) + "\n"


def _jsonl_parse(text: str) -> list[Record]:
    return [{field_name(k): str(v) for k, v in json.loads(line).items()} for line in text.splitlines() if line.strip()]


# markdown: "## host: db-07\n\n- status: down\n\n"

def _markdown_row(r: Record) -> str:
    (key_field, key), *rest = r.items()
    return f"## {key_field}: {key}\n\n" + "".join(f"- {k}: {v}\n" for k, v in rest) + "\n"


def _markdown_parse(text: str) -> list[Record]:
    out: list[Record] = []
    for line in text.splitlines():
        if m := re.fullmatch(r"#+ (.+?): (.+)", line):
            out.append({field_name(m[1]): m[2]})
        elif m := re.fullmatch(r"- (.+?): (.+)", line):
            out[-1][field_name(m[1])] = m[2]
    return out


# prose: "There is a host called db-07. The status of db-07 is down. ...\n\n"

def _prose_row(r: Record) -> str:
    (key_field, key), *rest = r.items()
    article = "an" if key_field[0] in "aeiou" else "a"
    sentences = [f"There is {article} {key_field} called {key}."]
    sentences += [f"The {k} of {key} is {v}." for k, v in rest]
    return " ".join(sentences) + "\n\n"


def _prose_parse(text: str) -> list[Record]:
    out: list[Record] = []
    for paragraph in re.split(r"\n\s*\n", text):
        for sentence in re.split(r"\.(?:\s+|$)", paragraph.strip()):
            if m := re.fullmatch(r"There is an? (.+?) called (.+)", sentence):
                out.append({field_name(m[1]): m[2]})
            elif m := re.fullmatch(r"The (.+?) of (.+?) is (.+)", sentence):
                out[-1][field_name(m[1])] = m[3]
    return out


_csv, _tsv = _table(","), _table("\t")

SHAPES: dict[str, Shape] = {s.name: s for s in (
    Shape("line", "one record a line, field=value pairs between ' | '", _no_head, _line_row, _line_parse),
    Shape("block", "Field: value lines, a blank line between records", _no_head, _block_row, _block_parse),
    Shape("csv", "comma-separated values with a header row", *_csv),
    Shape("tsv", "tab-separated values with a header row", *_tsv),
    Shape("jsonl", "one JSON object a line", _no_head, _jsonl_row, _jsonl_parse),
    Shape("markdown", "a '## field: key' heading per record, a '- field: value' bullet per field", _no_head,
          _markdown_row, _markdown_parse),
    Shape("prose", "a paragraph per record, one sentence per fact", _no_head, _prose_row, _prose_parse),
)}
