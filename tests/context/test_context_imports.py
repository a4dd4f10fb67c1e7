"""The context modules form a graph, not a circle: each imports first, in a fresh interpreter, in any order."""

from __future__ import annotations

import ast
import itertools
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import rlm_runtime

PACKAGE = Path(rlm_runtime.__file__).parent
CONTEXT = PACKAGE / "context"
# The modules that used to import one another inside functions.
FORMER_CIRCLE = ("rlm_runtime.context.probe", "rlm_runtime.context.handles", "rlm_runtime.context.corpus")
# Who may import whom, at the top of a module (protocol <- probe <- handles <- corpus <- brief).
ALLOWED = {
    "beneath": set(),
    "buffer": set(),
    "about": set(),
    "templates": set(),
    "structure": {"templates"},
    "forms": {"structure"},
    "nested": set(),
    "records": {"about", "forms", "nested", "structure"},
    "hops": {"about", "records"},
    "grep": {"buffer"},
    "tokens": {"buffer"},
    "protocol": {"grep", "tokens"},
    "relevance": {"buffer"},
    "settings": {"protocol"},
    "plan": set(),
    "probe": {"about", "grep", "buffer", "plan", "protocol", "records", "relevance", "settings", "tokens"},
    "handles": {"grep", "tokens", "buffer", "probe", "protocol", "records", "settings"},
    "corpus": {"about", "beneath", "grep", "tokens", "buffer", "handles", "probe", "protocol", "records", "settings"},
    "sources": {"corpus", "handles", "probe", "protocol", "settings"},
    "brief": {"about", "corpus", "probe", "protocol", "records", "relevance", "settings"},
    "living": {"beneath", "corpus", "handles"},
}

# Stub the parent packages so that importing a submodule does not run rlm_runtime/__init__.py
# (which imports everything in its own order, and would hide a circle).
_STUBS = """
import importlib, sys, types
for name, path in {names!r}:
    module = types.ModuleType(name)
    module.__path__ = [path]
    sys.modules[name] = module
for name in {order!r}:
    importlib.import_module(name)
"""


def _import_in_order(order: tuple[str, ...]) -> subprocess.CompletedProcess[str]:
    names = [("rlm_runtime", str(PACKAGE)), ("rlm_runtime.context", str(CONTEXT)), ("rlm_runtime.sandbox", str(PACKAGE / "sandbox"))]
    code = _STUBS.format(names=names, order=list(order))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def _module_names() -> list[str]:
    return sorted(f"rlm_runtime.context.{p.stem}" for p in CONTEXT.glob("*.py") if p.stem != "__init__")


def test_every_order_of_the_former_circle_imports() -> None:
    """It imports probe, handles and corpus in each of the 6 orders, and every context module first, each in a fresh interpreter."""
    orders = list(itertools.permutations(FORMER_CIRCLE))
    orders += [(name,) for name in _module_names()]
    orders += [("rlm_runtime.sandbox.contexts",), ("rlm_runtime.context",)]
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(_import_in_order, orders))
    failed = [(order, r.stderr[-600:]) for order, r in zip(orders, results, strict=True) if r.returncode != 0]
    assert not failed, failed


def _imports(path: Path) -> tuple[set[str], list[str]]:
    """(context modules imported at the top, context modules imported inside a function or class)."""
    tree = ast.parse(path.read_text())
    top: set[str] = set()
    nested: list[str] = []

    def names(node: ast.Import | ast.ImportFrom) -> list[str]:
        if isinstance(node, ast.ImportFrom):
            if node.module == "rlm_runtime.context":
                return [a.name for a in node.names]
            return [node.module.rsplit(".", 1)[1]] if node.module and node.module.startswith("rlm_runtime.context.") else []
        return [a.name.rsplit(".", 1)[1] for a in node.names if a.name.startswith("rlm_runtime.context.")]

    for stmt in tree.body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            top.update(names(stmt))
        elif isinstance(stmt, ast.If) and "TYPE_CHECKING" in ast.unparse(stmt.test):
            continue  # annotations only: never run
        for node in ast.walk(stmt) if not isinstance(stmt, (ast.Import, ast.ImportFrom)) else ():
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                nested.extend(names(node))
    return top, nested


@pytest.mark.parametrize("stem", sorted(ALLOWED))
def test_module_imports_follow_the_graph(stem: str) -> None:
    """It imports only modules below it in the graph, and none inside a function."""
    top, nested = _imports(CONTEXT / f"{stem}.py")
    assert top <= ALLOWED[stem], top - ALLOWED[stem]
    assert nested == [], f"{stem}.py imports {nested} inside a function"


def test_graph_lists_every_module() -> None:
    """It knows every module of the context package, so a new one is placed in the graph."""
    assert sorted(ALLOWED) == sorted(n.rsplit(".", 1)[1] for n in _module_names())
