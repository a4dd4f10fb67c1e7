"""Python source: the standard library's top-level modules (Debian: libpython3.N-stdlib,
``/usr/lib/python3.N/*.py``), concatenated in path order.

Modules of classes and functions (``def``, ``async def``, decorators ``@property`` on the
lines before), methods indented in their class, docstrings as the first statement of a
body, base classes in ``class Name(Base):``. The reader is Python's own parser (``ast``);
the concatenation parses as one module.

* ``python-stdlib``: top-level classes and functions and the methods of top-level classes,
  named by their name; a class holds its methods; a class's first base class names another
  class.
"""

from __future__ import annotations

import ast
import re
import warnings
from pathlib import Path

from model import Field, Format, Record


def _files() -> list[Path]:
    dirs = [d for d in Path("/usr/lib").glob("python3.*") if re.fullmatch(r"python3\.\d+", d.name)
            and (d / "os.py").is_file()]
    if not dirs:
        return []
    newest = max(dirs, key=lambda d: int(d.name.split(".")[1]))
    return sorted(p for p in newest.glob("*.py") if p.is_file())


def _record(node: ast.AST, starts: list[int], parent: str | None) -> Record:
    assert isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
    first = min([node.lineno] + [d.lineno for d in node.decorator_list])
    doc = ast.get_docstring(node) or ""
    fields = {"docstring": doc.strip().splitlines()[0].strip() if doc.strip() else "",
              "decorator": ast.unparse(node.decorator_list[0]) if node.decorator_list else ""}
    if isinstance(node, ast.ClassDef) and node.bases:
        fields["base"] = ast.unparse(node.bases[0])
    return Record(node.name, fields, starts[first - 1], starts[node.end_lineno or node.lineno], parent)


def parse(text: str) -> list[Record]:
    starts = [0]
    for line in text.split("\n"):
        starts.append(starts[-1] + len(line) + 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tree = ast.parse(text)
    records = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            records.append(_record(node, starts, None))
        elif isinstance(node, ast.ClassDef):
            records.append(_record(node, starts, None))
            for child in node.body:
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    records.append(_record(child, starts, node.name))
    return records


FORMATS = [
    Format(name="python-stdlib", split="dev", source="Debian: libpython3.N-stdlib (/usr/lib/python3.N/*.py)",
           text="the Python standard library source", thing="definition", things="definitions",
           fields=(Field("docstring", "the first line of the docstring"),
                   Field("decorator", "the first decorator", count=True), Field("base", "the first base class")),
           files=_files, parse=parse, link=Field("base", "the first base class"), holder="class", held="methods"),
]
