"""Red team of the packed corpus (a corpus's in-memory texts cross into the worker in one
memfd, each document a SliceHandle window over it), of the redaction of host-function
values, and of the policy's nesting limit. A document must never read outside its window."""

from __future__ import annotations

import base64
from collections.abc import Iterator

import pytest

from rlm_runtime.context import open_context
from rlm_runtime.context.buffer import TextBuffer
from rlm_runtime.context.corpus import CorpusHandle
from rlm_runtime.sandbox import CellLimits, Sandbox

LEFT, RIGHT = "LEFTMARK-QX7", "RIGHTMARK-ZP9"
#: doc 1 has multi-byte characters at both edges; doc 2 is empty; its neighbours hold markers.
DOCS = [f"{LEFT} left doc é\n", "é middle €\nline2 ü", "", f"€{RIGHT} right doc\n"]
LIMITS = CellLimits(cell_timeout_s=5, kill_grace_s=0.5, memory_mb=256)


def _corpus(texts: list[str]) -> CorpusHandle:
    return CorpusHandle.from_items([open_context(t, as_text=True, name=f"d{i}") for i, t in enumerate(texts)])


@pytest.fixture(scope="module")
def packed() -> Iterator[Sandbox]:
    with Sandbox("default", LIMITS, contexts=[_corpus(DOCS)]) as sb:
        yield sb


def _clean(sb: Sandbox, code: str) -> str:
    """Run ``code`` on doc 1 (``h``, its buffer ``b``) and return what it printed; no neighbour's byte shows."""
    r = sb.execute("d = context.documents[1]\nh = d.handle\nwith d.read() as b:\n    pass\n" + code)
    text = f"{r.stdout}\n{r.error}"
    for mark in (LEFT, RIGHT, "LEFTMARK", "RIGHTMARK", "left doc", "right doc"):
        assert mark not in text, (code, text)
    assert "Traceback (most recent call last)" not in (r.error or ""), r.error
    return r.stdout


SLICE_READS = [
    "print(repr(h[-10**18:10**18]))", "print(repr(h[-1]), repr(h[0]))", "print(h[10**18:])",
    "print(h[::-1])", "print(h[::2])", "print(h[len(h)])", "print(h[-len(h)-1])",
    "print(h.peek(10**9))", "print(h.peek(-5))", "print(h.lines(-100, 100))", "print(h.lines(0, 3))",
    "print(h.lines(10**9))", "print(list(h))", "print(len(h), h.n_bytes, h.n_lines)",
    "print(h.chunk(0, 10**9, 'chars'))", "print(h.chunk(-1))", "print(h.chunk(10**6))", "print(h.chunk(0, 1, 'tokens'))",
    "print([c for c in h.chunks(1, 'chars')])", "print(h.grep('.', context_lines=50))", "print(h.grep('^', context_lines=50))",
    "print(h.grep('$'))", "print(h.grep('K'), h.count('K'), h.grep('MARK'))", "print(h.get_full())", "print(h.probe())",
    "print(h.n_tokens)", "print(h.grep('.').tally(r'(.)'))",
]


@pytest.mark.parametrize("code", SLICE_READS)
def test_slice_handle_reads_stay_in_window(packed: Sandbox, code: str) -> None:
    """It keeps every read of a SliceHandle (odd indices, steps, offsets, iteration, grep context) inside its window."""
    _clean(packed, code)


def test_full_text_round_trips_with_multibyte_edges(packed: Sandbox) -> None:
    """It gives back a document with multi-byte characters at both edges exactly, character for character."""
    out = _clean(packed, "print(ascii(h.get_full()), ascii(h[0] + h[-1]), len(h), sep='|')")
    assert out.strip().split('|') == [ascii(DOCS[1]), ascii(DOCS[1][0] + DOCS[1][-1]), str(len(DOCS[1]))]


def test_empty_document_reads_nothing(packed: Sandbox) -> None:
    """It reads nothing from an empty document packed between two others, by every reader."""
    r = packed.execute("e = context.documents[2].handle\nprint(repr(e.peek(100)), repr(e[-5:99]), e.lines(), list(e), "
                       "e.grep('.'), e.count('.'), repr(e.get_full()), e.n_bytes)\nprint(e[0])")
    assert "MARK" not in r.stdout + str(r.error) and "IndexError" in str(r.error), r


BUFFER_READS = [
    "print(b.find(b'LEFT', -1000), b.find(b'RIGHT', 0, 10**6), b.find(b'RIGHT', 10**6))",
    "print(b.rfind(b'\\n', -1000, 5), b.rfind(b'LEFT', -100, 0), b.rfind(b'RIGHT', 0, 10**6))",
    "print(b.count(b'M', -100, 100), b.count(b'K', -10**6, 10**6))",
    "print(b.line_span(-30), b.line_span(10**6))",
    "print(b.head_bytes(10**6), b.decode(-100, 10**6), b.slice(-100, 10**6), b.lines(-5, 99))",
    "print(b.byte_offset(-5), b.byte_offset(10**6), b.line_start(-3), b.line_start(10**6), b.line_of(-100))",
    "print(list(b.iter_lines()))",
    "v = b.view\nprint(bytes(v), v.tobytes(), v.nbytes, len(v))",
    "print(b.view.obj)",
    "print(b.view.obj[0:10**6])",
    "b.view.release()",
    "b.release()",
    "b.nbytes = 10**6",
    "print(b.view[-1000:10**6].tobytes())",
    "print(b.view.cast('B')[0:10**6].tobytes())",
]


@pytest.mark.parametrize("code", BUFFER_READS)
def test_document_buffer_stays_in_window(packed: Sandbox, code: str) -> None:
    """It keeps the TextBuffer Document.read() hands out (find/rfind/count offsets, its view, the mmap behind) inside its window."""
    _clean(packed, code)
    assert "middle" in _clean(packed, "print(h.peek())")  # nothing user code did released the window


def test_mmap_behind_a_window_is_not_reachable(packed: Sandbox) -> None:
    """It refuses the memoryview's .obj (the shared mapping of every document) and .release()."""
    for code in ("print(b.view.obj)", "b.view.release()", "b.release()"):
        r = packed.execute("with context.documents[1].read() as b:\n    pass\n" + code)
        assert r.error and "SandboxPermissionError" in r.error, (code, r)


def test_find_clamps_to_the_window_on_the_host() -> None:
    """It clamps TextBuffer.find/rfind/count to the window, whatever the offsets, over bytes and slices."""
    data = b"AAAA|mid\nle|BBBB"
    buf = TextBuffer(data, 5, 6)
    assert buf.find(b"A", -100) == -1 and buf.find(b"B", 0, 10**6) == -1 and buf.find(b"B", 10**6) == -1
    assert buf.rfind(b"A", -100, 3) == -1 and buf.rfind(b"|", -100, 100) == -1
    assert buf.count(b"A", -100, 100) == 0 and buf.count(b"\n", 0, 100) == 1 and buf.count(b"e", 0, 6) == 1
    assert buf.find(b"\n") == 3 and buf.rfind(b"m", 0, 6) == 0


def test_thousands_of_documents_each_in_its_own_window() -> None:
    """It packs 3,000 documents (some empty, some multi-byte) and every one reads back only itself."""
    texts = [("" if i % 7 == 0 else f"doc{i}:é{i}€\n") for i in range(3000)]
    with Sandbox("default", LIMITS, contexts=[_corpus(texts)]) as sb:
        r = sb.execute("bad = []\nfor i, d in enumerate(context.documents):\n"
                       "    t = d.handle.get_full()\n"
                       "    want = '' if i % 7 == 0 else 'doc%d:é%d€\\n' % (i, i)\n"
                       "    if t != want or d.handle[-10**9:10**9] != want:\n        bad.append(i)\n"
                       "print(len(bad), len(context.documents), context.count('doc'))")
        assert r.error is None and r.stdout.split() == ["0", "3000", str(sum(1 for t in texts if t))], r


def test_host_secret_in_tool_value_is_redacted(secret: dict[str, str]) -> None:
    """It redacts a host env secret a host function returns: as a value, nested, as a dict key, inside text, and in its error."""
    value = secret["value"]

    def leak() -> object:
        return {"plain": value, "nested": [value, {"k": f"x={value}"}], value: 1, f"key:{value}": [value]}

    def boom() -> None:
        raise RuntimeError(f"failed with key {value}")

    with Sandbox("default", LIMITS, host_functions={"leak": leak, "boom": boom}) as sb:
        r = sb.execute("v = leak()\nprint(v)\nprint(list(v))\nprint(''.join(reversed(str(v))))")
        assert r.error is None and value not in r.stdout and value[::-1] not in r.stdout, r
        r = sb.execute("boom()")
        assert value not in f"{r.stdout}{r.error}", r


def test_host_secret_encoded_by_the_tool_is_redacted(secret: dict[str, str]) -> None:
    """It redacts a secret the host function returns base64-encoded (its last group may remain: a byte or two, not the key)."""
    value = secret["value"]
    with Sandbox("default", LIMITS, host_functions={"enc": lambda: base64.b64encode(value.encode()).decode()}) as sb:
        r = sb.execute("print(enc())")
    assert r.error is None and base64.b64encode(value.encode()).decode() not in r.stdout and "[REDACTED]" in r.stdout, r


NEST = 40


@pytest.mark.parametrize("shape", ["lambda", "listcomp", "fstring", "decorator", "attr", "call", "subscript", "parens", "dict"])
@pytest.mark.parametrize("depth", [10, 90, 200, 1000, 5000])
def test_policy_nesting_is_checked_or_refused(packed: Sandbox, shape: str, depth: int) -> None:
    """It either runs nested code or refuses it as too deep, never a traceback or a hang, at depths around its limit."""
    src = {
        "lambda": "f = " + "lambda: " * depth + "1\nprint('ok')",
        "listcomp": "x = " + "[" * depth + "1" + " for _ in [0]]" * depth + "\nprint('ok')",
        "fstring": "x = " + "f'{" * min(depth, 200) + "1" + "}'" * min(depth, 200) + "\nprint('ok')",
        "decorator": "".join(f"{' ' * 0}@(lambda f: f)\n" for _ in range(depth)) + "def g():\n    return 1\nprint('ok')",
        "attr": "x = str" + ".upper" * depth + "\nprint('ok')",
        "call": "x = " + "str(" * depth + "1" + ")" * depth + "\nprint('ok')",
        "subscript": "x = [1]" + "[0:1]" * depth + "\nprint('ok')",
        "parens": "x = " + "(" * depth + "1" + ")" * depth + "\nprint('ok')",
        "dict": "x = " + "{1: " * depth + "1" + "}" * depth + "\nprint('ok')",
    }[shape]
    r = packed.execute(src)
    text = f"{r.stdout}{r.error}"
    clear = ("Code refused by sandbox policy", "nested", "too deep", "AttributeError", "SyntaxError")
    assert r.stdout.strip() == "ok" or any(word in text for word in clear), (shape, depth, text[-800:])
    assert "Traceback (most recent call last)" not in text and "RecursionError" not in text, (shape, depth, text[-800:])
    assert packed.execute("print(1)").stdout.strip() == "1"
