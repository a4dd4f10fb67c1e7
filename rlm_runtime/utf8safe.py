"""Strings that UTF-8 can encode, for what writes them out: ``utf8safe``.

A Python ``str`` may hold lone surrogates, which are not text: a file name that is not UTF-8
(Python decodes it with ``surrogateescape``: a folder's listing, a grep's document), a string
a model's code built and handed to ``FINAL``. The runtime carries them through (the worker
protocol passes them, the CLI shows them escaped: ``termsafe``), but JSON encoders and SQLite
refuse them. What answers a server's client (``serve``) and what the memory store writes pass
through ``utf8safe``, which puts U+FFFD, the replacement character, in place of each one, as
the store already does for a file's bytes that are not UTF-8.
"""

from __future__ import annotations

import re
from typing import Any

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
REPLACEMENT = "\ufffd"


def utf8safe(value: Any) -> Any:
    """``value`` with U+FFFD in place of each lone surrogate of its strings, those of its
    dicts (keys too), lists and tuples (rebuilt) included; other values as they are."""
    if isinstance(value, str):
        return value if value.isascii() else _LONE_SURROGATE.sub(REPLACEMENT, value)
    if isinstance(value, dict):
        return {utf8safe(k): utf8safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [utf8safe(v) for v in value]
    if isinstance(value, tuple):
        return tuple(utf8safe(v) for v in value)
    return value


def is_utf8(text: str) -> bool:
    """Whether ``text`` holds no lone surrogate (UTF-8 can encode it)."""
    return text.isascii() or _LONE_SURROGATE.search(text) is None
