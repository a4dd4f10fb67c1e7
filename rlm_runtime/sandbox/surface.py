"""The reviewed surface: every public name of every module the shipped policies allow.

Each name has a verdict, reviewed by hand:

* allowed as is: pure functions, constants, classes whose methods call only user code
  through its ordinary protocols (``__lt__``, ``__hash__``, a ``key=`` function);
* wrapped: the sandbox hands out a replacement that keeps the useful behaviour and drops
  the dangerous part (``functools.singledispatch``: ``register`` takes only real classes,
  so it never evaluates string annotations found on an object user code built);
* denied, with the reason: anything that evaluates code, walks attributes by a name it
  reads from its arguments, copies dunder attributes between objects, or hands out a
  module, a lock or a C capsule.

User code never holds the real module. ``import json`` and ``from json import loads`` both
read a *view*: a fresh module object holding only the allowed and wrapped names. A name the
table does not know (a new Python release, a policy that allows a new module) is refused:
the table fails closed. ``tests/policy/test_surface.py`` enumerates every allowed module's
attributes at run time and fails on any public name with no verdict here.

A module a policy allows that is not in this table is *unreviewed*: the policy must say so
(``[imports] unreviewed = [...]``) and its code then sees the real module, every public
attribute included. The shipped policies use reviewed modules only.

Names from several Python versions are listed; a name absent from the running version is
simply never handed out.
"""

from __future__ import annotations

import functools
import importlib
import types
from collections.abc import Callable
from typing import Any

#: The verdict of a name that is handed out as the module has it.
ALLOW = "allow"
#: The verdict of a name replaced by a wrapper from ``_WRAPPERS``.
WRAP = "wrap"

_MODULE = "a module: import the modules the policy allows directly"
_NOT_NEEDED = "an interpreter internal with no use for text work"


def _allow(names: str) -> dict[str, str]:
    return dict.fromkeys(names.split(), ALLOW)


# module -> public name -> ALLOW, WRAP, or the reason it is denied.
REVIEWED: dict[str, dict[str, str]] = {
    "re": {
        **_allow("A ASCII DEBUG DOTALL I IGNORECASE L LOCALE M MULTILINE NOFLAG S T TEMPLATE U UNICODE VERBOSE X "
                 "Match Pattern RegexFlag Scanner error PatternError compile escape findall finditer fullmatch match "
                 "purge search split sub subn template"),
        "copyreg": _MODULE, "enum": _MODULE, "functools": _MODULE,
    },
    "json": {
        **_allow("JSONDecodeError JSONDecoder JSONEncoder detect_encoding dump dumps load loads"),
        "codecs": _MODULE, "decoder": _MODULE, "encoder": _MODULE, "scanner": _MODULE,
    },
    "math": _allow(
        "acos acosh asin asinh atan atan2 atanh cbrt ceil comb copysign cos cosh degrees dist e erf erfc exp exp2 "
        "expm1 fabs factorial floor fma fmod frexp fsum gamma gcd hypot inf isclose isfinite isinf isnan isqrt lcm "
        "ldexp lgamma log log10 log1p log2 modf nan nextafter perm pi pow prod radians remainder sin sinh sqrt "
        "sumprod tan tanh tau trunc ulp"),
    "cmath": _allow(
        "acos acosh asin asinh atan atanh cos cosh e exp inf infj isclose isfinite isinf isnan log log10 nan nanj "
        "phase pi polar rect sin sinh sqrt tan tanh tau"),
    "collections": {
        # UserString.format/format_map walk attributes of their arguments: the getattr
        # guard refuses those two methods by value, whatever route reaches them.
        **_allow("ChainMap Counter OrderedDict UserDict UserList UserString defaultdict deque namedtuple"),
        "abc": _MODULE,
    },
    "itertools": _allow(
        "accumulate batched chain combinations combinations_with_replacement compress count cycle dropwhile "
        "filterfalse groupby islice pairwise permutations product repeat starmap takewhile tee zip_longest"),
    "functools": {
        **_allow("WRAPPER_ASSIGNMENTS WRAPPER_UPDATES cache cached_property cmp_to_key lru_cache namedtuple partial "
                 "partialmethod reduce total_ordering Placeholder"),
        # register(obj) on an object that is not a class calls typing.get_type_hints(obj),
        # which evals obj.__annotations__ with obj.__globals__ as globals: an object built
        # by user code hands both in, and gets the real builtins back.
        "singledispatch": WRAP,
        "singledispatchmethod": WRAP,
        "update_wrapper": "copies arbitrary dunder attributes (__module__, __dict__, __wrapped__) between objects",
        "wraps": "copies arbitrary dunder attributes (__module__, __dict__, __wrapped__) between objects",
        "recursive_repr": "copies __annotations__ and other dunder attributes onto a new function",
        "GenericAlias": _NOT_NEEDED, "RLock": "a lock: a cell could block the worker on it",
        "get_cache_token": _NOT_NEEDED,
    },
    "statistics": {
        **_allow("Counter Decimal Fraction LinearRegression NormalDist StatisticsError bisect_left bisect_right "
                 "correlation covariance defaultdict erf exp fabs fmean fsum geometric_mean groupby harmonic_mean "
                 "hypot kde kde_random linear_regression log mean median median_grouped median_high median_low mode "
                 "mul multimode namedtuple pstdev pvariance quantiles reduce repeat sqrt stdev tau variance count "
                 "sumprod itemgetter"),
        "math": _MODULE, "numbers": _MODULE, "random": _MODULE, "sys": _MODULE,
    },
    "datetime": {
        **_allow("MAXYEAR MINYEAR UTC date datetime time timedelta timezone tzinfo"),
        "datetime_CAPI": "a C capsule: raw pointers into the interpreter", "sys": _MODULE,
    },
    "string": {
        **_allow("Template ascii_letters ascii_lowercase ascii_uppercase capwords digits hexdigits octdigits "
                 "printable punctuation whitespace"),
        "Formatter": "get_field() walks attributes of its arguments by names taken from the format string",
        "templatelib": _MODULE,
    },
    "textwrap": {**_allow("TextWrapper dedent fill indent shorten wrap"), "re": _MODULE},
    "heapq": _allow("heapify heappop heappush heappushpop heapreplace merge nlargest nsmallest "
                    "heapify_max heappop_max heappush_max heappushpop_max heapreplace_max"),
    "bisect": _allow("bisect bisect_left bisect_right insort insort_left insort_right"),
    "random": {
        **_allow("BPF LOG4 NV_MAGICCONST RECIP_BPF Random SG_MAGICCONST TWOPI betavariate binomialvariate choice "
                 "choices expovariate gammavariate gauss getrandbits getstate lognormvariate normalvariate "
                 "paretovariate randbytes randint random randrange sample seed setstate shuffle triangular uniform "
                 "vonmisesvariate weibullvariate"),
        "SystemRandom": "reads the operating system's entropy source",
    },
    "difflib": {
        **_allow("Differ HtmlDiff IS_CHARACTER_JUNK IS_LINE_JUNK Match SequenceMatcher context_diff diff_bytes "
                 "get_close_matches ndiff restore unified_diff"),
        "GenericAlias": _NOT_NEEDED,
    },
    "fractions": {
        **_allow("Decimal Fraction"),
        "math": _MODULE, "numbers": _MODULE, "operator": _MODULE, "re": _MODULE, "sys": _MODULE,
    },
    "unicodedata": _allow(
        "UCD bidirectional category combining decimal decomposition digit east_asian_width is_normalized lookup "
        "mirrored name normalize numeric ucd_3_2_0 unidata_version"),
}


class SurfacePermissionError(PermissionError):
    """A module attribute the reviewed surface does not hand out."""


def is_reviewed(module: str) -> bool:
    """Whether ``module`` has a verdict for each of its names here."""
    return module in REVIEWED


def refusal(module: str, name: str) -> str | None:
    """Why ``module.name`` is refused, or None when it is handed out (allowed or wrapped)."""
    verdict = REVIEWED[module].get(name)
    if verdict is None:
        return f"'{module}.{name}' is not in the sandbox's reviewed surface, so it is not available"
    if verdict in (ALLOW, WRAP):
        return None
    return f"'{module}.{name}' is not allowed in the sandbox: {verdict}"


# ------------------------------------------------------------------------ wrappers


def _dispatch_class(cls: Any) -> Any:
    """``cls`` if it is something ``singledispatch`` may key on without evaluating code."""
    from rlm_runtime.sandbox.guards import SandboxPermissionError, real_class

    cls = real_class(cls)
    members = cls.__args__ if isinstance(cls, types.UnionType) else (cls,)
    if not all(isinstance(c, type) for c in members):
        raise SandboxPermissionError(
            "register() takes a class in the sandbox: write @f.register(int) (annotations are not read)")
    if any(issubclass(c, type) for c in members):
        # The registry's keys are readable: a metaclass there hands out the real one.
        raise SandboxPermissionError("register() does not take a metaclass in the sandbox")
    return cls


def singledispatch(func: Callable[..., Any]) -> Callable[..., Any]:
    """``functools.singledispatch`` whose ``register`` accepts only classes.

    The library's ``register(obj)`` reads ``obj.__annotations__`` and evaluates them with
    ``typing.get_type_hints`` when ``obj`` is not a class: this one never does.
    """
    dispatcher = functools.singledispatch(func)
    library_register = dispatcher.register

    def register(cls: Any, func: Callable[..., Any] | None = None) -> Any:
        cls = _dispatch_class(cls)
        if func is None:
            return lambda f: register(cls, f)
        return library_register(cls, func)

    dispatcher.register = register  # type: ignore[method-assign]  # the guarded register replaces the library's
    return dispatcher


class singledispatchmethod:  # noqa: N801 (the name user code imports)
    """``functools.singledispatchmethod`` over the guarded ``singledispatch``.

    Written out rather than subclassed: a subclass would hand the library class to user
    code through ``mro()``, and with it the unguarded ``register``.
    """

    def __init__(self, func: Callable[..., Any]) -> None:
        if not callable(func) and not hasattr(func, "__get__"):
            raise TypeError(f"{func!r} is not callable or a descriptor")
        self.dispatcher = singledispatch(func)
        self.func = func

    def register(self, cls: Any, method: Callable[..., Any] | None = None) -> Any:
        return self.dispatcher.register(cls, func=method)  # type: ignore[attr-defined]

    def __get__(self, obj: Any, cls: Any = None) -> Callable[..., Any]:
        dispatch = self.dispatcher.dispatch  # type: ignore[attr-defined]
        func = self.func

        def method(*args: Any, **kwargs: Any) -> Any:
            if not args:
                raise TypeError("a singledispatchmethod needs at least one positional argument")
            return dispatch(args[0].__class__).__get__(obj, cls)(*args, **kwargs)

        method.__doc__ = getattr(func, "__doc__", None)
        method.register = self.register  # type: ignore[attr-defined]
        return method


_WRAPPERS: dict[tuple[str, str], Any] = {
    ("functools", "singledispatch"): singledispatch,
    ("functools", "singledispatchmethod"): singledispatchmethod,
}


# -------------------------------------------------------------------------- views

_views: dict[str, types.ModuleType] = {}


def view(module_name: str, denied: frozenset[tuple[str, str]] = frozenset()) -> types.ModuleType:
    """The module as user code sees it: only its allowed and wrapped names.

    ``denied`` holds a policy's own ``module.attribute`` refusals, applied on top.
    """
    key = module_name if not denied else f"{module_name}|{sorted(denied)}"
    cached = _views.get(key)
    if cached is not None:
        return cached
    real = importlib.import_module(module_name)
    table = REVIEWED[module_name]
    facade = types.ModuleType(module_name, getattr(real, "__doc__", None))
    for name, verdict in table.items():
        if (module_name, name) in denied or not hasattr(real, name):
            continue
        if verdict == ALLOW:
            setattr(facade, name, getattr(real, name))
        elif verdict == WRAP:
            setattr(facade, name, _WRAPPERS[(module_name, name)])
    _views[key] = facade
    return facade
