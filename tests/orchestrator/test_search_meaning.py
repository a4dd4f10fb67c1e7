"""search_chunks by meaning and semantic_grep, from sandboxed code: what they find, and every hostile argument refused on the host."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlm_runtime import Session, embeddings
from rlm_runtime.errors import HostCallError
from rlm_runtime.llm import ScriptedClient
from rlm_runtime.searching import ChunkSearch

from .support import code, fast, read_trace

pytestmark = pytest.mark.skipif(not embeddings.installed(), reason="the embed extra is not installed")

REFUND = "Refunds are accepted within thirty days of purchase, with the receipt."


def policy(tmp_path: Path) -> Path:
    """A document of many paragraphs; one says REFUND, in words a question about money back does not use."""
    paras = [f"Section {i}. The committee reviewed the parking rota number {i} and the canteen menu." for i in range(120)]
    paras[77] = REFUND
    path = tmp_path / "policy.md"
    path.write_text("\n\n".join(paras) + "\n", encoding="utf-8")
    return path


def test_a_question_sharing_no_word_is_found_by_meaning(tmp_path: Path) -> None:
    """It finds by semantic_grep and by search_chunks(mode='vector') the paragraph a grep of the question's words misses, with its lines."""
    client = ScriptedClient([
        code("print(grep('money back'))\nhits = semantic_grep('when can I get my money back', k=3)\nprint(hits[0])"),
        code("v = search_chunks('when can I get my money back', k=3, mode='vector')\n"
             "FINAL(hits[0]['lines'] + ' ' + read_chunk(v[0]['id']))"),
    ])
    trace = tmp_path / "t.jsonl"
    with Session(client, contexts=[policy(tmp_path)], limits=fast(), trace=trace) as s:
        result = s.ask("When can I get my money back?")
    assert result.answer is not None and REFUND in result.answer, result.error
    line = 1 + 2 * 77
    assert result.answer.startswith(f"{line}-{line} ")
    system = client.prompts[0][0]["content"]
    # Callable, not offered: the model's function list is unchanged until semantic_grep is measured.
    assert "semantic_grep" not in system and "search_chunks(query, k=10)" in system
    names = [e["name"] for e in read_trace(trace) if e.get("type") == "tool_call"]
    assert names == ["semantic_grep", "search_chunks"]


@pytest.mark.parametrize("call, says", [
    ("search_chunks('refund', mode='semantic')", "mode must be one of"),
    ("search_chunks('refund', mode='BM25')", "mode must be one of"),
    ("search_chunks('refund', mode=1)", "mode must be one of"),
    ("search_chunks('refund', mode=['bm25'])", "mode must be one of"),
    ("search_chunks('refund', mode='x' * 10**6)", "mode must be one of"),
    ("search_chunks('refund', k=True, mode='vector')", "k must be"),
    ("search_chunks('refund', k=0, mode='vector')", "k must be"),
    ("search_chunks(['refund'], mode='vector')", "non-empty query"),
    ("semantic_grep('')", "non-empty query"),
    ("semantic_grep(None)", "non-empty query"),
    ("semantic_grep('refund', k=51)", "k must be"),
    ("semantic_grep('refund', k=1.5)", "k must be"),
    ("semantic_grep('refund', context=1)", "context must be"),
    ("semantic_grep('refund', context=-1)", "context must be"),
    ("semantic_grep('refund', context=True)", "context must be"),
    ("semantic_grep('refund', context='0')", "context must be"),
    ("semantic_grep('refund', context=2**70)", "too large to cross the sandbox boundary"),
])
def test_hostile_arguments_are_refused_on_the_host(tmp_path: Path, call: str, says: str) -> None:
    """It refuses every mode, k, query and context it does not know, as an error the code sees."""
    with Session(ScriptedClient([]), contexts=[policy(tmp_path)], trace=False) as s:
        assert says in (s.execute(call).error or "")


def test_a_huge_or_strange_query_is_searched_not_obeyed(tmp_path: Path) -> None:
    """It searches a megabyte, control characters or FTS syntax as text, by meaning too."""
    with Session(ScriptedClient([]), contexts=[policy(tmp_path)], trace=False) as s:
        for query in ("'refund ' * 200000", "'\\x00\\u2581 NEAR(a b) OR \"'", "'日本語 ²'"):
            for mode in ("hybrid", "vector", "bm25"):
                assert s.execute(f"r = search_chunks({query}, mode='{mode}')").error is None
            assert s.execute(f"g = semantic_grep({query})").error is None


def test_semantic_grep_without_a_model_says_what_to_use(tmp_path: Path) -> None:
    """It refuses semantic_grep with the install hint and a tool to use instead when there is no model."""
    search = ChunkSearch(tmp_path / "index", embedder=None)
    from rlm_runtime.context import open_context

    search.set_contexts([open_context(policy(tmp_path))])
    try:
        with pytest.raises(HostCallError, match="rlm_runtime\\[embed\\].*search_chunks or grep"):
            search.semantic_grep("money back")
        assert "«Refunds»" in search.search("refunds", 3)[0]["snippet"]
        assert not search.meaning_available()
    finally:
        search.close()


def test_an_index_built_before_vectors_gets_them_on_use(tmp_path: Path) -> None:
    """It gives an index made without the model its vectors the first time a session with the model uses it."""
    from rlm_runtime.context import open_context

    path = policy(tmp_path)
    old = ChunkSearch(tmp_path / "index", embedder=None)
    old.set_contexts([open_context(path)])
    old.search("refunds", 1)
    old.close()
    new = ChunkSearch(tmp_path / "index")
    new.set_contexts([open_context(path)])
    try:
        hits = new.semantic_grep("when can I get my money back", k=1)
        assert hits[0]["text"] == REFUND
    finally:
        new.close()
