"""The values of a registry row read back from ``registry.db``: each what this version writes.

SQLite checks no value's type or range on a read, so a registry file someone else wrote (or
edited with ``sqlite3``) can hold text or a blob where a time or a count goes, NULL in a NOT
NULL column, a negative or float size, or metadata that is not JSON, or not the probe's.
``Registry`` read them with ``float()``, ``int()`` and ``json.loads``, and ``rlm context
list|show|stats`` stopped with an internal error. Each row is checked here as it is read, and
the first value that is not what this version writes is named (``"contexts.created: not a
time"``): ``Registry`` calls the context *damaged* (``DamagedContext``), leaves it out of a
list with a one-line warning naming its id, and refuses it by id with the same words;
``rlm context rm ID`` still removes it. The memory store checks its values at open instead
(``memory/value_check.py``): a registry is one file of many users' contexts, and one bad row
should cost that row, not the rest.
"""

from __future__ import annotations

import json
from typing import Any

from rlm_runtime import timestamps
from rlm_runtime.errors import RegistryError
from rlm_runtime.registry import ids, metadata

#: A run id's longest length (what ``Registry.record_run`` accepts).
MAX_RUN_ID = 128


def is_count(value: object) -> bool:
    """An int from 0 (not a bool, not a float)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def context_problem(row: tuple[Any, ...]) -> str | None:
    """What is wrong with a ``contexts`` row ``(id, name, kind, source, meta, created,
    refreshed)``, or None; ``meta_of`` reads its metadata."""
    key, name, kind, source, _meta, created, refreshed = row
    if not isinstance(key, str) or not ids.valid_id(key):
        return "contexts.id: not an id"
    if not isinstance(name, str) or not _is_name(name):
        return "contexts.name: not a name"
    if kind not in ids.KINDS:
        return "contexts.kind: not a kind"
    if (source is not None) if kind == "text" else (not isinstance(source, str) or not source):
        return "contexts.source: not a path" if kind != "text" else "contexts.source: a path for a text"
    for column, value in (("created", created), ("refreshed", refreshed)):
        if timestamps.valid(value) is None:
            return f"contexts.{column}: not a time"
    return None


def _is_name(name: str) -> bool:
    try:
        return ids.check_name(name) == name
    except RegistryError:
        return False


def meta_of(text: object) -> tuple[dict[str, Any], str | None]:
    """A context's metadata (``contexts.meta``) as the probe's keys (``metadata.META_FIELDS``;
    a key this version does not know is left out), and what is wrong with it, or None."""
    if not isinstance(text, str):
        return {}, "contexts.meta: not JSON text"
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return {}, "contexts.meta: not JSON"
    if not isinstance(value, dict):
        return {}, "contexts.meta: not a JSON object"
    problem = metadata.meta_problem(value)
    if problem is not None:
        return {}, f"contexts.meta: {problem}"
    return {k: v for k, v in value.items() if k in metadata.META_FIELDS}, None


def usage_problem(row: tuple[Any, ...]) -> str | None:
    """What is wrong with a ``context_usage`` row ``(peeks, greps, chunks, loads, searches,
    last_access)``, or None."""
    for op, value in zip(("peeks", "greps", "chunks", "loads", "searches"), row[:5], strict=True):
        if not is_count(value):
            return f"context_usage.{op}: not a count"
    if row[5] is not None and timestamps.valid(row[5]) is None:
        return "context_usage.last_access: not a time"
    return None


def tag_problem(tag: object) -> str | None:
    try:
        ids.check_tags([tag])  # type: ignore[list-item]  # what the file holds is checked, whatever it is
    except RegistryError:
        return "context_tags.tag: not a tag"
    return None


def run_problem(run_id: object) -> str | None:
    if not isinstance(run_id, str) or not 0 < len(run_id) <= MAX_RUN_ID:
        return "context_runs.run_id: not a run id"
    return None


def text_problem(text: object) -> str | None:
    return None if isinstance(text, str) else "context_texts.text: not a text"


__all__ = ["MAX_RUN_ID", "context_problem", "is_count", "meta_of", "run_problem", "tag_problem", "text_problem",
           "usage_problem"]
