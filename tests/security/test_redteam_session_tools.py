"""Red-team of the host tools a cell reaches in a Session: search_chunks, read_chunk,
llm_query; and of the shared namespace of Session.execute."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from rlm_runtime import Session
from rlm_runtime.errors import SessionClosed
from rlm_runtime.llm import ScriptedClient

SECRET = "ZEBRAPASSWORD-93117 topsecret credentials"


def _folder(tmp_path: Path) -> tuple[Path, Path]:
    """A context folder, and a secret file outside it."""
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "notes.md").write_text("The committee met about budgets.\n" * 5, encoding="utf-8")
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "secret.txt"
    secret.write_text(SECRET + "\n", encoding="utf-8")
    return ctx, secret


def _all_text(s: Session, query: str) -> str:
    """Everything a cell can get back from search_chunks and read_chunk for ``query``."""
    r = s.execute(
        f"hits = search_chunks({query!r}, k=50)\n"
        "out = [str(h) for h in hits]\n"
        "for h in hits:\n"
        "    out.append(read_chunk(h['id'], around=5))\n"
        "print('\\n'.join(out))")
    return (r.stdout or "") + (r.error or "")


def test_a_symlinked_file_out_of_a_context_folder_is_not_indexed(tmp_path: Path) -> None:
    """The folder context does not follow symlinks; the search index must not either."""
    ctx, secret = _folder(tmp_path)
    (ctx / "link.md").symlink_to(secret)
    with Session(ScriptedClient([]), contexts=[ctx], trace=False) as s:
        out = _all_text(s, "ZEBRAPASSWORD topsecret credentials")
        assert "ZEBRAPASSWORD" not in out
        listing = s.execute("print([d.name for d in context])")
        assert "link" not in (listing.stdout or "")


def test_a_symlinked_folder_out_of_a_context_folder_is_not_indexed(tmp_path: Path) -> None:
    ctx, secret = _folder(tmp_path)
    (ctx / "sub").symlink_to(secret.parent, target_is_directory=True)
    with Session(ScriptedClient([]), contexts=[ctx], trace=False) as s:
        assert "ZEBRAPASSWORD" not in _all_text(s, "ZEBRAPASSWORD topsecret credentials")


def test_files_the_folder_context_leaves_out_are_not_indexed(tmp_path: Path) -> None:
    """Excluded names (like .git) are not searchable either."""
    ctx, _ = _folder(tmp_path)
    git = ctx / ".git"
    git.mkdir()
    (git / "config").write_text(f"[credential]\n token = {SECRET}\n", encoding="utf-8")
    with Session(ScriptedClient([]), contexts=[ctx], trace=False) as s:
        assert ".git" not in (s.execute("print([d.name for d in context])").stdout or "")
        assert "ZEBRAPASSWORD" not in _all_text(s, "ZEBRAPASSWORD topsecret credentials")


BAD_IDS = ["c-1.0", "c0.-1", "c-1.5", "c0.0", "c1.0", "c99999999999999999999999.1",
           "c0.99999999999999999999999999999", "c0.1e400", "c0.1\x00", "c0.1\n", "m1", "m-1",
           "c0. 1", "c0.1_0", "c0.0x1", "c0.NaN", "c0.inf", "", "c", "c.", "c0.",
           None, 1.5, ["c0.1"], {"id": "c0.1"}, b"c0.1", True, 10**30, -1]


def test_hostile_chunk_ids_get_a_clean_error_and_the_host_keeps_serving(tmp_path: Path) -> None:
    ctx, _ = _folder(tmp_path)
    with Session(ScriptedClient([]), contexts=[ctx], trace=False) as s:
        for bad in BAD_IDS:
            r = s.execute(f"read_chunk({bad!r})")
            err = r.error or ""
            out = (r.stdout or "") + err
            assert "ZEBRAPASSWORD" not in out
            assert str(tmp_path / "outside") not in out
        # still serving, and a real id works
        r = s.execute("print(read_chunk(search_chunks('committee budgets')[0]['id']))")
        assert "committee" in (r.stdout or ""), r.error


def test_huge_chunk_numbers_are_refused_not_crash(tmp_path: Path) -> None:
    ctx, _ = _folder(tmp_path)
    with Session(ScriptedClient([]), contexts=[ctx], trace=False) as s:
        for bad in ["c0.99999999999999999999999999999", "m99999999999999999999999", "c0.-99999999999999999999999"]:
            r = s.execute(f"read_chunk({bad!r})")
            assert r.error and "no chunk" in r.error, (bad, r.error)
        assert s.execute("print(1+1)").stdout.strip() == "2"


SOURCES = ["/etc", "/etc/passwd", "../", "..", "/", "*", "%", "_", "\"", "' OR 1=1 --", "NEAR(a b)",
           "a OR b", "~", "~/", "\x00", "/" * 10000, str(Path.home())]


def test_source_filters_with_path_tricks_find_nothing_outside_the_contexts(tmp_path: Path) -> None:
    ctx, secret = _folder(tmp_path)
    with Session(ScriptedClient([]), contexts=[ctx], trace=False) as s:
        for src in [*SOURCES, str(secret), str(secret.parent), str(ctx / ".." / "outside")]:
            r = s.execute(f"print(search_chunks('ZEBRAPASSWORD', k=50, source={src!r}))")
            assert "ZEBRAPASSWORD" not in (r.stdout or "") + (r.error or "")
        assert s.execute("print(2)").stdout.strip() == "2"


QUERIES = ['"', '""', "*", "NEAR(a b, 2)", "a OR b", "a AND NOT b", "col:term", "^x", "(", ")", "'",
           "\x00", "\\", "-", "+", "{a b}", "a:b:c", " \n\t x"]


def test_fts_syntax_in_queries_does_not_error_the_host(tmp_path: Path) -> None:
    ctx, _ = _folder(tmp_path)
    with Session(ScriptedClient([]), contexts=[ctx], trace=False) as s:
        for q in QUERIES:
            r = s.execute(f"print(len(search_chunks({q!r})))")
            assert r.error is None or "HostCallError" in r.error or "search_chunks" in r.error, (q, r.error)
        assert s.execute("print(3)").stdout.strip() == "3"


def test_odd_kind_and_tags_are_refused(tmp_path: Path) -> None:
    ctx, _ = _folder(tmp_path)
    with Session(ScriptedClient([]), contexts=[ctx], trace=False) as s:
        for args in ["kind=1", "kind=['a']", "tags='a'", "tags=[1]", "source=1", "source=b'/'",
                     "k=True", "k=1.0", "k=0", "k=-1"]:
            r = s.execute(f"search_chunks('committee', {args})")
            assert r.error, args
        for args in ["around=6", "around=-1", "around=True", "around=10**9"]:
            assert s.execute(f"read_chunk('c0.1', {args})").error, args


def test_a_ten_megabyte_query_does_not_hang_the_host(tmp_path: Path) -> None:
    ctx, _ = _folder(tmp_path)
    with Session(ScriptedClient([]), contexts=[ctx], trace=False) as s:
        began = time.monotonic()
        s.execute("q = 'committee ' * 1_000_000\ntry:\n    search_chunks(q)\nexcept Exception as e:\n    print(type(e).__name__)")
        assert time.monotonic() - began < 120
        assert s.execute("print(4)").stdout.strip() == "4"


def test_a_cell_cannot_rebind_the_host_tools_for_later_cells(tmp_path: Path) -> None:
    ctx, _ = _folder(tmp_path)
    with Session(ScriptedClient([]), contexts=[ctx], trace=False) as s:
        s.execute("search_chunks = lambda *a, **k: 'FAKE'\nread_chunk = lambda *a, **k: 'FAKE'\n"
                  "llm_query = lambda *a, **k: 'FAKE'")
        r = s.execute("print(search_chunks('committee')[0]['id'])\nprint(read_chunk(search_chunks('committee')[0]['id']))")
        assert "FAKE" not in (r.stdout or ""), r.stdout
        assert "committee" in (r.stdout or ""), r.error


def test_no_tool_after_the_session_closes(tmp_path: Path) -> None:
    ctx, _ = _folder(tmp_path)
    s = Session(ScriptedClient([]), contexts=[ctx], trace=False)
    s.execute("keep = search_chunks")
    s.close()
    with pytest.raises(SessionClosed):
        s.execute("keep('committee')")
    assert s.search._indexes == {}
