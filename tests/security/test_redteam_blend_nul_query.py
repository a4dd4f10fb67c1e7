"""Red team (hybrid fusion review): a NUL byte in a search_chunks query.

FTS5 reads a MATCH expression as a C string: a query holding NUL ends inside its quoted
phrase ("unterminated string"). The sqlite3 error is wrapped by ``MemoryStore._sql_errors``
with the store's path, and ``ChunkSearch.search`` hands that message to sandboxed code: the
model reads ``$RLM_HOME/brain/memory.db`` or ``$RLM_HOME/index/path-<hash>.db``. bm25 and
hybrid both (vector mode reads no MATCH); not new with score fusion, found while attacking it.
Fixed: a NUL separates words like a space (``search.pieces``), and a search's failure reaches
the cell without host paths (``ChunkSearch._shown``).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rlm_runtime import Session
from rlm_runtime.llm import ScriptedClient
from rlm_runtime.memory import MemoryStore


def clean(text: str | None, *, secret: str) -> None:
    text = text or ""
    assert secret not in text
    assert os.environ["RLM_HOME"] not in text, text
    assert "most recent call last" not in text and "File \"/" not in text


@pytest.mark.parametrize("mode", ["bm25", "hybrid"])
@pytest.mark.parametrize("query", ["'refund\\x00'", "'a\\x00b refund'", "'refund ' + '\\x00' * 1000"])
def test_a_nul_in_a_query_over_the_memory_store_shows_no_host_path(query: str, mode: str, secret: dict[str, str]) -> None:
    """It searches a query holding NUL over the memory store without showing the cell a host path or a traceback."""
    with Session(ScriptedClient([]), memory=True, trace=False) as s:
        assert s.memory is not None
        s.memory.add_text("The refund policy: thirty days with the receipt.", source="notes")
        r = s.execute(f"r = search_chunks({query}, mode='{mode}')\nprint(len(r))")
        clean(r.error, secret=secret["value"])
        clean(r.stdout, secret=secret["value"])
        assert not r.worker_restarted


@pytest.mark.parametrize("mode", ["bm25", "hybrid"])
def test_a_nul_in_a_query_over_a_context_shows_no_host_path(tmp_path: Path, mode: str, secret: dict[str, str]) -> None:
    """It searches a query holding NUL over a context without showing the cell the index's path."""
    doc = tmp_path / "doc.md"
    doc.write_text("\n\n".join(f"Paragraph {i}: the refund policy." for i in range(40)) + "\n")
    with Session(ScriptedClient([]), contexts=[doc], trace=False) as s:
        r = s.execute(f"r = search_chunks('refund\\x00', mode='{mode}')\nprint(len(r))")
        clean(r.error, secret=secret["value"])
        assert str(tmp_path) not in (r.error or "")


def test_a_nul_query_from_the_api_is_a_store_error_not_a_crash(tmp_path: Path) -> None:
    """The store's own API may name its path (the caller owns it); it fails as StoreError."""
    from rlm_runtime.memory import StoreError

    st = MemoryStore(tmp_path / "m.db", embedder=None)
    try:
        st.add_text("refund policy", source="n")
        try:
            st.search("refund\x00", mode="bm25", record=False)
        except StoreError:
            pass
    finally:
        st.close()


def test_a_store_error_reaches_sandboxed_code_without_host_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """It names neither the memory store's path nor the index folder in the message a search's
    failure hands to the cell (a store error says its path, for the store's own callers)."""
    from rlm_runtime.errors import HostCallError
    from rlm_runtime.memory import StoreError
    from rlm_runtime.searching import ChunkSearch

    st = MemoryStore(tmp_path / "brain" / "memory.db", embedder=None)
    search = ChunkSearch(tmp_path / "index", memory=st, embedder=None)
    try:
        def broken(*a: object, **k: object) -> None:
            raise StoreError(f"memory store {st.path}: disk I/O error under {tmp_path / 'index'}")

        monkeypatch.setattr(st, "search", broken)
        with pytest.raises(HostCallError) as e:
            search.search("refund")
        assert str(tmp_path) not in str(e.value) and "the memory store" in str(e.value) and "disk I/O" in str(e.value)
    finally:
        search.close()
        st.close()
