"""The rules of what a registered context is called: ids, ``ctx:ID`` references, names, tags.

An id is ``[a-z0-9][a-z0-9_.-]{0,63}``: stable, safe in a URL, a shell word and a file name.
One not given is derived from the name (``slug``) and made unique with ``-2``, ``-3``...
Names and tags are length-capped and one line, so a listing stays linear in what it prints
whoever wrote them. Every check is linear in its input, and its input is capped first.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

from rlm_runtime.errors import RegistryError

#: How a registered context is named wherever a context is accepted: ``ctx:ID``.
REF_PREFIX = "ctx:"
ID_PATTERN = re.compile(r"[a-z0-9][a-z0-9_.-]{0,63}")
ID_RULE = "[a-z0-9][a-z0-9_.-]{0,63}"
#: Characters of a derived id before a ``-N`` suffix.
SLUG_CHARS = 40
MAX_NAME_CHARS = 200
MAX_TAG_CHARS = 64
MAX_TAGS = 32
#: Ids a context may not take: the words the REST API uses beside ids (``/api/context/stats``).
RESERVED = frozenset({"stats", "search", "register"})
#: The kinds of context a registry holds (nothing fetched from a network).
KINDS = ("file", "folder", "text", "memory")
_TAG = re.compile(r"[^\s,]{1,64}")


def shown(text: object, limit: int = 80) -> str:
    """``text`` for a message, cut: an id or a name someone typed can be megabytes long."""
    text = str(text)
    return repr(text) if len(text) <= limit else repr(text[:limit]) + f"... ({len(text):,} characters)"


def is_ref(source: object) -> bool:
    """True when ``source`` is a ``ctx:ID`` string."""
    return isinstance(source, str) and source.startswith(REF_PREFIX)


def ref_id(ref_or_id: str) -> str:
    """The id of ``ctx:ID`` (or of a bare id), unchecked."""
    return ref_or_id.removeprefix(REF_PREFIX)


def valid_id(text: str) -> bool:
    return len(text) <= 64 and ID_PATTERN.fullmatch(text) is not None


def check_id(text: str) -> str:
    """``text`` if it is a valid id.

    Raises:
        RegistryError: it is not (the message states the rule).
    """
    if not isinstance(text, str) or not valid_id(text):
        raise RegistryError(f"not a valid context id: {shown(text)} (an id is {ID_RULE})")
    if text in RESERVED:
        raise RegistryError(f"{text!r} is reserved (the REST API's /api/context/{text}): choose another id")
    return text


def slug(name: str) -> str:
    """An id derived from ``name``: lower case ASCII, runs of other characters made ``-``."""
    text = unicodedata.normalize("NFKD", name[:MAX_NAME_CHARS]).encode("ascii", "ignore").decode("ascii").lower()
    text = re.sub(r"[^a-z0-9_.-]+", "-", text).strip("-_.")
    text = text[:SLUG_CHARS].rstrip("-_.")
    return text or "ctx"


def unique(base: str, taken: Iterable[str]) -> str:
    """``base``, or ``base-N`` with the smallest N >= 2 that is not ``taken``."""
    used = set(taken) | RESERVED
    if base not in used:
        return base
    n = 2
    while f"{base}-{n}" in used:  # at most len(used) steps
        n += 1
    return f"{base}-{n}"


def check_name(name: str) -> str:
    """``name`` stripped, if it is one line of 1 to ``MAX_NAME_CHARS`` characters.

    Raises:
        RegistryError: empty, too long, or holding a control character.
    """
    if not isinstance(name, str):
        raise RegistryError("a context name must be text")
    name = name.strip()
    if not name:
        raise RegistryError("a context name must not be empty")
    if len(name) > MAX_NAME_CHARS:
        raise RegistryError(f"a context name of {len(name):,} characters (at most {MAX_NAME_CHARS})")
    if any(unicodedata.category(c) in ("Cc", "Cs") for c in name):
        raise RegistryError(f"a context name holds a control character or a lone surrogate: {shown(name)}")
    return name


def check_tags(tags: Iterable[str]) -> tuple[str, ...]:
    """``tags`` without repeats, in order, each 1 to ``MAX_TAG_CHARS`` characters without
    spaces or commas, at most ``MAX_TAGS`` of them.

    Raises:
        RegistryError: a tag breaks the rule, or there are too many.
    """
    out: dict[str, None] = {}
    for tag in tags:
        if not isinstance(tag, str) or _TAG.fullmatch(tag) is None or any(unicodedata.category(c) in ("Cc", "Cs") for c in tag):
            raise RegistryError(f"not a valid tag: {shown(tag)} (1 to {MAX_TAG_CHARS} characters, no spaces or commas)")
        out[tag] = None
        if len(out) > MAX_TAGS:
            raise RegistryError(f"more than {MAX_TAGS} tags")
    return tuple(out)


def check_kind(kind: str) -> str:
    if kind not in KINDS:
        raise RegistryError(f"not a context kind: {shown(kind)} (one of {', '.join(KINDS)})")
    return kind
