"""What the fuzz tests of ``rlm serve`` share (``tests/serve/test_fuzz_*.py``): a root of small
files of odd shapes, a scripted model whose answers are odd too, and the settings that keep a
fuzz run bounded and repeatable. Import it as ``import _fuzz``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, settings

#: Examples generated for each operation or tool and kind of request.
MAX_EXAMPLES = 40
#: Seconds any one request or call may take (the scripted model answers at once).
CALL_S = 20.0
#: Bounded and repeatable, for CI: derandomized, no example database, no shrinking (a
#: failure shows the request as generated; shrinking a hang would take a bound per step).
SETTINGS = settings(max_examples=MAX_EXAMPLES, derandomize=True, database=None, deadline=None,
                    phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))

#: What the model's one cell computes, by the question's length: text, a lone surrogate (a
#: string no protocol can send as it is), a read of the contexts, a search, an error caught.
_ANSWERS = ["'x'", "'a' + chr(0xD800) + 'b'", "peek(200)", "str(grep('code')[:2])", "str(search_chunks('launch')[:1])",
            "1 / 0"]


def answer(messages: list[dict[str, Any]]) -> str:
    """The scripted model: one cell that always calls FINAL (an error in it becomes the answer)."""
    question = next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")
    expr = _ANSWERS[len(question) % len(_ANSWERS)]
    return (f"```python\ntry:\n    out = {expr}\nexcept Exception as e:\n    out = 'error: ' + str(e)[:60]\n"
            "FINAL(out)\n```")


def make_root(folder: Path) -> Path:
    """``folder``, made, holding: notes.txt, docs/ (a.md and a file whose name is Latin-1, not
    UTF-8), an empty file, binary bytes, CSV, JSON lines, Python, long lines, CRLF ends and
    bytes that are not UTF-8."""
    (folder / "docs").mkdir(parents=True)
    (folder / "notes.txt").write_text("alpha\nthe launch code is 4711\nomega\n" + "filler line\n" * 40)
    (folder / "docs" / "a.md").write_text("# A\nbetween the lines\n")
    with open(os.path.join(os.fsencode(folder / "docs"), b"caf\xe9.txt"), "wb") as f:
        f.write(b"the launch code of the cafe is 1234\n")
    (folder / "empty.txt").write_text("")
    (folder / "blob.bin").write_bytes(bytes(range(256)) * 4)
    (folder / "data.csv").write_text('a,b,c\n1,2,3\n"x,y",2,\n')
    (folder / "data.jsonl").write_text('{"a": 1}\n{"b": [1, 2]}\nnot json\n')
    (folder / "code.py").write_text("def f(x):\n    return x\n\n\nclass A:\n    pass\n")
    (folder / "wide.txt").write_text(("é" * 3000 + "\n") * 20)
    (folder / "crlf.txt").write_bytes(b"a\r\nb\r\n\rc")
    (folder / "latin1.txt").write_bytes(b"ok\n\xff\xfe caf\xe9 (\n")
    return folder


#: Files and folders of ``make_root``, as a client names them (relative to the root).
ROOT_PATHS = ["notes.txt", "docs", "docs/a.md", "empty.txt", "blob.bin", "data.csv", "data.jsonl", "code.py", "wide.txt",
              "crlf.txt", "latin1.txt", ".", ""]
