"""Forms: a line form someone states, applied as a found structure is.

The model (or a question quoting the text's format) may say what a line holds: a template
such as ``'ID - TITLE (GROUP)'`` (upper-case words or ``{name}`` placeholders are fields,
everything else is literal, any run of spaces matching any run) or a regular expression with
named groups. Either becomes one RE2 pattern, run on each line's UTF-8 bytes: RE2 is linear
in the line whatever the pattern, so a hostile pattern costs time proportional to the text,
and its size and memory are bounded. The structure it gives has the same records, field
names from the template's words (or the groups' names) and a coverage figure, as
``structure.discover``'s do.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import re2

from rlm_runtime.context import structure as _structure
from rlm_runtime.errors import ContextError

#: Characters of a stated template or pattern, at most.
MAX_PATTERN = 1000
#: Bytes of memory RE2 may use for one pattern.
MAX_MEM = 8 << 20
#: Fields of one stated form, at most.
MAX_GROUPS = 40

# A template's field: {name}, or a word of capitals (two characters or more: "A" is a letter).
_PLACEHOLDER = re.compile(r"\{([^{}\s]{1,40})\}|\b([A-Z][A-Z0-9_]+)\b")


class Stated:
    """A stated line form: the compiled pattern and its fields in order."""

    def __init__(self, regex: re2._Regexp, names: dict[str, str], said: str) -> None:
        self._regex = regex
        index = {(g.decode() if isinstance(g, bytes) else g): i for g, i in regex.groupindex.items()}
        self._names = {index[g]: name for g, name in names.items()}  # group number -> field name
        self.fields = tuple(dict.fromkeys(names.values()))
        self.said = said

    def read(self, line: str) -> list[tuple[str, str]] | None:
        """The fields of ``line``, or None when the form does not match it."""
        m = self._regex.search(line.encode("utf-8", "replace"))
        if m is None:
            return None
        out = []
        for group, name in self._names.items():
            value = m.group(group)
            if value is not None:
                out.append((name, value.decode("utf-8", "replace").strip()))
        return out


def _compile(pattern: str) -> re2._Regexp:
    if not isinstance(pattern, str) or not pattern.strip():
        raise ContextError("records(): a template or pattern is a non-empty string")
    if len(pattern) > MAX_PATTERN:
        raise ContextError(f"records(): the pattern has {len(pattern)} characters; the limit is {MAX_PATTERN}")
    options = re2.Options()
    options.log_errors = False
    options.max_mem = MAX_MEM
    options.never_nl = True
    try:
        return re2.compile(pattern.encode("utf-8", "replace"), options)
    except re2.error as e:
        detail = e.args[0].decode("utf-8", "replace") if e.args and isinstance(e.args[0], bytes) else str(e)
        raise ContextError(f"records(): the pattern cannot be used ({detail}); RE2 has no look-around or "
                           "back-references") from e


def _group(name: str, used: set[str]) -> str:
    base = re.sub(r"\W", "_", name.lower(), flags=re.ASCII).strip("_") or "field"
    base = base if base[0].isalpha() else f"f_{base}"
    group, k = base, 1
    while group in used:
        k += 1
        group = f"{base}_{k}"
    used.add(group)
    return group


def from_template(template: str) -> Stated:
    """The form of a template: its upper-case words and ``{name}`` placeholders are fields
    (named by their words in lower case), the rest literal. Raises ContextError when it names
    no field."""
    if not isinstance(template, str) or len(template) > MAX_PATTERN:
        raise ContextError(f"records(template=...): a string of at most {MAX_PATTERN} characters")
    parts: list[str] = []
    names: dict[str, str] = {}
    used: set[str] = set()
    end = 0
    found = list(_PLACEHOLDER.finditer(template.strip()))
    text = template.strip()
    for i, m in enumerate(found):
        parts.append(_literal(text[end:m.start()]))
        word = m.group(1) or m.group(2)
        group = _group(word, used)
        names[group] = _structure.field_name(word)
        last = i == len(found) - 1 and not text[m.end():].strip()
        parts.append(f"(?P<{group}>.+)" if last else f"(?P<{group}>.+?)")
        end = m.end()
    parts.append(_literal(text[end:]))
    if not names:
        raise ContextError(f"records(template={template!r}): no field in it; write fields as capital words or "
                           "{name}, e.g. 'ID - TITLE (GROUP)'")
    if len(names) > MAX_GROUPS:
        raise ContextError(f"records(template=...): {len(names)} fields; at most {MAX_GROUPS}")
    return Stated(_compile(r"^\s*" + "".join(parts) + r"\s*$"), names, template)


def _literal(text: str) -> str:
    return r"\s+".join(re2.escape(piece) for piece in re.split(r"\s+", text)) if text.strip() else (
        r"\s*" if text else "")


def from_pattern(pattern: str) -> Stated:
    """The form of a regular expression with named groups (RE2 syntax), its groups the fields."""
    regex = _compile(pattern)
    groups = sorted(regex.groupindex.items(), key=lambda kv: kv[1])
    if not groups:
        raise ContextError("records(pattern=...): the pattern needs named groups, (?P<name>...), one a field")
    if len(groups) > MAX_GROUPS:
        raise ContextError(f"records(pattern=...): {len(groups)} named groups; at most {MAX_GROUPS}")
    names = {}
    for group, _ in groups:
        g = group.decode("utf-8", "replace") if isinstance(group, bytes) else group
        names[g] = _structure.field_name(g)
    return Stated(regex, names, pattern)


def apply(lines: Sequence[str], stated: Stated) -> _structure.Structure:
    """The structure ``stated`` gives ``lines``: its coverage is the share of the non-blank,
    non-comment lines it reads (said even when under the gate: the form was asked for)."""
    body = _structure.content(lines, _structure.comment_marker(lines))
    if not body:
        return _structure.Structure("stated", 0.0, stated.fields, stated=stated, reason="the text has no lines")
    read = 0
    examples: dict[str, str] = {}
    for _, line in body:
        got = stated.read(line)
        if got is not None:
            read += 1
            for name, value in got:
                examples.setdefault(name, value)
    coverage = read / len(body)
    reason = "" if coverage >= _structure.GATE else (f"the form {stated.said!r} reads {coverage:.0%} of the lines, under "
                                                      f"the {_structure.GATE:.0%} of a structure")
    return _structure.Structure("stated", coverage, stated.fields, tuple(examples.get(f, "") for f in stated.fields),
                                comment=_structure.comment_marker(lines), stated=stated, reason=reason)
