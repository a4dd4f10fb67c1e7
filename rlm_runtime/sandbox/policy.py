"""Sandbox policies (TOML files) and the static check of a cell.

The check is defence in depth, not the boundary: the worker process and its OS limits are.
Checking returns data: a ``PolicyReport`` whose ``text()`` can be shown back to a model.

Policy file schema (every table and key optional; defaults are those of ``Policy``)::

    name = "default"
    description = "..."
    [imports]
    allow = ["re", "json", ...]          # exact module names user code may import
    unreviewed = ["csv"]                 # allowed too, though not in the reviewed surface
                                         # (sandbox/surface.py): every public attribute
    [attributes]
    deny = ["string.Formatter", ...]     # "module.attr" pairs user code may not reach
    [code]
    max_source_bytes = 65536             # checked before anything else
    max_nesting = 60                     # bracket / indentation depth, checked before parsing
    max_ast_nodes = 20000
    max_ast_depth = 100
    deny_constructs = ["ClassDef"]       # Python AST node class names refused outright
    [limits]                             # see rlm_runtime.sandbox.limits.CellLimits
    cell_timeout_s = 30
    memory_mb = 512
    output_chars = 20000
"""

from __future__ import annotations

import ast
import hashlib
import marshal
import os
import re
import tomllib
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from RestrictedPython.transformer import RestrictingNodeTransformer

from rlm_runtime.errors import ConfigError
from rlm_runtime.sandbox.guards import SHOW_NAME
from rlm_runtime.sandbox.limits import CellLimits
from rlm_runtime.sandbox.surface import is_reviewed, refusal

_DEPRECATED_NODES = {"Num", "Str", "Bytes", "NameConstant", "Ellipsis", "Index", "ExtSlice", "Suite", "AugLoad",
                     "AugStore", "Param"}
# Concrete node classes a parse can produce (abstract bases like stmt/expr never match).
_AST_NODE_NAMES = {n for n in dir(ast) if isinstance(getattr(ast, n), type) and issubclass(getattr(ast, n), ast.AST)
                   and not getattr(ast, n).__subclasses__() and n not in _DEPRECATED_NODES}


class CodeRules(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    max_source_bytes: int = Field(64 * 1024, ge=16)
    max_nesting: int = Field(60, ge=2, le=190)
    max_ast_nodes: int = Field(20_000, ge=10)
    max_ast_depth: int = Field(100, ge=5, le=900)
    deny_constructs: tuple[str, ...] = ()


class Policy(BaseModel):
    """A named set of rules: what code may do, and the limits it runs under."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = "custom"
    description: str = ""
    allowed_imports: tuple[str, ...] = ()
    #: Allowed modules with no entry in the reviewed surface (``surface.REVIEWED``): user
    #: code gets the real module and every public attribute. Each must also be allowed.
    unreviewed_imports: tuple[str, ...] = ()
    denied_attributes: tuple[str, ...] = ()
    code: CodeRules = CodeRules()
    limits: CellLimits = CellLimits()

    @model_validator(mode="after")
    def _every_import_reviewed_or_marked(self) -> Policy:
        allowed = set(self.allowed_imports)
        stray = [m for m in self.unreviewed_imports if m not in allowed]
        if stray:
            raise ValueError(f"unreviewed imports {stray} are not in the allowed imports")
        unknown = [m for m in self.allowed_imports if not is_reviewed(m) and m not in self.unreviewed_imports]
        if unknown:
            raise ValueError(
                f"imports {unknown} are not in the sandbox's reviewed surface (rlm_runtime/sandbox/surface.py); "
                "to allow them anyway, with every public attribute, list them under [imports] unreviewed")
        return self

    def with_limits(self, **overrides: object) -> Policy:
        """A copy whose limits have the given fields replaced (None values are ignored)."""
        changes = {k: v for k, v in overrides.items() if v is not None}
        if not changes:
            return self
        try:
            limits = CellLimits(**{**self.limits.model_dump(), **changes})
        except ValidationError as e:
            raise ConfigError(f"invalid limits: {_first_error(e)}") from e
        return self.model_copy(update={"limits": limits})

    def cache_key(self) -> tuple[object, ...]:
        """What the compiled code depends on (limits do not change it). Recomputed on each
        call, never cached on the instance: ``model_copy`` would carry a stale value."""
        return (self.allowed_imports, self.unreviewed_imports, self.denied_attributes, self.code)


def _first_error(e: ValidationError) -> str:
    err = e.errors()[0]
    where = ".".join(str(p) for p in err["loc"])
    return f"{where}: {err['msg']}"


def parse_policy(data: dict[str, object], source: str) -> Policy:
    """Build a Policy from the TOML tables; ``source`` names the file in errors."""
    known = {"name", "description", "imports", "attributes", "code", "limits"}
    unknown = set(data) - known
    if unknown:
        raise ConfigError(f"{source}: unknown key(s) {sorted(unknown)}; expected {sorted(known)}")
    imports = data.get("imports", {})
    attributes = data.get("attributes", {})
    if not isinstance(imports, dict) or not isinstance(attributes, dict):
        raise ConfigError(f"{source}: [imports] and [attributes] must be tables")
    for table, keys, value in (("imports", ("allow", "unreviewed"), imports), ("attributes", ("deny",), attributes)):
        extra = set(value) - set(keys)
        if extra:
            raise ConfigError(f"{source}: unknown key(s) {sorted(extra)} in [{table}]; expected {' or '.join(map(repr, keys))}")
        for key in keys:
            items = value.get(key, [])
            if not isinstance(items, list) or not all(isinstance(x, str) for x in items):
                raise ConfigError(f"{source}: [{table}] {key} must be a list of strings")
    bad_attrs = [a for a in attributes.get("deny", []) if "." not in a.strip(".")]
    if bad_attrs:
        raise ConfigError(f"{source}: [attributes] deny entries must be 'module.attribute', not {bad_attrs}")
    try:
        policy = Policy(
            name=data.get("name", Path(source).stem),
            description=data.get("description", ""),
            # An unreviewed module is allowed by being listed there: naming it twice is not required.
            allowed_imports=tuple(dict.fromkeys([*imports.get("allow", ()), *imports.get("unreviewed", ())])),
            unreviewed_imports=tuple(imports.get("unreviewed", ())),
            denied_attributes=tuple(attributes.get("deny", ())),
            code=CodeRules(**data.get("code", {})),  # type: ignore[arg-type]
            limits=CellLimits(**data.get("limits", {})),  # type: ignore[arg-type]
        )
    except ValidationError as e:
        raise ConfigError(f"{source}: {_first_error(e)}") from e
    except TypeError as e:
        raise ConfigError(f"{source}: {e}") from e
    bad = [c for c in policy.code.deny_constructs if c not in _AST_NODE_NAMES]
    if bad:
        raise ConfigError(f"{source}: deny_constructs names unknown AST nodes {bad}")
    return policy


def load_policy(name_or_path: str | Path | Policy, search: tuple[Path, ...] = ()) -> Policy:
    """Load a policy by name (``default``, ``strict``, or a file in ``search``) or by path."""
    if isinstance(name_or_path, Policy):
        return name_or_path
    text = str(name_or_path)
    candidate = Path(text)
    # A bare name is looked up in the policy folders only: a stray file called "strict" in
    # the working directory must not take over the strict policy.
    if not (text.endswith(".toml") or "/" in text or os.sep in text):
        if not re.fullmatch(r"[A-Za-z0-9_-]+", text):
            raise ConfigError(f"invalid policy name {text!r}")
        for folder in search or _default_search():
            if (folder / f"{text}.toml").is_file():
                candidate = folder / f"{text}.toml"
                break
        else:
            names = sorted({p.stem for d in (search or _default_search()) if d.is_dir() for p in d.glob("*.toml")})
            raise ConfigError(f"no policy named {text!r}; available: {', '.join(names) or 'none'}")
    try:
        data = tomllib.loads(candidate.read_text(encoding="utf-8"))
    except FileNotFoundError as e:
        raise ConfigError(f"policy file not found: {candidate}") from e
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read policy file {candidate}: {e}") from e
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{candidate}: invalid TOML: {e}") from e
    except RecursionError as e:  # tomllib recurses once per nested array or table
        raise ConfigError(f"{candidate}: invalid TOML: nested too deeply") from e
    return parse_policy(data, str(candidate))


def _default_search() -> tuple[Path, ...]:
    from rlm_runtime.config import paths_from_env

    return paths_from_env().policy_dirs


# --------------------------------------------------------------------------- the check


@dataclass(frozen=True)
class Finding:
    """One reason (error or warning), with the 1-based line it concerns when known."""

    message: str
    line: int | None = None

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}" if self.line else self.message


@dataclass(frozen=True)
class PolicyReport:
    """What the check found. ``code`` is the compiled cell when ``ok``; ``compiled`` is
    the same code serialised (marshal) for the worker."""

    errors: tuple[Finding, ...] = ()
    warnings: tuple[Finding, ...] = ()
    used_names: frozenset[str] = frozenset()
    policy: str = ""
    code: object | None = field(default=None, repr=False, compare=False)
    compiled: bytes | None = field(default=None, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        return not self.errors

    def text(self) -> str:
        """A short explanation fit to show a model."""
        lines = []
        if self.errors:
            lines.append(f"Code refused by sandbox policy '{self.policy}':")
            lines += [f"  - {f}" for f in self.errors]
        if self.warnings:
            lines.append("Warnings:")
            lines += [f"  - {f}" for f in self.warnings]
        return "\n".join(lines) if lines else f"Code allowed by sandbox policy '{self.policy}'."

    def to_dict(self) -> dict[str, object]:
        return {
            "ok": self.ok,
            "policy": self.policy,
            "errors": [{"line": f.line, "message": f.message} for f in self.errors],
            "warnings": [{"line": f.line, "message": f.message} for f in self.warnings],
            "used_names": sorted(self.used_names),
        }

    def __str__(self) -> str:
        return self.text()


_RP_LINE = re.compile(r"^Line (\d+|None): (.*)$", re.S)
_CACHE: OrderedDict[tuple[object, ...], PolicyReport] = OrderedDict()
_CACHE_SIZE = 256


#: Names the runtime binds in every namespace that has them (the worker restores them after
#: each cell). Code may shadow one for the rest of a cell, but no function may rebind one
#: in the namespace for later: see ``_reserved_rebinding``.
RUNTIME_NAMES = frozenset({
    "FINAL", "FINAL_VAR", "SHOW_VARS", "context", "contexts", "peek", "grep", "chunk", "chunks", "records",
    "llm_query", "llm_query_batched", "rlm_query", "search_chunks", "read_chunk", "semantic_grep", "related", "remember",
})


def check(source: str | bytes, policy: Policy, filename: str = "<cell>", reserved: frozenset[str] = frozenset()) -> PolicyReport:
    """Check a cell against ``policy`` and compile it if allowed. Never raises on bad code.

    Cheap refusals come first (size, encoding, NUL bytes, nesting) so that hostile input is
    turned away before the parser spends time on it. Results are cached by content.
    """
    raw = source.encode("utf-8", "surrogatepass") if isinstance(source, str) else bytes(source)
    reserved = RUNTIME_NAMES | reserved
    key = (hashlib.sha256(raw).hexdigest(), policy.cache_key(), filename, reserved)
    hit = _CACHE.get(key)
    if hit is not None:
        _CACHE.move_to_end(key)
        return hit
    report = _check(raw, policy, filename, reserved)
    _CACHE[key] = report
    if len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return report


def clear_compile_cache() -> None:
    """Forget every cached report, so that the next ``check`` of any source runs in full.

    For tests that prove what the checker does (or that the parser never runs): a report
    cached by an earlier check of the same source would answer for it.
    """
    _CACHE.clear()


def _refuse(policy: Policy, message: str, line: int | None = None) -> PolicyReport:
    return PolicyReport(errors=(Finding(message, line),), policy=policy.name)


def _check(raw: bytes, policy: Policy, filename: str, reserved: frozenset[str]) -> PolicyReport:
    rules = policy.code
    if len(raw) > rules.max_source_bytes:
        return _refuse(policy, f"source is {len(raw)} bytes; the limit is {rules.max_source_bytes}")
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]  # a UTF-8 byte-order mark, as Python itself accepts
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        return _refuse(policy, f"source is not valid UTF-8 (byte offset {e.start})", line)
    if "\x00" in text:
        return _refuse(policy, "source contains a NUL byte", text[: text.index("\x00")].count("\n") + 1)
    nesting = _nesting_problem(text, rules.max_nesting)
    if nesting:
        return _refuse(policy, *nesting)
    try:
        tree = ast.parse(text, filename, "exec")
    except SyntaxError as e:
        return _refuse(policy, f"SyntaxError: {e.msg}", e.lineno)
    except (RecursionError, MemoryError, ValueError):
        return _refuse(policy, "source is too deeply nested to parse")

    try:
        _expand_item_augassign(tree)  # a recursive visitor: a chain a.b.b.b... the parser took overflows it
    except RecursionError:
        return _refuse(policy, "source is too deeply nested to check")
    errors: list[Finding] = []
    warnings: list[Finding] = []
    _walk_rules(tree, policy, errors, warnings)
    errors += _reserved_rebinding(tree, reserved)
    if errors:
        return PolicyReport(errors=tuple(sorted(errors, key=_by_line)), warnings=tuple(sorted(warnings, key=_by_line)),
                            policy=policy.name)

    rp_errors: list[str] = []
    rp_warnings: list[str] = []
    used: dict[str, bool] = {}
    try:
        RestrictingNodeTransformer(rp_errors, rp_warnings, used).visit(tree)
    except RecursionError:
        return _refuse(policy, "source is too deeply nested to check")
    errors += [_rp_finding(m) for m in rp_errors]
    warnings += [_rp_finding(m) for m in rp_warnings if "Prints, but never reads 'printed'" not in m]
    code = None
    if not errors:
        try:
            _strip_annotations(tree)
            _show_last_expression(tree)
            code = compile(tree, filename, "exec", dont_inherit=True)
        except SyntaxError as e:
            errors.append(Finding(f"SyntaxError: {e.msg}", e.lineno))
        except (ValueError, RecursionError, MemoryError) as e:
            errors.append(Finding(f"cannot compile: {e}"))
    return PolicyReport(
        errors=tuple(sorted(errors, key=_by_line)),
        warnings=tuple(sorted(warnings, key=_by_line)),
        used_names=frozenset(used),
        policy=policy.name,
        code=code,
        compiled=marshal.dumps(code) if code is not None else None,
    )


def _by_line(f: Finding) -> int:
    return f.line or 0


def _rp_finding(message: str) -> Finding:
    m = _RP_LINE.match(message)
    if not m:
        return Finding(message)
    return Finding(m.group(2).strip(), int(m.group(1)) if m.group(1).isdigit() else None)


def _nesting_problem(text: str, limit: int) -> tuple[str, int] | None:
    """Bracket or indentation depth beyond ``limit``, found by a linear scan (no parser)."""
    depth = 0
    line = 1
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch in "'\"":  # skip a string literal (brackets inside are text, not nesting)
            quote = text[i : i + 3] if text[i : i + 3] in ("\'\'\'", '\"\"\"') else ch
            end = i + len(quote)
            while end < n and not text.startswith(quote, end):
                if text[end] == "\\":
                    end += 1
                elif text[end] == "\n" and len(quote) == 1:
                    break
                end += 1
            line += text.count("\n", i, end)
            i = end + len(quote)
            continue
        if ch == "#":  # skip a comment
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        if ch in "([{":
            depth += 1
            if depth > limit:
                return (f"brackets nested deeper than {limit} levels", line)
        elif ch in ")]}":
            depth = max(depth - 1, 0)
        elif ch == "\n":
            line += 1
        i += 1
    # Indentation levels the way the tokenizer counts them: a stack of widths.
    widths = [0]
    for n, row in enumerate(text.splitlines(), 1):
        body = row.lstrip(" \t")
        if not body or body.startswith("#"):
            continue
        width = len(row[: len(row) - len(body)].expandtabs(8))
        if width > widths[-1]:
            widths.append(width)
            if len(widths) - 1 > limit:
                return (f"indentation deeper than {limit} levels", n)
        else:
            while len(widths) > 1 and width < widths[-1]:
                widths.pop()
    return None


_PURE = (ast.Name, ast.Constant, ast.Attribute, ast.Subscript, ast.Tuple, ast.BinOp, ast.UnaryOp, ast.Slice,
         ast.operator, ast.unaryop, ast.expr_context)


class _ItemAugAssign(ast.NodeTransformer):
    """``counts[key] += 1`` -> ``counts[key] = counts[key] + 1`` (and ``a.b += x`` likewise).

    RestrictedPython refuses augmented assignment to items and attributes outright, and it is
    how nearly every model counts. Rewritten only when the target's parts are free of calls
    and other side effects (evaluating them twice is then the same as once); the result is
    a plain read, an operation and a write, which the guards check like any other.
    """

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.AST:
        target = node.target
        if not isinstance(target, (ast.Subscript, ast.Attribute)) or not all(isinstance(n, _PURE) for n in ast.walk(target)):
            return node
        read = _as_load(target)
        value = ast.BinOp(left=read, op=node.op, right=node.value)
        return ast.copy_location(ast.Assign(targets=[target], value=ast.copy_location(value, node)), node)


def _as_load(node: ast.expr) -> ast.expr:
    import copy

    clone = copy.deepcopy(node)
    clone.ctx = ast.Load()  # type: ignore[attr-defined]
    return clone


def _expand_item_augassign(tree: ast.AST) -> None:
    _ItemAugAssign().visit(tree)
    ast.fix_missing_locations(tree)


def _walk_rules(tree: ast.AST, policy: Policy, errors: list[Finding], warnings: list[Finding]) -> None:
    """Our checks on top of RestrictedPython's: size, depth, imports, denied constructs."""
    allowed = set(policy.allowed_imports)
    denied_nodes = set(policy.code.deny_constructs)
    denied_attrs = {tuple(a.rsplit(".", 1)) for a in policy.denied_attributes if "." in a}
    nodes = 0
    stack: list[tuple[ast.AST, int]] = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        nodes += 1
        if nodes > policy.code.max_ast_nodes:
            errors.append(Finding(f"code has more than {policy.code.max_ast_nodes} syntax nodes"))
            return
        if depth > policy.code.max_ast_depth:
            errors.append(Finding(f"code is nested deeper than {policy.code.max_ast_depth} levels", getattr(node, "lineno", None)))
            return
        line = getattr(node, "lineno", None)
        kind = type(node).__name__
        if kind in denied_nodes:
            errors.append(Finding(f"{kind} is not allowed by this policy", line))
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name not in allowed:
                    errors.append(Finding(_import_message(alias.name, allowed), line))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                errors.append(Finding("relative imports are not allowed", line))
            elif node.module not in allowed:
                errors.append(Finding(_import_message(node.module or "", allowed), line))
            else:
                for alias in node.names:
                    if (node.module, alias.name) in denied_attrs:
                        errors.append(Finding(f"{node.module}.{alias.name} is not allowed", line))
                    elif is_reviewed(node.module) and not alias.name.startswith(("_", "*")) and refusal(node.module, alias.name):
                        errors.append(Finding(refusal(node.module, alias.name) or "", line))
        elif isinstance(node, ast.ExceptHandler):
            caught = node.type.elts if isinstance(node.type, ast.Tuple) else [node.type]
            if node.type is None or any(isinstance(t, ast.Name) and t.id == "BaseException" for t in caught):
                warnings.append(Finding(
                    "catching BaseException does not stop the cell timeout: the worker is killed "
                    "and its variables are lost; catch Exception instead", line))
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))


_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _reserved_rebinding(tree: ast.AST, reserved: frozenset[str]) -> list[Finding]:
    """Code that could rebind a runtime name *after* its cell ends.

    A cell's own top-level statements may shadow ``FINAL`` or ``context`` until the cell
    ends, when the worker restores them. Code that runs later must not: a function with
    ``global FINAL`` called by a finalizer, a callback or a later cell, or a walrus in a
    comprehension (which binds in the enclosing scope, here the namespace) iterated
    lazily, would replace the runtime's function for every later cell.
    """
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Global):
            for name in node.names:
                if name in reserved:
                    found.append(Finding(f"'global {name}' is not allowed: {name} is a runtime name", node.lineno))
        elif isinstance(node, _COMPREHENSIONS):
            for inner in ast.walk(node):
                if isinstance(inner, ast.NamedExpr) and isinstance(inner.target, ast.Name) and inner.target.id in reserved:
                    found.append(Finding(f"assigning the runtime name {inner.target.id} inside a comprehension is not allowed",
                                         inner.lineno))
    return found


def _import_message(name: str, allowed: set[str]) -> str:
    return f"import of '{name}' is not allowed; allowed modules: {', '.join(sorted(allowed)) or 'none'}"


def _strip_annotations(tree: ast.AST) -> None:
    """Drop the annotations of functions (arguments and return), after RestrictedPython's pass.

    User code cannot read ``__annotations__``; only library code does, and some of it
    evaluates string annotations with a plain ``eval`` in the user's globals, outside
    RestrictedPython: ``functools.singledispatch().register(f)`` with ``def f(x: "<code>")``
    ran arbitrary unguarded code. Without annotations there is nothing to evaluate.
    """
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            node.returns = None
            a = node.args
            for arg in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg):
                if arg is not None:
                    arg.annotation = None


def _show_last_expression(tree: ast.Module) -> None:
    """If the cell ends in an expression, print its repr like an interactive prompt does.

    Done after RestrictedPython's pass, so the injected (underscore) name is ours alone.
    """
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = tree.body[-1]
        call = ast.Call(func=ast.Name(SHOW_NAME, ast.Load()), args=[last.value], keywords=[])
        tree.body[-1] = ast.copy_location(ast.Expr(call), last)
        ast.fix_missing_locations(tree)
