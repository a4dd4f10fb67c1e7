"""The core reads no text format: the loop, the prompts' assembly and the host-worker
protocol import nothing of the structure layer (records and the readers around it), and
the protocol names no assist's concept."""

from __future__ import annotations

import ast
from pathlib import Path

import rlm_runtime

PACKAGE = Path(rlm_runtime.__file__).parent
#: The structure layer: a text's records and what reads them.
STRUCTURE = {f"rlm_runtime.context.{m}" for m in ("records", "structure", "templates", "forms", "nested", "about", "hops")}
CORE = ("loop.py", "prompts.py", "sandbox/frames.py")


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports, at any depth of its code (``from a import b`` counts as
    ``a`` and ``a.b``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def test_the_core_imports_nothing_of_the_structure_layer() -> None:
    """It finds no import of records, structure, templates, forms, nested, about or hops in
    the loop, the prompts' assembly or the host-worker protocol."""
    for name in CORE:
        assert not _imports(PACKAGE / name) & STRUCTURE, name


def test_the_protocol_names_no_assist_concept() -> None:
    """It finds none of the old lookup kinds ("hop", "chain", "read") as a string in the
    host-worker protocol: the worker answers one generic lookup frame."""
    tree = ast.parse((PACKAGE / "sandbox" / "frames.py").read_text(encoding="utf-8"))
    strings = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    assert not strings & {"hop", "chain", "read"}
