"""Red team: semantic_grep and search_chunks(mode=...) attacked from sandboxed code."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from rlm_runtime import Session, embeddings
from rlm_runtime.budget import RunLimits
from rlm_runtime.llm import ScriptedClient

pytestmark = pytest.mark.skipif(not embeddings.installed(), reason="the embed extra is not installed")

REFUND = "Refunds are accepted within thirty days of purchase, with the receipt."


def code(src: str) -> str:
    return f"```python\n{src}\n```"


def policy(tmp_path: Path) -> Path:
    paras = [f"Section {i}. The committee reviewed the parking rota number {i} and the canteen menu." for i in range(60)]
    paras[37] = REFUND
    path = tmp_path / "policy.md"
    path.write_text("\n\n".join(paras) + "\n", encoding="utf-8")
    return path


def clean(text: str | None, *, secret: str, tmp_path: Path) -> None:
    """An error or output must echo no secret and no host path."""
    text = text or ""
    assert secret not in text
    assert str(tmp_path) not in text
    assert os.environ["RLM_HOME"] not in text
    assert "most recent call last" not in text and "File \"/" not in text and "site-packages" not in text and "/work/main" not in text


def test_semantic_grep_is_callable_but_not_in_the_system_prompt(tmp_path: Path) -> None:
    client = ScriptedClient([code("h = semantic_grep('when can I get my money back', k=2)\nFINAL(h[0]['text'])")])
    with Session(client, contexts=[policy(tmp_path)], trace=False, limits=RunLimits(max_iterations=3, max_wall_s=60)) as s:
        result = s.ask("money back?")
    assert result.answer == REFUND, result.error
    system = client.prompts[0][0]["content"]
    assert "semantic_grep" not in system


HOSTILE = [
    # lying str subclass
    "class S(str):\n  def __eq__(s, o): return True\n  def __hash__(s): return 0\n  def __str__(s): return 'x'\nr = semantic_grep(S('refund'))",
    "class S(str):\n  def __eq__(s, o): return True\n  def __hash__(s): return hash('vector')\nr = search_chunks('refund', mode=S('vector'))",
    "class S(str):\n  def __eq__(s, o): return True\nr = search_chunks('refund', mode=S('nonsense'))",
    "class I(int):\n  def __lt__(s, o): return False\n  def __le__(s, o): return True\n"
    "  def __ge__(s, o): return True\nr = semantic_grep('refund', k=I(10**9))",
    "class I(int):\n  def __lt__(s, o): return False\n  def __le__(s, o): return True\n"
    "  def __ge__(s, o): return True\nr = semantic_grep('refund', context=I(7))",
    "class X:\n  def __index__(s): return 0\nr = semantic_grep('refund', context=X())",
    "class X:\n  def __index__(s): return 3\nr = semantic_grep('refund', k=X())",
    "r = semantic_grep('refund', k=10**30)",
    "r = semantic_grep('refund', k=-1)",
    "r = semantic_grep('refund', k=False)",
    "r = semantic_grep('refund', k=float('nan'))",
    "r = semantic_grep('refund', context=float('nan'))",
    "r = semantic_grep('refund', context=-(2**63))",
    "r = semantic_grep('refund', context=1)",
    "r = semantic_grep('refund', context='0')",
    "r = semantic_grep('refund', context=context)",
    "r = semantic_grep('refund', context=contexts)",
    "r = semantic_grep(['refund'])",
    "r = semantic_grep(b'refund')",
    "r = semantic_grep({'q': 'refund'})",
    "r = search_chunks('refund', k=-5, mode='vector')",
    "r = search_chunks('refund', k=float('nan'), mode='hybrid')",
    "r = search_chunks('refund', kind=['a'], mode='vector')",
    "r = search_chunks('refund', tags='abc', mode='vector')",
    "r = search_chunks('refund', tags=[1, 2], mode='vector')",
    "r = search_chunks('refund', source=context, mode='vector')",
    "r = search_chunks('refund', mode=None, k=2**70)",
]


@pytest.mark.parametrize("cell", HOSTILE)
def test_hostile_arguments_are_refused_cleanly(tmp_path: Path, cell: str, secret: dict[str, str]) -> None:
    """Every hostile argument is refused (or harmlessly searched) with no host path, secret or traceback."""
    with Session(ScriptedClient([]), contexts=[policy(tmp_path)], trace=False) as s:
        r = s.execute(cell)
        clean(r.error, secret=secret["value"], tmp_path=tmp_path)
        clean(r.stdout, secret=secret["value"], tmp_path=tmp_path)
        assert not r.worker_restarted
        # The session still works afterwards.
        ok = s.execute("print(semantic_grep('money back', k=1)[0]['text'])")
        assert ok.error is None and REFUND in ok.stdout, ok.error


@pytest.mark.parametrize("query", [
    "'\\ud800\\udfff\\udc00' * 1000",
    "'refund \\ud83d ' * 100",
    "'x' * (10 * 1024 * 1024)",
    "'money ' * 2_000_000",
    "'\\x00' * 100000",
    "' '.join(str(i) for i in range(400000))",
])
@pytest.mark.parametrize("fn", ["semantic_grep({q}, k=50)", "search_chunks({q}, k=50, mode='vector')",
                                "search_chunks({q}, k=50, mode='hybrid')"])
def test_huge_or_broken_queries(tmp_path: Path, query: str, fn: str, secret: dict[str, str]) -> None:
    with Session(ScriptedClient([]), contexts=[policy(tmp_path)], trace=False) as s:
        began = time.monotonic()
        r = s.execute("r = " + fn.format(q=query) + "\nprint(len(r))")
        assert time.monotonic() - began < 20
        clean(r.error, secret=secret["value"], tmp_path=tmp_path)
        assert r.error is None or "HostCallError" in (r.error_type or r.error), r.error
        assert not r.worker_restarted


def test_many_calls_are_bounded_by_the_run_wall_clock(tmp_path: Path) -> None:
    """A loop of semantic_grep calls over a big context ends at max_wall_s."""
    big = tmp_path / "big.md"
    big.write_text("\n\n".join(f"Paragraph {i} about apples" for i in range(50)))
    loop = "while True:\n    semantic_grep('apples', k=5)"
    import threading

    client = ScriptedClient([code(loop)] * 10)
    with Session(client, contexts=[big], trace=False, limits=RunLimits(max_iterations=2, max_wall_s=6)) as s:
        done: list = []
        t = threading.Thread(target=lambda: done.append(s.ask("q")), daemon=True)
        t.start()
        t.join(6 + 40)  # the cell timeout (30 s) plus slack: `while True: pass` ends in ~31 s
        finished = not t.is_alive()
        if not finished:
            s.cancel()
            t.join(60)
    assert finished, "the run outlived max_wall_s and the cell timeout"


def test_cancel_reaches_a_semantic_grep_loop(tmp_path: Path) -> None:
    import threading

    big = tmp_path / "big.md"
    big.write_text("\n\n".join(f"Paragraph {i} about apples pears plums number {i}" for i in range(20000)))
    loop = "while True:\n    semantic_grep('fruit orchard harvest ' * 300, k=50)"
    client = ScriptedClient([code(loop)] * 10)
    with Session(client, contexts=[big], trace=False, limits=RunLimits(max_iterations=3, max_wall_s=120)) as s:
        threading.Timer(3.0, s.cancel).start()
        began = time.monotonic()
        result = s.ask("q")
        took = time.monotonic() - began
    assert result.answer is None
    assert took < 3 + 10, took


def test_no_memory_store_and_no_other_sessions_index(tmp_path: Path, secret: dict[str, str]) -> None:
    """A session indexes the secret; a later session over another file finds nothing of it."""
    with Session(ScriptedClient([]), contexts=[secret["path"]], trace=False) as s:
        r = s.execute(f"print(search_chunks({secret['value']!r}, mode='hybrid'))")
        assert "'id': 'c0." in r.stdout  # it is this session's context (its text redacted)
    index = Path(os.environ["RLM_HOME"]) / "index"
    assert any(p.name.startswith("path-") for p in index.iterdir())
    with Session(ScriptedClient([]), contexts=[policy(tmp_path)], trace=False) as s:
        for cell in (f"print(search_chunks({secret['value']!r}, k=50, mode=m))" for m in ("hybrid", "vector", "bm25")):
            r = s.execute(cell.replace("mode=m", "mode='vector'"))
            assert r.error is None and secret["value"] not in r.stdout
            assert "'id': 'm" not in r.stdout
        r = s.execute(f"print(semantic_grep({secret['value']!r}, k=50))")
        assert secret["value"] not in r.stdout
        for cid in ("c1.0", "c-1.0", "m0", "m1", "c0.-1", "c0.999999"):
            r = s.execute(f"print(read_chunk({cid!r}))")
            clean(r.error, secret=secret["value"], tmp_path=tmp_path)
            assert secret["value"] not in r.stdout


def test_no_contexts_semantic_grep_refuses(tmp_path: Path, secret: dict[str, str]) -> None:
    with Session(ScriptedClient([]), trace=False) as s:
        r = s.execute("semantic_grep('secret')")
        assert r.error and "no context" in r.error
        r = s.execute(f"print(search_chunks({secret['value']!r}, mode='vector'))")
        assert secret["value"] not in (r.stdout + (r.error or ""))


def test_a_folder_document_swapped_for_a_symlink_to_the_secret(tmp_path: Path, secret: dict[str, str]) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("the harbour lantern is lit at dusk\n")
    (folder / "b.md").write_text("tides turn twice a day\n")
    with Session(ScriptedClient([]), contexts=[folder], trace=False) as s:
        os.unlink(folder / "a.md")
        os.symlink(secret["path"], folder / "a.md")
        for cell in (f"print(semantic_grep({secret['value']!r}, k=50))",
                     f"print(search_chunks({secret['value']!r}, k=50, mode='vector'))",
                     f"print(search_chunks({secret['value']!r}, k=50, mode='hybrid'))",
                     "print([read_chunk(f'c0.{i}') for i in range(1, 4)])"):
            r = s.execute(cell)
            assert secret["value"] not in r.stdout + (r.error or ""), cell


def test_a_file_context_swapped_for_a_symlink_to_the_secret(tmp_path: Path) -> None:
    # A canary not in the host env (the env's secret is redacted from output anyway).
    secret = {"value": "FILE-ONLY-CANARY-91b2", "path": str(tmp_path / "private.txt")}
    Path(secret["path"]).write_text("FILE-ONLY-CANARY-91b2\n")
    os.chmod(secret["path"], 0o600)
    doc = policy(tmp_path)
    with Session(ScriptedClient([]), contexts=[doc], trace=False) as s:
        # The worker's view is the mmap of the file opened at start: grep sees the original.
        os.unlink(doc)
        os.symlink(secret["path"], doc)
        leaked = ""
        for cell in (f"print(semantic_grep({secret['value']!r}, k=50))",
                     f"print(search_chunks({secret['value']!r}, k=50, mode='vector'))",
                     f"print(search_chunks({secret['value']!r}, k=50))"):
            r = s.execute(cell)
            leaked += r.stdout + (r.error or "")
        assert secret["value"] not in leaked
