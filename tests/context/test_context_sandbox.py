"""Context handles inside the sandbox: the same operations and results as outside, and nothing else readable."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rlm_runtime.context import open_context
from rlm_runtime.sandbox import CellLimits, Sandbox

TEXT = "in-memory text\nwith a needle inside\nand a last line é😀\n"


@pytest.fixture
def sources(tmp_path: Path) -> dict[str, Path]:
    f = tmp_path / "main.txt"
    f.write_text("".join(f"line {i} {'needle' if i % 7 == 0 else 'hay'} é€\n" for i in range(1, 301)))
    folder = tmp_path / "docs"
    (folder / "sub").mkdir(parents=True)
    (folder / "one.md").write_text("# One\nneedle here\n")
    (folder / "sub" / "two.txt").write_text("nothing\nneedle again\n")
    (folder / "bin.png").write_bytes(b"\x89PNG\x00")
    (folder / ".git").mkdir()
    (folder / ".git" / "HEAD").write_text("needle in git\n")
    return {"file": f, "folder": folder}


@pytest.fixture
def ctx_sandbox(sources: dict[str, Path]) -> Iterator[Sandbox]:
    limits = CellLimits(cell_timeout_s=10, kill_grace_s=0.5, memory_mb=256)
    with Sandbox("default", limits, contexts=[sources["file"], TEXT, sources["folder"]]) as sb:
        yield sb


def _run(sb: Sandbox, code: str) -> str:
    result = sb.execute(code)
    assert result.ok, (code, result.error)
    return result.stdout


def test_context_and_contexts_are_bound(ctx_sandbox: Sandbox) -> None:
    """It binds `context` to the first source and `contexts` to all of them, in order."""
    assert _run(ctx_sandbox, "len(contexts)") == "3\n"
    assert _run(ctx_sandbox, "context is contexts[0]") == "True\n"
    assert "main.txt" in _run(ctx_sandbox, "context")
    assert "2 documents" in _run(ctx_sandbox, "contexts[2]")


def test_top_level_functions_match_outside_results(ctx_sandbox: Sandbox, sources: dict[str, Path]) -> None:
    """It gives peek, grep, chunk and chunks the same output inside as the handles give outside."""
    outside = open_context(sources["file"])
    cases = {
        "peek(50)": outside.peek(50),
        "peek()": outside.peek(),
        "grep('needle')": outside.grep("needle"),
        "grep('NEEDLE', ignore_case=True, max_matches=3)": outside.grep("NEEDLE", ignore_case=True, max_matches=3),
        "grep('^line 14 ', context_lines=2)": outside.grep("^line 14 ", context_lines=2),
        "chunk(0)": outside.chunk(0),
        "chunk(3, 20)": outside.chunk(3, 20),
        "chunk(2, 500, unit='chars')": outside.chunk(2, 500, unit="chars"),
        "chunk(1, 100, unit='tokens')": outside.chunk(1, 100, unit="tokens"),
        "chunks(100)": list(outside.chunks(100)),
        "context[1000:1040]": outside[1000:1040],
        "context[-20:]": outside[-20:],
        "context.lines(5, 7)": outside.lines(5, 7),
        "len(context)": len(outside),
        "context.n_lines": outside.n_lines,
        "context.count('needle')": outside.count("needle"),
        "context.n_tokens": outside.n_tokens,
        "list(context)[-1]": list(outside)[-1],
        "context.lines()[-2:]": outside.lines()[-2:],
        "grep(r'line (\\d)', max_matches=3).tally()": outside.grep(r"line (\d)").tally(),
        "grep('needle').split(': ')[0]": outside.grep("needle").split(": ")[0],
    }
    for code, expected in cases.items():
        assert _run(ctx_sandbox, code) == repr(expected) + "\n", code


def test_in_memory_text_context_matches_outside(ctx_sandbox: Sandbox) -> None:
    """It serves an in-memory text context with the same results as a text handle outside."""
    outside = open_context(TEXT)
    for code, expected in {
        "peek(5, contexts[1])": outside.peek(5),
        "grep('needle', contexts[1])": outside.grep("needle"),
        "contexts[1][:]": TEXT,
        "contexts[1][-3:]": TEXT[-3:],
        "len(contexts[1])": len(TEXT),
        "chunk(0, 2, handle=contexts[1])": outside.chunk(0, 2),
    }.items():
        assert _run(ctx_sandbox, code) == repr(expected) + "\n", code


def test_corpus_grep_names_documents_inside(ctx_sandbox: Sandbox, sources: dict[str, Path]) -> None:
    """It greps a folder context across documents, naming each, as outside (exclusions applied)."""
    outside = open_context(sources["folder"])
    inside = _run(ctx_sandbox, "grep('needle', contexts[2])")
    assert inside == repr(outside.grep("needle")) + "\n"
    assert inside == "one.md:2: needle here\nsub/two.txt:2: needle again\n"
    assert _run(ctx_sandbox, "contexts[2].names()") == repr(["one.md", "sub/two.txt"]) + "\n"
    assert _run(ctx_sandbox, "contexts[2].doc('sub/two.txt').lines(2)") == "['needle again']\n"
    assert _run(ctx_sandbox, "chunks(1, handle=contexts[2])[0]") == repr(outside.chunk(0, 1)) + "\n"


def test_errors_inside_are_context_errors(ctx_sandbox: Sandbox) -> None:
    """It reports an RE2-unsupported pattern or an out-of-range chunk as a ContextError the model can read."""
    r = ctx_sandbox.execute("grep('(a)\\\\1')")
    assert r.error_type == "ContextError" and "backreferences" in r.error
    r = ctx_sandbox.execute("chunk(10_000)")
    assert r.error_type == "ContextError" and "out of range" in r.error
    r = ctx_sandbox.execute("contexts[2].doc('two')")
    assert r.error_type == "ContextError" and "sub/two.txt" in r.error


def test_rebinding_a_context_name_is_undone_with_a_warning(ctx_sandbox: Sandbox) -> None:
    """It restores grep (and context) after a cell rebinds them, and warns in result.warnings."""
    r = ctx_sandbox.execute("grep = 1\ncontext = 'mine'")
    assert r.ok
    assert any("'grep'" in w for w in r.warnings) and any("'context'" in w for w in r.warnings)
    assert _run(ctx_sandbox, "grep('needle', max_matches=1)[0]") == "7: line 7 needle é€\n"
    assert "main.txt" in _run(ctx_sandbox, "context")
    assert ctx_sandbox.execute("x = 1").warnings == []


def test_worker_reads_its_contexts_and_no_other_file(ctx_sandbox: Sandbox, sources: dict[str, Path],
                                                     secret: dict[str, str]) -> None:
    """It cannot open the host's secret file (nor its own context by path), although contexts are mapped."""
    attempts = [
        f"open({secret['path']!r}).read()",
        f"type(context)({secret['path']!r})[:]",
        f"type(context)({str(sources['file'])!r})[:]",
        f"type(contexts[2]).from_folder({str(Path(secret['path']).parent)!r}).get_full()",
        "type(context)(fd=0)[:]",
    ]
    for code in attempts:
        r = ctx_sandbox.execute(code)
        assert secret["value"] not in r.stdout and secret["value"] not in (r.error or ""), code
        assert not r.ok or r.stdout in ("''\n",), (code, r.stdout)
    assert "needle" in _run(ctx_sandbox, "peek(200)")  # the mapped context still reads


def test_handles_inside_are_read_only(ctx_sandbox: Sandbox) -> None:
    """It refuses writing into a context."""
    assert not ctx_sandbox.execute("context[0] = 'x'").ok
    assert not ctx_sandbox.execute("context._buf()").ok  # private attributes are refused by the policy


def test_sandbox_without_context(sandbox: Sandbox) -> None:
    """It binds no context names when the session has no context."""
    r = sandbox.execute("peek()")
    assert not r.ok and r.error_type == "NameError"


def test_sandbox_with_lazy_and_list_contexts(tmp_path: Path) -> None:
    """It exports lazy handles and list corpora too (as anonymous files)."""
    limits = CellLimits(cell_timeout_s=10, kill_grace_s=0.5, memory_mb=256)
    with Sandbox("default", limits, contexts=[lambda: "lazy needle\n", ["doc a needle\n", "doc b\n"]]) as sb:
        assert _run(sb, "grep('needle')") == "1: lazy needle\n"
        assert _run(sb, "grep('needle', contexts[1])") == "doc0:1: doc a needle\n"
