"""Source code read as records: one record a definition.

A question over a source file asks about its definitions: what a function takes or returns,
which class a method is in, which functions call another, how many do. ``records()`` over
code gives one record a definition (a function, class, method, struct, interface, type),
with the fields

* ``name``: the defined name (the records' first field: ``find("parse")[0]`` is its record);
* ``kind``: the keyword that defined it (``def``, ``class``, ``function``, ``func``, ``fn``,
  ``struct``, ``interface``, ``trait``, ``impl``, ``type``);
* ``in``: the class (or other definition) it is nested in, by indentation; absent at the top;
* ``params``: the text between the parentheses of its first line (absent without them);
* ``returns``: what follows ``->`` on its first line (Python, Rust), when there is one;
* ``doc``: the first line of its docstring or of the comment right under it;
* ``calls``: the names it calls (a name before ``(``), in order, each once, keywords left out;
* ``text``: its lines up to the next definition, as written.

The lines before the first definition (imports, a module docstring) belong to no record
(grep reads them). A method declared without a keyword (``foo() {`` in a JavaScript class)
is not a definition here: it stays in its class's ``text``. Nothing is executed or
imported: each line is matched by patterns bounded by the line, so parsing is linear in the
text.

``looks_like_code`` decides from a sample of lines: at least ``MIN_DEFINITIONS`` definition
lines, and at least ``CODE_SHARE`` of the lines shaped as code (indented, or ending in
punctuation code ends lines with, or starting as comments, decorators and imports do).
Prose that shows a few definitions (a tutorial) fails the second test and keeps its shape.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

#: The fields a definition's record may have, in order.
FIELDS = ("name", "kind", "in", "params", "returns", "doc", "calls", "text")
#: Definition lines a sample needs to read as code, and the share of its lines shaped as code.
MIN_DEFINITIONS = 3
CODE_SHARE = 0.7
#: The most characters of a definition's line read for its parts, of a ``text`` kept, and names
#: of ``calls`` kept.
LINE_CHARS = 2_000
TEXT_CHARS = 20_000
MOST_CALLS = 50

_MODIFIERS = r"(?:(?:export|pub(?:\([\w:]+\))?|public|private|protected|internal|static|abstract|final|async|default|unsafe|extern)\s+)*"
DEFINITION = re.compile(
    r"^(?P<indent>[ \t]*)" + _MODIFIERS
    + r"(?P<kind>def|class|function|func|fn|struct|interface|trait|impl|type|enum)\s+"
    r"(?:\([^)]{0,200}\)\s*)?"  # a Go method's receiver: func (s *Server) Serve(
    r"(?P<name>[A-Za-z_$][\w$]{0,200})")
_PARAMS = re.compile(r"\(([^()]{0,1000})\)")
_RETURNS = re.compile(r"\)\s*->\s*([^:{]{1,200})")
_CALL = re.compile(r"(?<![\w$.])(?:[\w$]+\.)*([A-Za-z_$][\w$]{0,100})\s*\(")
_CODE_END = tuple(":{};,)([]=")
_CODE_START = ("#", "//", "/*", "@", "import ", "from ", "package ", "use ", "return", "}", "<?")
_KEYWORDS = frozenset("""if elif else for while with return yield def class function func fn struct interface
trait impl type enum switch case catch try except raise throw new await async lambda not and or in is print super self
this sizeof typeof match let var const assert del""".split())
_NESTING = frozenset({"class", "struct", "interface", "trait", "impl", "enum", "def", "function", "func", "fn"})


def _definition(line: str) -> re.Match[str] | None:
    return DEFINITION.match(line[:LINE_CHARS])


def _code_shaped(line: str) -> bool:
    stripped = line.strip()
    return (line[:1] in " \t" or stripped.endswith(_CODE_END) or stripped.startswith(_CODE_START)
            or _definition(line) is not None)


def looks_like_code(sample: Sequence[str]) -> bool:
    """Whether the non-blank lines of ``sample`` read as source code (see the module docstring)."""
    lines = [line for line in sample if line.strip()]
    if len(lines) < MIN_DEFINITIONS:
        return False
    definitions = sum(_definition(line) is not None for line in lines)
    return definitions >= MIN_DEFINITIONS and sum(map(_code_shaped, lines)) >= CODE_SHARE * len(lines)


def _width(indent: str) -> int:
    return len(indent.expandtabs(4))


def _doc(body: list[str]) -> str | None:
    """The first line of a docstring or comment that opens ``body`` (the lines after the definition's)."""
    for line in body[:3]:
        stripped = line.strip()
        if not stripped:
            continue
        for mark in ('"""', "'''", "///", "//", "#", "/**", "/*", "*"):
            if stripped.startswith(mark):
                said = stripped[len(mark):].strip().strip("\"'*/").strip()
                return said[:LINE_CHARS] or None
        return None
    return None


def _calls(lines: list[str], own: str) -> list[str]:
    seen: dict[str, None] = {}
    for line in lines:
        for name in _CALL.findall(line[:LINE_CHARS]):
            if name not in _KEYWORDS and name != own and len(seen) < MOST_CALLS:
                seen.setdefault(name, None)
    return list(seen)


def _record(match: re.Match[str], lines: list[str], nested_in: str | None) -> list[tuple[str, object]]:
    head = lines[0][:LINE_CHARS]
    fields: list[tuple[str, object]] = [("name", match.group("name")), ("kind", match.group("kind"))]
    if nested_in:
        fields.append(("in", nested_in))
    after_name = head[match.end("name"):]
    params = _PARAMS.search(after_name)
    if params is not None:
        fields.append(("params", " ".join(params.group(1).split())))
    returns = _RETURNS.search(after_name)
    if returns is not None:
        fields.append(("returns", returns.group(1).strip()))
    doc = _doc(lines[1:])
    if doc:
        fields.append(("doc", doc))
    fields.append(("calls", _calls(lines[1:], match.group("name"))))
    fields.append(("text", "\n".join(lines).rstrip()[:TEXT_CHARS]))
    return fields


def parse(lines: Sequence[str]) -> Iterator[tuple[int, list[tuple[str, object]]]]:
    """(first line, fields) of each definition of ``lines`` (1-based line numbers)."""
    starts = [(k, m) for k, line in enumerate(lines) if (m := _definition(line)) is not None]
    # The definitions open around each one, by indentation: (width, name, kind).
    stack: list[tuple[int, str, str]] = []
    for i, (k, match) in enumerate(starts):
        end = starts[i + 1][0] if i + 1 < len(starts) else len(lines)
        width = _width(match.group("indent"))
        while stack and stack[-1][0] >= width:
            stack.pop()
        nested_in = stack[-1][1] if stack and stack[-1][2] in _NESTING else None
        yield 1 + k, _record(match, list(lines[k:end]), nested_in)
        stack.append((width, match.group("name"), match.group("kind")))
