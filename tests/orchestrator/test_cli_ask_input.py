"""What ``rlm ask`` takes in, through its real entry point: the question (an empty one is a
usage error), standard input as a context (``-c -``, or a pipe or a file on it, never a
terminal, ``/dev/null`` or a socket), and model names checked before any work."""

from __future__ import annotations

import codecs
import os
import pty
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from .support import CLIResult, code, haystack

pytestmark = pytest.mark.filterwarnings("ignore:.*ReadOnly.*:UserWarning")  # litellm's types, on first use

Script = Callable[..., Path]
CLI = Callable[..., CLIResult]
ROOT = Path(__file__).resolve().parents[2]

#: A reply that answers with every context's name and first characters.
DESCRIBE = code("FINAL(' | '.join(f'{c.name}={c.peek(60).strip()}' for c in contexts))")


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    path = tmp_path / "notes.txt"
    path.write_text("notes from a file\n", encoding="utf-8")
    return path


def _ask(*args: str | Path, home: Path, cwd: Path, **kwargs: Any) -> subprocess.CompletedProcess[bytes]:
    """``rlm ask ARGS`` in a real process; ``kwargs`` say what its standard input is."""
    env = {**os.environ, "RLM_HOME": str(home), "PYTHONPATH": str(ROOT)}
    env.pop("RLM_MODEL", None)
    return subprocess.run([sys.executable, "-m", "rlm_runtime.cli", "ask", *map(str, args)], capture_output=True, env=env,
                          cwd=cwd, timeout=60, **kwargs)


# ----------------------------------------------------------------- the question


@pytest.mark.parametrize("question", ["", "   ", "\n\t "])
def test_an_empty_question_is_a_usage_error(question: str, write_script: Script, notes: Path, rlm_cli: CLI,
                                            tmp_path: Path) -> None:
    """It exits 2 with one line for an empty or blank question, before any model call or trace."""
    trace = tmp_path / "trace.jsonl"
    res = rlm_cli("ask", question, "-c", notes, "-m", f"scripted:{write_script(DESCRIBE)}", "--trace", trace)
    assert res.code == 2
    assert res.err == "rlm: error: the question is empty\n"
    assert res.out == "" and not trace.exists()


def test_an_empty_question_with_json_is_one_usage_error_object(write_script: Script, notes: Path, rlm_cli: CLI) -> None:
    """It prints one JSON object naming a usage error, not an internal one."""
    res = rlm_cli("ask", " ", "-c", notes, "-m", f"scripted:{write_script(DESCRIBE)}", "--json")
    assert res.code == 2
    assert res.json() == {"error": "the question is empty", "error_type": "UsageError"}


# ----------------------------------------------------------------- standard input


def test_piped_stdin_is_a_context_named_stdin(write_script: Script, _rlm_home: Path, tmp_path: Path) -> None:
    """It reads a pipe on standard input as a text context named stdin (cat f | rlm ask q)."""
    done = _ask("q", "-m", f"scripted:{write_script(DESCRIBE)}", "-q", input=b"piped text\nsecond line\n", home=_rlm_home,
                cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode() == "stdin=piped text\nsecond line\n"


def test_piped_stdin_comes_after_the_c_paths(write_script: Script, notes: Path, _rlm_home: Path, tmp_path: Path) -> None:
    """It adds piped standard input to the -c contexts, after them."""
    done = _ask("q", "-c", notes, "-m", f"scripted:{write_script(DESCRIBE)}", "-q", input=b"piped", home=_rlm_home, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode() == "notes.txt=notes from a file | stdin=piped\n"


def test_a_file_on_stdin_is_a_context(write_script: Script, notes: Path, _rlm_home: Path, tmp_path: Path) -> None:
    """It reads a regular file on standard input (rlm ask q < FILE)."""
    with notes.open("rb") as fh:
        done = _ask("q", "-m", f"scripted:{write_script(DESCRIBE)}", "-q", stdin=fh, home=_rlm_home, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode() == "stdin=notes from a file\n"


def test_dev_null_on_stdin_adds_nothing(write_script: Script, notes: Path, _rlm_home: Path, tmp_path: Path) -> None:
    """It does not read a character device such as /dev/null."""
    done = _ask("q", "-c", notes, "-m", f"scripted:{write_script(DESCRIBE)}", "-q", stdin=subprocess.DEVNULL,
                home=_rlm_home, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode() == "notes.txt=notes from a file\n"


@pytest.mark.parametrize("data", [b"", b"  \n\n"])
def test_an_empty_stdin_adds_nothing(data: bytes, write_script: Script, notes: Path, _rlm_home: Path, tmp_path: Path) -> None:
    """It adds no context for an empty or blank pipe."""
    done = _ask("q", "-c", notes, "-m", f"scripted:{write_script(DESCRIBE)}", "-q", input=data, home=_rlm_home, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode() == "notes.txt=notes from a file\n"


def test_a_terminal_on_stdin_is_not_read(write_script: Script, notes: Path, _rlm_home: Path, tmp_path: Path) -> None:
    """It never waits on a terminal: with a pty that nobody types into, it answers from -c alone."""
    leader, follower = pty.openpty()
    try:
        done = _ask("q", "-c", notes, "-m", f"scripted:{write_script(DESCRIBE)}", "-q", stdin=follower, home=_rlm_home,
                    cwd=tmp_path)
    finally:
        os.close(follower)
        os.close(leader)
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode() == "notes.txt=notes from a file\n"


def test_a_socket_on_stdin_is_not_read(write_script: Script, notes: Path, _rlm_home: Path, tmp_path: Path) -> None:
    """It does not read a socket (its other end stays open: a read would hang until the timeout)."""
    ours, theirs = socket.socketpair()
    try:
        ours.sendall(b"not meant as input")
        done = _ask("q", "-c", notes, "-m", f"scripted:{write_script(DESCRIBE)}", "-q", stdin=theirs, home=_rlm_home,
                    cwd=tmp_path)
    finally:
        ours.close()
        theirs.close()
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode() == "notes.txt=notes from a file\n"


def test_c_dash_reads_stdin_where_it_stands(write_script: Script, notes: Path, _rlm_home: Path, tmp_path: Path) -> None:
    """It puts -c - at its place among the -c contexts."""
    other = tmp_path / "other.txt"
    other.write_text("the other file\n", encoding="utf-8")
    done = _ask("q", "-c", notes, "-c", "-", "-c", other, "-m", f"scripted:{write_script(DESCRIBE)}", "-q", input=b"in between",
                home=_rlm_home, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode() == "notes.txt=notes from a file | stdin=in between | other.txt=the other file\n"


def test_c_dash_reads_what_the_entry_point_was_given(write_script: Script, notes: Path, rlm_cli: CLI) -> None:
    """It reads -c - from sys.stdin in-process too."""
    res = rlm_cli("ask", "q", "-c", "-", "-m", f"scripted:{write_script(DESCRIBE)}", "-q", stdin=b"given in-process")
    assert res.code == 0, res.err
    assert res.out == "stdin=given in-process\n"


def test_c_dash_twice_is_a_usage_error(write_script: Script, rlm_cli: CLI) -> None:
    """It refuses to read standard input twice."""
    res = rlm_cli("ask", "q", "-c", "-", "-c", "-", "-m", f"scripted:{write_script(DESCRIBE)}", stdin=b"x")
    assert res.code == 2
    assert res.err == "rlm: error: -c - is given twice: standard input can be read once\n"


class _RunnersStdin:
    """Standard input as a test runner leaves it: no descriptor of its own, and reading fails."""

    def fileno(self) -> int:
        raise OSError("redirected stdin is pseudofile, has no fileno()")

    def read(self, *args: object) -> str:
        raise AssertionError("standard input was read")

    buffer = property(lambda self: self)


def test_a_stdin_without_a_descriptor_is_not_read(write_script: Script, notes: Path, capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """It leaves alone a standard input whose fileno() fails (pytest's own, say)."""
    from rlm_runtime.cli import main

    monkeypatch.setattr(sys, "stdin", _RunnersStdin())
    assert main(["ask", "q", "-c", str(notes), "-m", f"scripted:{write_script(DESCRIBE)}", "-q"]) == 0
    assert capsys.readouterr().out == "notes.txt=notes from a file\n"


@pytest.mark.parametrize("data", [b"text\x00with a NUL", b"\x01\x02\x03\x04\x05\x06\x07\x08" * 10, "utf-16, no mark".encode("utf-16-le")])
def test_binary_stdin_is_a_usage_error(data: bytes, write_script: Script, notes: Path, _rlm_home: Path, tmp_path: Path) -> None:
    """It exits 2 naming stdin for bytes that are not text (NULs without a UTF-16/32 mark)."""
    done = _ask("q", "-c", notes, "-m", f"scripted:{write_script(DESCRIBE)}", input=data, home=_rlm_home, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.decode() == "rlm: error: stdin looks like binary data (NUL or control bytes): only text can be a context\n"
    assert done.stdout == b""


@pytest.mark.parametrize("encoded", [codecs.BOM_UTF8 + "héllo wörld".encode(), "héllo wörld".encode("utf-16"),
                                     codecs.BOM_UTF16_BE + "héllo wörld".encode("utf-16-be"), "héllo wörld".encode("utf-32"),
                                     codecs.BOM_UTF32_BE + "héllo wörld".encode("utf-32-be")])
def test_stdin_is_decoded_by_its_byte_order_mark(encoded: bytes, write_script: Script, _rlm_home: Path, tmp_path: Path) -> None:
    """It decodes UTF-8 (its mark dropped), UTF-16 and UTF-32 by their byte-order marks."""
    done = _ask("q", "-m", f"scripted:{write_script(DESCRIBE)}", "-q", input=encoded, home=_rlm_home, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode() == "stdin=héllo wörld\n"


def test_invalid_utf8_on_stdin_is_replaced_with_a_warning(write_script: Script, _rlm_home: Path, tmp_path: Path) -> None:
    """It decodes invalid UTF-8 with replacement characters and one warning line, as for a file."""
    done = _ask("q", "-m", f"scripted:{write_script(DESCRIBE)}", "-q", input=b"caf\xe9 menu", home=_rlm_home, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode() == "stdin=caf\ufffd menu\n"
    assert "rlm: warning: stdin: invalid UTF-8 was decoded with replacement characters" in done.stderr.decode()


def test_stdin_over_the_cap_is_a_usage_error(write_script: Script, rlm_cli: CLI, monkeypatch: pytest.MonkeyPatch) -> None:
    """It exits 2 saying how to pass a larger input, without reading past the cap."""
    import rlm_runtime.cli.stdin

    monkeypatch.setattr(rlm_runtime.cli.stdin, "MAX_BYTES", 1000)
    res = rlm_cli("ask", "q", "-c", "-", "-m", f"scripted:{write_script(DESCRIBE)}", stdin=b"x" * 1001)
    assert res.code == 2
    assert res.err == "rlm: error: standard input holds more than 1,000 bytes: save it to a file and pass it with -c PATH\n"
    res = rlm_cli("ask", "q", "-c", "-", "-m", f"scripted:{write_script(DESCRIBE)}", "-q", stdin=b"x" * 1000)
    assert res.code == 0, res.err


# ----------------------------------------------------------------- model names, before any work


def test_an_unknown_model_is_refused_before_the_run(notes: Path, rlm_cli: CLI, tmp_path: Path) -> None:
    """It exits 2 with one error line: no iteration shown, no trace written, no sandbox started."""
    trace = tmp_path / "trace.jsonl"
    res = rlm_cli("ask", "q", "-c", notes, "-m", "nosuch/model", "--trace", trace)
    assert res.code == 2
    assert res.err.startswith("rlm: error: unknown model 'nosuch/model'") and res.err.count("\n") == 1
    assert "---" not in res.err and "iteration" not in res.err
    assert not trace.exists()


def test_an_unknown_model_names_the_nearest(notes: Path, rlm_cli: CLI) -> None:
    """It suggests the closest name litellm knows."""
    res = rlm_cli("ask", "q", "-c", notes, "--model", "gpt4o", "-q")
    assert res.code == 2
    assert res.err.rstrip("\n").endswith("did you mean 'gpt-4o'?")


def test_an_unknown_sub_model_is_refused_before_the_run(write_script: Script, notes: Path, rlm_cli: CLI, tmp_path: Path) -> None:
    """It checks --sub-model as well, before the root model's first turn."""
    trace = tmp_path / "trace.jsonl"
    res = rlm_cli("ask", "q", "-c", notes, "-m", f"scripted:{write_script(DESCRIBE)}", "--sub-model", "nosuch/model",
                  "--trace", trace)
    assert res.code == 2
    assert res.err.startswith("rlm: error: unknown model 'nosuch/model'") and "iteration" not in res.err
    assert not trace.exists()


def test_a_missing_key_is_refused_before_the_run(notes: Path, rlm_cli: CLI, monkeypatch: pytest.MonkeyPatch) -> None:
    """It names the missing variable before showing any iteration."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    res = rlm_cli("ask", "q", "-c", notes, "-m", "openai/gpt-4o-mini")
    assert res.code == 2
    assert "OPENAI_API_KEY" in res.err and "iteration" not in res.err and res.err.count("\n") == 1


def test_a_local_model_typo_names_the_nearest(notes: Path, rlm_cli: CLI) -> None:
    """It suggests the local model meant."""
    res = rlm_cli("ask", "q", "-c", notes, "-m", "local:qwen2.5-coder-1.5", "-q")
    assert res.code == 2
    assert "unknown local model 'qwen2.5-coder-1.5'" in res.err and "did you mean 'qwen2.5-coder-1.5b'?" in res.err


def test_a_bad_model_is_refused_before_stdin_is_read(_rlm_home: Path, tmp_path: Path) -> None:
    """It says the model is unknown rather than complain about (or wait for) standard input."""
    done = _ask("q", "-m", "nosuch/model", input=b"\x00 binary that would be refused", home=_rlm_home, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.decode().startswith("rlm: error: unknown model 'nosuch/model'")


def test_m_is_short_for_model(write_script: Script, tmp_path: Path, rlm_cli: CLI) -> None:
    """It takes -m for --model."""
    hay = tmp_path / "hay.txt"
    hay.write_text(haystack(), encoding="utf-8")
    res = rlm_cli("ask", "q", "-c", hay, "-m", f"scripted:{write_script(code('FINAL(len(context))'))}", "-q")
    assert res.code == 0 and int(res.out) > 100_000


# ----------------------------------------------------------------- contexts with nothing to read


def _nothing(tmp_path: Path) -> tuple[Path, Path]:
    folder = tmp_path / "blobs"
    folder.mkdir()
    (folder / "a.dat").write_bytes(b"\x00\x01\x02binary\x00" * 10)
    (folder / "b.txt").write_text("", encoding="utf-8")
    empty = tmp_path / "empty.txt"
    empty.write_text("", encoding="utf-8")
    return folder, empty


def test_contexts_with_nothing_to_read_are_warned_of(write_script: Script, rlm_cli: CLI, tmp_path: Path) -> None:
    """It warns, naming each context's reason, when every context is empty or skipped, and still runs."""
    folder, empty = _nothing(tmp_path)
    res = rlm_cli("ask", "q?", "-c", folder, "-c", empty, "-m", f"scripted:{write_script(code('FINAL(1)'))}", "-q")
    assert res.code == 0 and res.out == "1\n"
    assert "rlm: warning: no context has text to read (blobs: 2 documents, every one empty or skipped: " in res.err
    assert "binary content 1" in res.err and "empty.txt: empty" in res.err


def test_strict_stops_before_the_model_runs(write_script: Script, rlm_cli: CLI, tmp_path: Path) -> None:
    """It exits 1 with --strict, before any model call (the script's one reply is left unused), and says why."""
    folder, _ = _nothing(tmp_path)
    trace = tmp_path / "t.jsonl"
    res = rlm_cli("ask", "q?", "-c", folder, "--strict", "-m", f"scripted:{write_script(code('FINAL(1)'))}", "--trace", trace)
    assert res.code == 1 and res.out == ""
    assert res.err.startswith("rlm: error: no context has text to read: blobs: 2 documents")
    assert not trace.exists()


def test_one_readable_context_is_enough(write_script: Script, notes: Path, rlm_cli: CLI, tmp_path: Path) -> None:
    """It says nothing when any context has text, even beside empty ones, --strict or not."""
    folder, empty = _nothing(tmp_path)
    res = rlm_cli("ask", "q?", "-c", folder, "-c", empty, "-c", notes, "--strict", "-m",
                  f"scripted:{write_script(code('FINAL(1)'))}", "-q")
    assert res.code == 0 and "warning" not in res.err


def test_a_binary_file_or_a_device_is_one_error_and_no_warning(write_script: Script, rlm_cli: CLI, tmp_path: Path) -> None:
    """A binary file is refused (exit 2) with its reason alone: no warning that suggests
    --strict first; a device is refused as not a file or folder, not as "not found"."""
    blob = tmp_path / "blob.dat"
    blob.write_bytes(b"\x00\x01\x02binary" * 100)
    script = f"scripted:{write_script(code('FINAL(1)'))}"
    res = rlm_cli("ask", "q?", "-c", blob, "-m", script, "-q")
    assert res.code == 2 and "warning" not in res.err and "binary" in res.err and res.err.count("\n") == 1
    res = rlm_cli("ask", "q?", "-c", "/dev/null", "-m", script, "-q")
    assert res.code == 2 and "not a regular file or a folder" in res.err and "not found" not in res.err


def test_no_context_at_all_is_said(write_script: Script, rlm_cli: CLI) -> None:
    """With no -c, no --memory and nothing on standard input, it warns that the model answers
    from the question alone, and runs."""
    res = rlm_cli("ask", "q?", "-m", f"scripted:{write_script(code('FINAL(1)'))}")
    assert res.code == 0 and "no context (-c PATH" in res.err and "answers from the question alone" in res.err
