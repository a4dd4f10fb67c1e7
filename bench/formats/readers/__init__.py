"""The formats of the benchmark: every module here holds a ``FORMATS`` list (``model.Format``).

A reader is the benchmark's own reference parse of one real format. The runtime never
imports it, and nothing in the runtime (prompts, notes, readers, tests) may name a format,
an entity or a template of these files.
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

from model import Format

FORMATS: list[Format] = []
for _info in sorted(pkgutil.iter_modules([str(Path(__file__).parent)]), key=lambda m: m.name):
    if not _info.name.startswith("_"):
        FORMATS.extend(importlib.import_module(f"readers.{_info.name}").FORMATS)
_names = [f.name for f in FORMATS]
assert len(_names) == len(set(_names)), "two formats share a name"
