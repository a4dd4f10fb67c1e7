"""JSON from files someone else wrote, parsed with bounds: the one strict reader.

Eval task and results files and memory exports may come from anyone. Python's ``json``
accepts what later breaks the program: ``NaN``, ``Infinity`` and ``1e999`` (they poison
sums and comparisons), integers of thousands of digits (parsing them is quadratic), nesting
deep enough to exhaust the recursion limit in a later ``json.dumps`` or hash, and strings
holding an unpaired surrogate (they fail when written again). ``loads`` refuses all of them
with a ``ValueError`` whose message says which; every check is linear in the text. ``dumps``
is the writer's side: a value read from a file someone else wrote (a store's time of 9e999,
which SQLite reads as an infinity) is written as null, never as ``Infinity``, which no
strict reader takes.
"""

from __future__ import annotations

import json
import math
from typing import Any


def loads(text: str, *, max_depth: int, max_int_digits: int, strings: bool = True) -> Any:
    """The JSON value of ``text``, checked.

    Args:
        max_depth: arrays and objects nest at most this deep.
        max_int_digits: digits of an integer, at most.
        strings: also refuse a string or key holding an unpaired surrogate.

    Raises:
        ValueError: the text is not JSON, or breaks a bound; the message says which.
    """

    def integer(digits: str) -> int:
        if len(digits.lstrip("-")) > max_int_digits:
            raise ValueError(f"an integer of {len(digits.lstrip('-'))} digits (at most {max_int_digits})")
        return int(digits)

    try:
        value = json.loads(text, parse_constant=_constant, parse_float=_float, parse_int=integer)
    except json.JSONDecodeError as e:
        raise ValueError(f"not JSON: {e.msg} at column {e.colno}") from None
    except RecursionError:
        raise ValueError(f"nested too deeply (more than {max_depth} levels)") from None
    _check(value, max_depth, strings)
    return value


def dumps(value: Any, **kwargs: Any) -> str:
    """``json.dumps(value, **kwargs)`` as standard JSON: a float that is not finite is null."""
    try:
        return json.dumps(value, allow_nan=False, **kwargs)
    except ValueError:  # an infinity somewhere: the rare case pays for the walk
        return json.dumps(_finite(value), allow_nan=False, **kwargs)


def _finite(value: Any) -> Any:
    """``value`` with every float that is not finite made None (lists and dicts copied)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value


def nests_deeper(value: Any, limit: int) -> bool:
    """Whether ``value`` nests lists and objects more than ``limit`` deep (iteratively: no
    recursion for a hostile value to exhaust)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (list, dict)):
            if depth > limit:
                return True
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return False


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:30]} is out of range")
    return value


def _check(value: Any, max_depth: int, strings: bool) -> None:
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            if strings:
                _encodable(item)
        elif isinstance(item, (list, dict)):
            if depth > max_depth:
                raise ValueError(f"nested too deeply (more than {max_depth} levels)")
            if isinstance(item, dict):
                for key, child in item.items():
                    if strings:
                        _encodable(key)
                    stack.append((child, depth + 1))
            else:
                stack.extend((child, depth + 1) for child in item)


def _encodable(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(f"a string holds an unpaired surrogate (\\u{ord(text[e.start]):04x})") from None


__all__ = ["dumps", "loads", "nests_deeper"]
