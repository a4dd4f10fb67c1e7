"""Code QA over real source: the Python standard library's own modules.

The context is a folder of real stdlib files (the module asked about plus others, to the
length asked for), kept at their relative paths. Questions come from the module's AST, so
the answer is in the source:

* constant: "what value is the constant NAME of module M set to?" (a module-level
  ``NAME = <int or str>`` assigned once);
* raise: "which function in module M raises E with the message '...'?" (a ``raise E("...")``
  whose exception and message occur once in the module);
* default: "what is the default value of parameter P of function F in module M?".
"""

from __future__ import annotations

import ast
import random
from dataclasses import dataclass

from rlm_runtime.eval.suites import text
from rlm_runtime.eval.suites.base import Generated, Suite, pick

CONSTANT_QUESTIONS = (
    "In the module {mod}, what value is the constant {name} set to?",
    "What is the value of {name}, defined at the top level of {mod}?",
    "Module {mod} defines a constant {name}. What does it equal?",
)
RAISE_QUESTIONS = (
    'Which function in the module {mod} raises {exc} with the message "{msg}"?',
    'In {mod}, what is the name of the function that raises {exc}("{msg}")?',
    'The error {exc}: {msg} comes from a function of {mod}. Which function?',
)
DEFAULT_QUESTIONS = (
    "In the module {mod}, what is the default value of the parameter {param} of {func}?",
    "What does the parameter {param} of {func} (module {mod}) default to?",
)


@dataclass(frozen=True)
class Fact:
    kind: str  # constant | raise | default
    values: dict[str, str]
    answers: tuple[str, ...]
    scorer: str


def module_name(rel: str) -> str:
    name = rel.removesuffix(".py").replace("/", ".")
    return name.removesuffix(".__init__")


def facts(source: str) -> list[Fact]:
    """The questions one module's source can answer."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    out: list[Fact] = []
    assigned: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    assigned[t.id] = assigned.get(t.id, 0) + 1
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            value = node.value
            if not (name.isupper() and len(name) >= 3 and assigned.get(name) == 1 and isinstance(value, ast.Constant)):
                continue
            v = value.value
            if isinstance(v, int) and not isinstance(v, bool):
                out.append(Fact("constant", {"name": name}, (str(v),), "numeric"))
            elif isinstance(v, str) and 3 <= len(v) <= 40 and v.isprintable() and v.strip() == v and v.strip():
                out.append(Fact("constant", {"name": name}, (v,), "contains"))
    raises: dict[tuple[str, str], list[str]] = {}
    defaults: list[Fact] = []
    qualnames: dict[str, int] = {}
    for func, qual in _functions(tree):
        qualnames[qual] = qualnames.get(qual, 0) + 1
        for node in _own_nodes(func):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and isinstance(node.exc.func, ast.Name) \
                    and node.exc.args and isinstance(node.exc.args[0], ast.Constant) and isinstance(node.exc.args[0].value, str):
                msg = node.exc.args[0].value
                if 12 <= len(msg) <= 80 and msg.isprintable() and "{" not in msg and "%" not in msg:
                    raises.setdefault((node.exc.func.id, msg), []).append(qual)
        args = func.args
        positional = args.posonlyargs + args.args
        for arg, default in zip(positional[len(positional) - len(args.defaults):], args.defaults, strict=True):
            if isinstance(default, ast.Constant) and not isinstance(default.value, bytes) and arg.arg not in ("self", "cls"):
                shown = repr(default.value)
                if len(shown) <= 30:
                    accepted = (shown, str(default.value)) if isinstance(default.value, str) and default.value else (shown,)
                    defaults.append(Fact("default", {"param": arg.arg, "func": qual}, accepted, "contains"))
    for (exc, msg), where in raises.items():
        if len(where) == 1:
            qual = where[0]
            short = qual.rsplit(".", 1)[-1]
            out.append(Fact("raise", {"exc": exc, "msg": msg}, tuple(dict.fromkeys((short, qual))), "contains"))
    out += [f for f in defaults if qualnames.get(f.values["func"]) == 1]
    return out


def _functions(tree: ast.Module) -> list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, str]]:
    out: list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, str]] = []

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.append((node, prefix + node.name))
            elif isinstance(node, ast.ClassDef):
                visit(node.body, prefix + node.name + ".")

    visit(tree.body, "")
    return out


def _own_nodes(func: ast.AST) -> list[ast.AST]:
    """The nodes of ``func``'s body, not those of functions or classes nested in it."""
    out: list[ast.AST] = []
    stack = list(ast.iter_child_nodes(func))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        out.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return out


def _read(path: object) -> str:
    from pathlib import Path

    try:
        return Path(str(path)).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ""


def generate(rng: random.Random, length: int) -> Generated:
    root = text.stdlib_dir()
    files = list(text.stdlib_files())
    sizes = {p: p.stat().st_size for p in files}
    candidates = [p for p in files if 400 <= sizes[p] <= max(2000, int(length * 0.8))]
    for _ in range(200):
        target = rng.choice(candidates)
        source = _read(target)
        found = facts(source)
        if found:
            break
    else:  # pragma: no cover - the stdlib always has one
        raise RuntimeError("no stdlib module with a question found")
    kinds = sorted({f.kind for f in found})
    kind = rng.choice(kinds)
    fact = rng.choice([f for f in found if f.kind == kind])
    rel = target.relative_to(root).as_posix()
    mod = module_name(rel)
    folder = {rel: source}
    total = len(source)
    others = [p for p in files if p != target]
    rng.shuffle(others)
    for p in others:
        if total >= length * 0.95:
            break
        if total + sizes[p] <= length * 1.02:
            body = _read(p)
            if body:
                folder[p.relative_to(root).as_posix()] = body
                total += len(body)
    templates = {"constant": CONSTANT_QUESTIONS, "raise": RAISE_QUESTIONS, "default": DEFAULT_QUESTIONS}[kind]
    qi, q = pick(rng, templates)
    answer: str | list[str] = list(fact.answers) if len(fact.answers) > 1 else fact.answers[0]
    options = {"decay": 0.0} if fact.scorer == "numeric" else {}
    return Generated(q.format(mod=mod, **fact.values), answer, fact.scorer, folder, options=options,
                     metadata={"question": kind, "module": mod, "file": rel, "files": len(folder), "question_template": qi,
                               **fact.values})


SUITES = (
    Suite("codeqa", "codeqa", "questions about real stdlib modules (constants, raises, defaults) over a folder of source "
          "(numeric, contains)", text.CODE_SOURCE, generate),
)
