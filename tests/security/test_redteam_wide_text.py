"""Red team: UTF-16/32 contexts decoded into an unnamed UTF-8 copy, records() logfmt /
count / where notes, grep's empty-result hint, the live reply views and standard input.

Each test is one attack; those that held assert they hold, those that got through are
tests of the fixes they led to.
"""

from __future__ import annotations

import glob
import io
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import pytest

from rlm_runtime.cli.common import UsageError
from rlm_runtime.context import handles as handles_mod
from rlm_runtime.context.corpus import CorpusHandle
from rlm_runtime.context.handles import FileHandle, TextHandle
from rlm_runtime.errors import ContextError
from rlm_runtime.sandbox import Sandbox

SECRET = "S3CRET-wide-7f1c9a"


def _u16(text: str) -> bytes:
    return b"\xff\xfe" + text.encode("utf-16-le")


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _tmp_leftovers() -> set[str]:
    return set(glob.glob(os.path.join(tempfile.gettempdir(), "rlm-utf8-*")))


# ----------------------------------------------------------------- 1. wide files, host side


def test_utf16_with_control_chars_is_refused_as_binary(tmp_path: Path) -> None:
    p = _write(tmp_path / "ctl.txt", _u16("\x01\x00\x02\x03binary" * 200))
    with pytest.raises(ContextError, match="binary"):
        FileHandle(p)


def test_utf16_that_is_utf32_nul_prefix_is_refused(tmp_path: Path) -> None:
    # FF FE 00 00 is UTF-32 LE's mark: a UTF-16 file starting with NUL becomes UTF-32 garbage
    p = _write(tmp_path / "nul.txt", _u16("\x00\x00abc" * 200))
    try:
        h = FileHandle(p)
    except ContextError:
        return
    assert "\x00" not in h.peek(10_000)
    h.close()


@pytest.mark.parametrize("data, expect", [
    (b"\xff\xfe", ""),                                              # mark only
    (b"\xff\xfe\x00\x00", ""),                                      # UTF-32 mark only
    (b"\xfe\xff", ""),
    (b"\xff\xfe" + "hello".encode("utf-16-le") + b"x", "hello\ufffd"),  # odd length
    (b"\xff\xfe" + b"\x00\xd8a\x00" * 3, "\ufffda" * 3),            # lone high surrogates
    (b"\xff\xfe" + b"\x00\xdc" + "z".encode("utf-16-le"), "\ufffdz"),  # lone low surrogate
    (b"\x00\x00\xfe\xff" + b"\x00\x11\x00\x00" + b"\xff\xff\xff\xff" + "ok".encode("utf-32-be"), "\ufffd\ufffdok"),
    (b"\xff\xfe\x00\x00" + b"\x00\xd8\x00\x00" + "ok".encode("utf-32-le"), "\ufffdok"),  # surrogate code point in UTF-32
])
def test_malformed_wide_text_decodes_with_replacement(tmp_path: Path, data: bytes, expect: str) -> None:
    h = FileHandle(_write(tmp_path / "w.txt", data))
    try:
        text = h._buf().decode(0, h.n_bytes) if hasattr(h._buf(), "decode") else None
        assert h.transcoded is not None
        assert h.n_bytes == len(expect.encode("utf-8"))
        if expect:
            assert expect[-2:] in h.peek(100)
        # the UTF-8 copy is valid UTF-8 (no surrogates smuggled through)
        bytes(h._buf().view).decode("utf-8")
        del text
    finally:
        h.close()


def test_surrogate_pair_split_across_transcode_blocks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(handles_mod, "_TRANSCODE_BLOCK", 3)  # odd: every pair and unit is split
    text = "a\U0001f600b\u00e9" * 50
    h = FileHandle(_write(tmp_path / "s.txt", _u16(text)))
    try:
        assert bytes(h._buf().view).decode("utf-8") == text
    finally:
        h.close()


def test_transcode_cap_is_enforced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(handles_mod, "MAX_TRANSCODED_BYTES", 1000)
    p = _write(tmp_path / "big.txt", _u16("x" * 1000))
    with pytest.raises(ContextError, match="convert it first"):
        FileHandle(p)


def test_wide_symlink_to_proc_environ_and_dev_zero(tmp_path: Path) -> None:
    (tmp_path / "env.txt").symlink_to("/proc/self/environ")
    (tmp_path / "zero.txt").symlink_to("/dev/zero")
    with pytest.raises(ContextError, match="regular"):
        FileHandle(tmp_path / "zero.txt")
    try:
        h = FileHandle(tmp_path / "env.txt")
    except ContextError:
        return
    # /proc files stat as size 0: nothing of the environment is mapped
    assert h.n_bytes == 0
    h.close()


def test_big_utf16_is_linear_bounded_and_unnamed(tmp_path: Path) -> None:
    line = "Ünïcode line of text, 0123456789 \u4e2d\u6587\n"
    data = _u16(line * (50_000_000 // (2 * len(line))))
    p = _write(tmp_path / "big.txt", data)
    del data
    before = _tmp_leftovers()
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t = time.perf_counter()
    h = FileHandle(p)
    took = time.perf_counter() - t
    rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        assert took < 10, took
        assert (rss1 - rss0) * 1024 < 64 * 1024 * 1024  # ru_maxrss is KB on Linux
        assert h.transcoded == "utf-16-le"
        assert _tmp_leftovers() <= before  # the copy has no name in the temp folder
        # the copy is a mapping of a deleted file, not the original
        maps = Path(f"/proc/{os.getpid()}/maps").read_text() if sys.platform.startswith("linux") else ""
        assert str(p) not in maps
        assert h.grep("0123456789").total if hasattr(h.grep("0123456789"), "total") else h.grep("0123456789")
    finally:
        h.close()


# ----------------------------------------------------------------- 1. wide files, in the sandbox


def test_worker_sees_decoded_text_not_path_or_temp_name(tmp_path: Path) -> None:
    secret_dir = tmp_path / "private-dir-name-xyz"
    secret_dir.mkdir()
    p = _write(secret_dir / "notes.txt", _u16("hello wide world\nsecond line\n"))
    before = _tmp_leftovers()
    code = (
        "print(context.peek(50))\n"
        "for a in ('path', 'transcoded', 'name'):\n"
        "    try:\n"
        "        print(a, getattr(context, a))\n"
        "    except Exception as e:\n"
        "        print(a, 'ERR', e)\n"
        "print(repr(context))\n"
    )
    with Sandbox("default", contexts=[p]) as sb:
        r = sb.execute(code)
        r2 = sb.execute("import os\nprint(os.readlink('/proc/self/fd/3'))")
        r3 = sb.execute("print(open('/proc/self/maps').read())")
    out = (r.stdout or "") + (r.error or "")
    assert "hello wide world" in out
    leaked = out + (r2.stdout or "") + (r3.stdout or "")
    assert "private-dir-name-xyz" not in leaked
    assert "rlm-utf8-" not in leaked
    assert _tmp_leftovers() <= before


def test_corpus_utf16_binary_document_is_skipped_not_crash(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    _write(folder / "good.txt", _u16("alpha beta gamma\n"))
    _write(folder / "bad.txt", _u16("\x01\x02\x03\x04\x05" * 100))
    _write(folder / "bom.txt", b"\xfe\xff")
    corpus = CorpusHandle.from_folder(folder)
    with Sandbox("default", contexts=[corpus]) as sb:
        r = sb.execute("for d in context.documents:\n    print(d.name, d.skip)\nprint(context.grep('alpha'))")
    out = r.stdout or ""
    assert r.error is None or "Traceback" not in (r.error or ""), r.error
    assert "alpha beta gamma" in out
    bad = [ln for ln in out.splitlines() if ln.startswith("bad.txt")]
    assert bad and "None" not in bad[0].split()[1:2], out


def test_corpus_symlink_to_outside_secret_is_not_read(tmp_path: Path) -> None:
    outside = _write(tmp_path / "secret.txt", _u16(SECRET + "\n"))
    folder = tmp_path / "docs"
    folder.mkdir()
    _write(folder / "a.txt", _u16("public text\n"))
    (folder / "link.txt").symlink_to(outside)
    corpus = CorpusHandle.from_folder(folder)
    with Sandbox("default", contexts=[corpus]) as sb:
        r = sb.execute("print(context.grep('S3CRET'))\nfor d in context.documents:\n    print(d.name, d.skip)")
    assert SECRET not in (r.stdout or "") + (r.error or "")


@pytest.mark.parametrize("encoding", ["utf-8", "utf-16"])
def test_corpus_document_swapped_for_symlink_after_walk(tmp_path: Path, encoding: str) -> None:
    outside = _write(tmp_path / "secret.txt", (SECRET + "\n").encode(encoding))
    folder = tmp_path / "docs"
    folder.mkdir()
    _write(folder / "a.txt", "public text\n".encode(encoding))
    corpus = CorpusHandle.from_folder(folder)
    (folder / "a.txt").unlink()
    (folder / "a.txt").symlink_to(outside)
    with Sandbox("default", contexts=[corpus]) as sb:
        r = sb.execute("print(context.grep('S3CRET'))\nfor d in context.documents:\n    print(d.name, d.skip)")
    assert SECRET not in (r.stdout or "") + (r.error or "")


def test_file_changing_from_wide_to_binary_between_check_and_transcode(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    p = _write(folder / "a.txt", _u16("fine text\n"))
    corpus = CorpusHandle.from_folder(folder)
    assert corpus.documents[0].check() is None if hasattr(corpus.documents[0], "check") else True
    # now the same name holds raw binary with a wide mark: the transcoded copy is refused, not sent
    _write(p, b"\xff\xfe" + bytes(range(1, 32)) * 200)
    with Sandbox("default", contexts=[corpus]) as sb:
        r = sb.execute("d = context.documents[0]\nprint('SKIP', d.skip)\nprint(repr(context.grep('[\\\\x01-\\\\x08]')))\n"
                       "print(context.grep('fine'))")
    out = (r.stdout or "") + (r.error or "")
    assert "SKIP" in out, out
    # either skipped, or the text checked at the walk (a snapshot) is sent: never the raw control bytes
    assert "\x01" not in out and "\x02" not in out, out


# ----------------------------------------------------------------- 2. records()


def _records(text: str):
    return TextHandle(text).records()


def test_logfmt_long_line_is_linear() -> None:
    pairs = " ".join(f"k{i}=v{i}" for i in range(15_000))  # ~150 KB, capped at the line head
    spaces = "a=" + " " * 100_000 + "b=c"
    words = "a=" + "word " * 30_000 + "b=c"
    t = time.perf_counter()
    for line in (pairs, spaces, words):
        recs = _records("\n".join([line] * 20))
        str(recs)
        recs.count("v1")
        recs.where("k1", "nothing-here")
    assert time.perf_counter() - t < 5


def test_where_note_bounded_with_many_fields_and_matches() -> None:
    line = " ".join(f"f{i}=same" for i in range(60))
    recs = _records("\n".join([line] * 3000))
    t = time.perf_counter()
    got = recs.where("nosuch", "same")
    note = got._note
    assert time.perf_counter() - t < 5
    assert len(note) < 2000, len(note)
    recs2 = _records("\n".join(f"host=h{i} city=c{i}" for i in range(5000)))
    note2 = recs2.where("city", "h7")._note
    assert len(note2) < 2000 and "host" in note2


def test_count_and_where_with_json_list_and_dict_values() -> None:
    text = "\n".join(['{"a": [1, "x", {"b": 2}], "c": {"d": [1,2]}, "e": "x"}'] * 50
                     + ['{"a": [[["deep", ["x"]]]], "e": "y"}'])
    recs = _records(text)
    for arg in (["x"], {"b": 2}, [1, 2], "x", None, 1, 2.5, True):
        recs.count(arg)
        recs.where("a", arg)
        recs.where("zz", arg)
        recs.count("a", arg)
    assert recs.count("e", "x") == 50


def test_records_deeply_nested_json_values(tmp_path: Path) -> None:
    depth = 900
    p = _write(tmp_path / "n.jsonl", ('{"e": "x"}\n{"a": ' + "[" * depth + "]" * depth + ', "e": "y"}\n').encode())
    with Sandbox("default", contexts=[p]) as sb:
        r1 = sb.execute("print(len(context.records()))")
        r2 = sb.execute("print('N', context.records().count('y'))")
        r3 = sb.execute("print('W', len(context.records().where('a', 'q')))")
    errors = "".join((r.error or "") for r in (r1, r2, r3))
    assert "RecursionError" not in errors, errors


# ----------------------------------------------------------------- 3. grep's empty hint


def test_grep_hint_counts_at_most_three_words() -> None:
    from rlm_runtime.context.grep import _hint_words
    pattern = "|".join(f"Word{i}long" for i in range(5000))[:4000]
    words = _hint_words(pattern)
    assert len(words) <= 3
    assert _hint_words("((((((a" + "(" * 500 + "bbb ccc" + ")" * 500) == ["bbb", "ccc"]
    assert len(_hint_words(" ".join(f"Zq{i}xx" for i in range(2000)))) <= 3


def test_grep_hint_in_cell_bounded_and_no_traceback(tmp_path: Path) -> None:
    p = _write(tmp_path / "big.txt", ("lorem ipsum dolor sit amet consectetur\n" * 200_000).encode())  # 8 MB
    patterns = [
        "|".join(f"Nomatch{i}word" for i in range(300))[:4000],
        "|".join(f"Nomatch{i}word" for i in range(300)),  # over the pattern limit: a ContextError, said plainly
        "(" * 100 + "Lorem Ipsum zzz" + ")" * 100,
        "Lorem\\s+IPSUM\\s+dolorX.*sit+amet?",
        "\\b" + "\\s+".join(["LOREM"] * 300) + "\\b",
        "\u202eLOREM\x1b[31m IPSUM\u0000",
    ]
    code = "\n".join(f"r = grep({pat!r})\nprint(len(r), str(r)[:300])" for pat in patterns)
    with Sandbox("default", contexts=[p]) as sb:
        t = time.perf_counter()
        r = sb.execute(code)
        took = time.perf_counter() - t
    assert "RecursionError" not in (r.error or "") and "re2" not in (r.error or "").lower(), r.error
    assert took < 20, took
    out = r.stdout or ""
    assert "\x1b" not in out


# ----------------------------------------------------------------- 4. live views


def test_live_view_escapes_model_text() -> None:
    from rlm_runtime.cli.live import LiveView
    from rlm_runtime.llm.scripted import ScriptedClient
    from rlm_runtime.session import Session
    reply = ("evil \x1b]0;pwned\x07 \x1b[2J\x1b[31mred\r\rOVERWRITE \u202egnp.exe\u202c \x9b1m\n"
             "```repl\nprint('\\x1b[2Jcell\\rX')\n```\n")
    buf = io.StringIO()
    view = LiveView(buf, status=False)
    with Session(ScriptedClient([reply, "FINAL(done)"]), contexts=["hello"], trace=False, on_event=view) as s:
        s.ask("q")
    view.close()
    shown = buf.getvalue()
    for bad in ("\x1b", "\u202e", "\u202c", "\x07", "\x9b"):
        assert bad not in shown, repr(bad)
    assert "\r" not in shown.replace("\r\n", "")


def test_reply_lines_hold_is_bounded() -> None:
    from rlm_runtime.trajectory.live import LONG_LINE, ReplyLines
    r = ReplyLines()
    for _ in range(20_000):
        r.feed({"run_id": "x", "text": "abcdefghij"})
    assert all(len(v) <= LONG_LINE for v in r._held.values())
    for i in range(5000):  # many run ids: each run's hold is forgotten at end()
        r.feed({"run_id": i, "text": "y"})
        r.end(i)
    assert len(r._held) <= 1


def test_reply_lines_one_huge_piece_is_linear() -> None:
    from rlm_runtime.trajectory.live import ReplyLines
    r = ReplyLines()
    t = time.perf_counter()
    lines = r.feed({"run_id": 1, "text": "a" * 20_000_000})  # cut in a loop of copies: about 25 s here
    took = time.perf_counter() - t
    assert sum(map(len, lines)) + len(r._held.get("1", "")) == 20_000_000
    assert took < 5, took  # once: a few tens of milliseconds


# ----------------------------------------------------------------- 5. standard input


def _stdin(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))


def test_stdin_limit_is_enforced(monkeypatch: pytest.MonkeyPatch) -> None:
    from rlm_runtime.cli import stdin as stdin_mod
    _stdin(monkeypatch, _u16("x" * 600))
    with pytest.raises(UsageError, match="more than"):
        stdin_mod.read_stdin(limit=1000)
    monkeypatch.setattr(stdin_mod, "MAX_BYTES", 1000)
    _stdin(monkeypatch, b"y" * 1001)
    with pytest.raises(UsageError, match="more than"):
        stdin_mod.read_stdin()


def test_stdin_utf16_decodes(monkeypatch: pytest.MonkeyPatch) -> None:
    from rlm_runtime.cli import stdin as stdin_mod
    _stdin(monkeypatch, _u16("hello \u00e9 world\n"))
    assert stdin_mod.read_stdin() == "hello \u00e9 world\n"
    _stdin(monkeypatch, b"\xff\xfe")
    assert stdin_mod.read_stdin() == ""


def test_stdin_binary_without_mark_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from rlm_runtime.cli import stdin as stdin_mod
    _stdin(monkeypatch, b"\x00\x01\x02binary")
    with pytest.raises(UsageError, match="binary"):
        stdin_mod.read_stdin()


def test_stdin_utf16_with_control_chars_refused_like_a_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from rlm_runtime.cli import stdin as stdin_mod
    data = _u16("\x01\x00\x02\x03binary" * 200)
    with pytest.raises(ContextError, match="binary"):
        FileHandle(_write(tmp_path / "same.txt", data))
    _stdin(monkeypatch, data)
    with pytest.raises(UsageError, match="binary"):
        stdin_mod.read_stdin()


def test_stdin_is_input_not_for_char_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    from rlm_runtime.cli import stdin as stdin_mod
    with open(os.devnull) as f:
        monkeypatch.setattr(sys, "stdin", f)
        assert stdin_mod.stdin_is_input() is False
    monkeypatch.setattr(sys, "stdin", io.StringIO("x"))
    assert stdin_mod.stdin_is_input() is False
