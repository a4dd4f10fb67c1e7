"""The namespace user code runs in: guarded builtins, guarded attribute access, imports.

Runs inside the worker. These guards are the runtime half of the policy (RestrictedPython
rewrote attribute access, item writes, printing and iteration into calls to the ``_..._``
names defined here). They are defence in depth: the process and its OS limits are the
boundary.
"""

from __future__ import annotations

import builtins
import collections
import functools
import importlib
import operator
import sys
import types
from typing import Any

from RestrictedPython.Guards import (
    guarded_iter_unpack_sequence,
    guarded_unpack_sequence,
    raise_,
    safe_builtins,
    safer_getattr,
)

from rlm_runtime.sandbox import surface

#: ``__name__`` of the user namespace; classes the user defines carry it in ``__module__``.
USER_MODULE = "__rlm__"
#: Name bound to the function that prints the value of a cell's last expression. It starts
#: with an underscore, so user code cannot name it (RestrictedPython refuses such names).
SHOW_NAME = "_rlm_show_"

# Objects whose attributes lead to frames, globals or code no matter what the name is.
_OPAQUE_TYPES = (
    types.FrameType,
    types.TracebackType,
    types.CodeType,
    types.GeneratorType,
    types.CoroutineType,
    types.AsyncGeneratorType,
    types.CellType,
)
# Attributes that hand back the wrapped callable or its arguments (the classic
# ``functools.partial(f).func`` leak).
_WRAPPER_ATTRS = {
    functools.partial: {"func", "args", "keywords"},
    functools.partialmethod: {"func", "args", "keywords"},
    # The object a failed lookup was made on: raised inside library code, that can be an
    # internal of the worker's (a bound method's __func__).
    AttributeError: {"obj"},
    # A context's text is a window of a mapping that may hold other documents (a corpus of
    # in-memory texts crosses in one): the mapping itself, and releasing the window for
    # every later cell, are not for user code.
    memoryview: {"obj", "release"},
}
# Methods of the context handles that change the handle itself, for every later cell:
# refused on the handle and on its class, whatever the route (getattr, setattr, delattr).
_HANDLE_MUTATORS = frozenset({"close", "record", "release"})


def _check_handle_attr(obj: Any, name: Any) -> None:
    if name not in _HANDLE_MUTATORS:
        return
    while isinstance(obj, types.GenericAlias):  # list[int]-style aliases forward attributes to their origin
        obj = obj.__origin__
    from rlm_runtime.context.buffer import TextBuffer
    from rlm_runtime.context.corpus import CorpusHandle
    from rlm_runtime.context.handles import BufferHandle
    from rlm_runtime.context.protocol import AccessStats

    kinds = (BufferHandle, CorpusHandle, AccessStats, TextBuffer)
    if isinstance(obj, kinds) or (isinstance(obj, type) and issubclass(obj, kinds)):
        raise SandboxPermissionError(f"'{name}' of a context handle is not available in the sandbox")


_EXTRA_BUILTINS = (
    "dict list set frozenset enumerate map filter zip reversed sorted sum min max any all "
    "iter next tuple bytes bytearray object super property staticmethod classmethod format "
    "ascii bin abs divmod round pow hash callable chr ord hex oct len range repr slice str "
    "int float complex bool isinstance issubclass NotImplemented Ellipsis"
).split()
_BLOCKED_BUILTINS = {"__import__", "open", "eval", "exec", "compile", "globals", "locals", "vars",
                     "input", "breakpoint", "help", "exit", "quit", "memoryview", "setattr",
                     "delattr", "getattr", "hasattr", "dir", "type"}


class SandboxPermissionError(PermissionError):
    """Raised to user code when a guard refuses an import, attribute or write."""


# Callables that run str.format's attribute walk ("{0.__class__.__mro__}") with no guard.
# safer_getattr refuses the *name* "format" on str objects only, so these are also checked
# on the value, whatever the route: UserString(...).format, or super(S, s).format for a
# str subclass S made with type(type(1))(...).
_FORMATTERS = (str.format, str.format_map, collections.UserString.format, collections.UserString.format_map)


def _is_formatter(value: Any) -> bool:
    if type(value) is types.MethodType:  # a bound UserString.format
        value = value.__func__
    elif type(value) is types.BuiltinMethodType and isinstance(value.__self__, str):  # a bound str.format
        return value.__name__ in ("format", "format_map")
    return any(value is f for f in _FORMATTERS)


def make_getattr(denied: set[tuple[str, str]], allowed_modules: set[str]) -> Any:
    """Build the ``_getattr_`` guard: RestrictedPython's safer_getattr plus our rules."""

    def guarded_getattr(obj: Any, name: str, *default: Any) -> Any:
        if isinstance(obj, types.GenericAlias) and isinstance(name, str) and not name.startswith("_"):
            # list[int], or GenericAlias(C, ()) built from type(list[int]), forwards every
            # public attribute to its origin: judge the lookup on the origin, by every rule.
            return guarded_getattr(obj.__origin__, name, *default)
        if isinstance(obj, _OPAQUE_TYPES):
            raise SandboxPermissionError(f"attributes of {type(obj).__name__} objects are not accessible in the sandbox")
        if name == "mro":
            # Base classes of library classes include factories no allowed name hands out:
            # enum.Enum behind re.RegexFlag builds classes with any dunder methods. Refused
            # on every object: an alias (list[int]) or a proxy forwards it to a class.
            raise SandboxPermissionError("'mro' is not available in the sandbox (it hands out library base classes); "
                                         "use isinstance() or issubclass()")
        # super(C, x).name reads what x.name would, from further up: the rules look at x.
        # (typeshed's super has no __self__, which super objects have: hence the ignore.)
        subject = obj.__self__ if type(obj) is super and obj.__self__ is not None else obj  # type: ignore[attr-defined]
        blocked = next((names for kind, names in _WRAPPER_ATTRS.items() if isinstance(subject, kind)), None)
        if blocked and name in blocked:
            raise SandboxPermissionError(f"'{type(subject).__name__}.{name}' is not accessible in the sandbox")
        _check_handle_attr(subject, name)
        if isinstance(obj, types.ModuleType):
            if (obj.__name__, name) in denied:
                raise SandboxPermissionError(f"'{obj.__name__}.{name}' is not allowed by the sandbox policy")
            if surface.is_reviewed(obj.__name__) and isinstance(name, str) and not name.startswith("_"):
                reason = surface.refusal(obj.__name__, name)
                if reason is not None:
                    raise SandboxPermissionError(reason)
        try:
            value = safer_getattr(obj, name, *default) if default else safer_getattr(obj, name, raise_)
        except AttributeError as e:
            # A failed lookup records its target in e.obj; on a bound method that is the
            # method's __func__, which user code must not reach by any name.
            e.obj = None
            raise
        if isinstance(value, types.ModuleType) and value.__name__ not in allowed_modules:
            raise SandboxPermissionError(f"'{name}' is the module '{value.__name__}', which is not allowed")
        if _is_formatter(value):
            raise SandboxPermissionError(f"'{name}' walks attributes of its arguments and is not allowed in the sandbox")
        return value

    return guarded_getattr


def _user_owned(ob: Any) -> bool:
    if isinstance(ob, type):
        return ob.__module__ == USER_MODULE
    return type(ob).__module__ == USER_MODULE


class _ItemsOnly:
    """What ``_write_`` hands back for objects the user does not own: items yes, attributes no."""

    __slots__ = ("_ob",)
    _ob: Any

    def __init__(self, ob: Any) -> None:
        object.__setattr__(self, "_ob", ob)

    def __setitem__(self, key: Any, value: Any) -> None:
        self._ob[key] = value

    def __delitem__(self, key: Any) -> None:
        del self._ob[key]

    def __setattr__(self, name: str, value: Any) -> None:
        raise SandboxPermissionError(f"cannot set attributes of {type(self._ob).__name__} objects in the sandbox")

    def __delattr__(self, name: str) -> None:
        raise SandboxPermissionError(f"cannot delete attributes of {type(self._ob).__name__} objects in the sandbox")


def guarded_write(ob: Any) -> Any:
    if type(ob) in (dict, list) or _user_owned(ob):
        return ob
    return _ItemsOnly(ob)


_INPLACE = {
    "+=": operator.iadd, "-=": operator.isub, "*=": operator.imul, "/=": operator.itruediv,
    "//=": operator.ifloordiv, "%=": operator.imod, "**=": operator.ipow, "<<=": operator.ilshift,
    ">>=": operator.irshift, "&=": operator.iand, "^=": operator.ixor, "|=": operator.ior,
    "@=": operator.imatmul,
}


def inplacevar(op: str, x: Any, y: Any) -> Any:
    fn = _INPLACE.get(op)
    if fn is None:
        raise SyntaxError(f"unsupported in-place operator {op}")
    return fn(x, y)


def make_import(allowed: set[str], denied: frozenset[tuple[str, str]] = frozenset()) -> Any:
    def guarded_import(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:
        if level != 0:
            raise SandboxPermissionError("relative imports are not allowed in the sandbox")
        if name not in allowed:
            raise SandboxPermissionError(f"import of '{name}' is not allowed; allowed: {', '.join(sorted(allowed))}")
        top = name.partition(".")[0]
        if not fromlist and top not in allowed:
            # ``import a.b`` binds ``a``: that would hand out a package nobody allowed.
            raise SandboxPermissionError(f"import of '{name}' would bind '{top}', which is not allowed; "
                                         f"write: from {name.rpartition('.')[0]} import {name.rpartition('.')[2]}")
        module = _user_module(name, denied)
        if fromlist:
            # ``from m import x`` reads x with a plain getattr (IMPORT_FROM), not through
            # _getattr_: apply the same rules here, or ``from statistics import sys`` hands
            # out a module that is not allowed.
            for item in fromlist:
                if not isinstance(item, str):
                    raise SandboxPermissionError("import names must be strings")
                if (name, item) in denied:
                    raise SandboxPermissionError(f"'{name}.{item}' is not allowed by the sandbox policy")
                if surface.is_reviewed(name):
                    reason = surface.refusal(name, item)
                    if reason is not None:
                        raise SandboxPermissionError(reason)
                value = getattr(module, item, None)
                if isinstance(value, types.ModuleType) and value.__name__ not in allowed:
                    raise SandboxPermissionError(
                        f"'{name}.{item}' is the module '{value.__name__}', which is not allowed")
            return module
        return _user_module(top, denied)

    return guarded_import


def _user_module(name: str, denied: frozenset[tuple[str, str]]) -> types.ModuleType:
    """What ``import name`` binds in user code: the reviewed view, or the module itself
    for a module the policy marks unreviewed."""
    if surface.is_reviewed(name):
        return surface.view(name, frozenset(d for d in denied if d[0] == name))
    return sys.modules.get(name) or importlib.import_module(name)


class _Metaclass:
    """What user code gets for ``type``, and for ``type(C)`` when ``C`` is a class.

    The real ``type`` (or any metaclass) builds a class from a name, bases and a namespace
    dict, and that dict may hold keys no static check sees: ``"__annotations__"``,
    ``"__globals__"``, ``"__init_subclass__"``... Library code later trusts such dunders
    (``typing.get_type_hints`` evals annotations in ``__globals__``). So user code never
    holds a metaclass: it holds this stand-in, which answers ``type(x)``, ``isinstance``
    and ``issubclass`` like the metaclass does, compares equal to it, and refuses the
    three-argument call and subclassing. Classes come from ``class`` statements only,
    whose bodies RestrictedPython checks.
    """

    # ``_meta`` (the real metaclass) is declared by __slots__ alone, which mypy does not read:
    # hence the ``type: ignore[attr-defined]`` where it is read. A class-level annotation
    # would give the class an ``__annotations__`` dict, which typing.get_type_hints and
    # singledispatch read; so, not even one under TYPE_CHECKING.
    __slots__ = ("_meta",)

    def __init__(self, meta: type) -> None:
        object.__setattr__(self, "_meta", meta)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) != 1 or kwargs:
            raise SandboxPermissionError("type() with three arguments is not allowed; use a class statement")
        return type_of(args[0])

    def __instancecheck__(self, obj: Any) -> bool:
        return isinstance(obj, self._meta)  # type: ignore[attr-defined]  # a __slots__ attribute

    def __subclasscheck__(self, cls: Any) -> bool:
        return issubclass(real_class(cls), self._meta)  # type: ignore[attr-defined]  # a __slots__ attribute

    def __mro_entries__(self, bases: tuple[Any, ...]) -> tuple[Any, ...]:
        raise SandboxPermissionError("a class cannot derive from a metaclass in the sandbox")

    def __eq__(self, other: Any) -> bool:
        return real_class(other) is self._meta  # type: ignore[attr-defined]  # a __slots__ attribute

    def __hash__(self) -> int:
        return hash(self._meta)  # type: ignore[attr-defined]  # a __slots__ attribute

    def __setattr__(self, name: str, value: Any) -> None:
        raise SandboxPermissionError("cannot set attributes of type objects in the sandbox")

    def __repr__(self) -> str:
        return repr(self._meta)  # type: ignore[attr-defined]  # a __slots__ attribute


_TYPE = _Metaclass(type)
_metaclasses: dict[type, _Metaclass] = {type: _TYPE}


def type_of(obj: Any) -> Any:
    """``type(obj)``, with metaclasses replaced by their guarded stand-in."""
    if isinstance(obj, _Metaclass):
        return _TYPE
    kind = type(obj)
    if not issubclass(kind, type):
        return kind
    stand_in = _metaclasses.get(kind)
    if stand_in is None:
        stand_in = _metaclasses.setdefault(kind, _Metaclass(kind))
    return stand_in


def real_class(obj: Any) -> Any:
    """The metaclass behind a stand-in; anything else as it is (for host-side checks)."""
    if isinstance(obj, _Metaclass):
        return object.__getattribute__(obj, "_meta")
    return obj


def make_builtins(getattr_guard: Any, import_guard: Any) -> dict[str, Any]:
    """The builtins user code sees: RestrictedPython's safe set plus common pure functions."""
    table = dict(safe_builtins)
    for name in _EXTRA_BUILTINS:
        table[name] = getattr(builtins, name)
    for name in _BLOCKED_BUILTINS:
        table.pop(name, None)

    def guarded_hasattr(obj: Any, name: str) -> bool:
        try:
            getattr_guard(obj, name)
        except (AttributeError, SandboxPermissionError, NotImplementedError):
            return False
        return True

    def guarded_setattr(obj: Any, name: str, value: Any) -> None:
        # type() is str, not isinstance: a str subclass could answer startswith() as it likes.
        if type(name) is not str or name.startswith("_"):
            raise SandboxPermissionError("setattr() takes a plain str name, not one starting with '_'")
        _check_handle_attr(obj, name)
        setattr(guarded_write(obj), name, value)

    def guarded_delattr(obj: Any, name: str) -> None:
        if type(name) is not str or name.startswith("_"):
            raise SandboxPermissionError("delattr() takes a plain str name, not one starting with '_'")
        _check_handle_attr(obj, name)
        delattr(guarded_write(obj), name)

    def guarded_dir(obj: Any = None) -> list[str]:
        if obj is None:
            raise SandboxPermissionError("dir() without an argument is not available; use SHOW_VARS()")
        return [n for n in dir(obj) if not n.startswith("_")]

    table.update(
        getattr=getattr_guard,
        hasattr=guarded_hasattr,
        setattr=guarded_setattr,
        delattr=guarded_delattr,
        dir=guarded_dir,
        type=_TYPE,
        __import__=import_guard,
        SandboxPermissionError=SandboxPermissionError,
    )
    return table


def make_globals(allowed_modules: set[str], denied_attributes: set[str], printer: Any) -> dict[str, Any]:
    """A fresh user namespace with every name RestrictedPython's rewritten code expects."""
    denied = {tuple(a.rsplit(".", 1)) for a in denied_attributes if "." in a}
    getattr_guard = make_getattr(denied, allowed_modules)  # type: ignore[arg-type]
    return {
        "__builtins__": make_builtins(getattr_guard, make_import(allowed_modules, frozenset(denied))),  # type: ignore[arg-type]
        "__name__": USER_MODULE,
        "_getattr_": getattr_guard,
        "_getitem_": operator.getitem,
        "_getiter_": iter,
        "_iter_unpack_sequence_": guarded_iter_unpack_sequence,
        "_unpack_sequence_": guarded_unpack_sequence,
        "_write_": guarded_write,
        "_inplacevar_": inplacevar,
        "_apply_": lambda f, *a, **kw: f(*a, **kw),
        "_print_": printer,
        # RestrictedPython compiles `class C:` as `class C(metaclass=__metaclass__)`.
        "__metaclass__": type,
    }


def preload(modules: set[str]) -> None:
    """Import allowed modules ahead of time (in the zygote), so workers share them."""
    for name in sorted(modules):
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    try:
        import tiktoken.registry

        tiktoken.registry.list_encoding_names()  # finds the encoding plugins while files are readable
    except Exception:
        pass
    # Lazily imported helpers of allowed modules and of the context handles, loaded now so
    # no worker has to read them after Landlock.
    for name in ("_strptime", "encodings.idna", "encodings.latin_1", "encodings.ascii", "unicodedata",
                 "rlm_runtime.context", "rlm_runtime.context.probe", "rlm_runtime.sandbox.contexts",
                 "tiktoken", "tiktoken.load", "tiktoken_ext.openai_public", "csv"):
        try:
            importlib.import_module(name)
        except ImportError:
            pass
