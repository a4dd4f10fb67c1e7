"""UTF-16 and UTF-32 text with a byte order mark is read as text (a UTF-8 copy made block by
block), alone, in a folder and inside the sandbox; what would still be binary stays refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlm_runtime.context import handles as handles_module
from rlm_runtime.context import open_context
from rlm_runtime.errors import ContextError
from rlm_runtime.sandbox import Sandbox

TEXT = "item: kettle\nshelf: 3 — upper\n\nitem: ladle\nshelf: 7 (北)\n"
FORMS = {"utf-16": TEXT.encode("utf-16"), "utf-16-be": b"\xfe\xff" + TEXT.encode("utf-16-be"),
         "utf-32": TEXT.encode("utf-32"), "utf-32-be": b"\x00\x00\xfe\xff" + TEXT.encode("utf-32-be")}


@pytest.mark.parametrize("form", sorted(FORMS))
def test_a_wide_file_reads_as_its_text(form: str, tmp_path: Path) -> None:
    """It decodes the file by its mark: peek, grep and records see the text, and the file is left as it was."""
    path = tmp_path / f"{form}.txt"
    path.write_bytes(FORMS[form])
    handle = open_context(path)
    assert handle.transcoded is not None and handle.transcoded.startswith(form[:6])
    assert handle.peek(12).startswith("item: kettle\n")
    assert [m.line for m in handle.grep("北")] == ["shelf: 7 (北)"]
    assert handle.records().find("ladle")["shelf"] == "7 (北)"
    assert path.read_bytes() == FORMS[form]


def test_the_sandbox_gets_the_text_of_a_wide_file_and_of_a_wide_document(tmp_path: Path) -> None:
    """It hands the worker the decoded text, for a file and for a document of a folder (not 'binary content')."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "wide.txt").write_bytes(FORMS["utf-16"])
    (tmp_path / "docs" / "plain.txt").write_text("item: spoon\n", encoding="utf-8")
    (tmp_path / "one.txt").write_bytes(FORMS["utf-32"])
    with Sandbox("default", contexts=[tmp_path / "one.txt", tmp_path / "docs"]) as sb:
        result = sb.execute("print(contexts[0].grep('kettle'))\nprint(contexts[1].grep('北'))\nprint(contexts[1].names())")
    assert result.error is None, result.error
    assert "item: kettle" in result.stdout and "wide.txt:5: shelf: 7 (北)" in result.stdout


def test_undecodable_bytes_are_replaced_and_control_text_stays_refused(tmp_path: Path) -> None:
    """It replaces a broken code unit instead of failing, and still refuses text that decodes to control characters."""
    broken = tmp_path / "broken.txt"
    broken.write_bytes(b"\xff\xfe" + "ok line\n".encode("utf-16-le") + b"\x00\xd8")  # a lone surrogate at the end
    assert open_context(broken).peek(7).startswith("ok line")
    control = tmp_path / "control.txt"
    control.write_bytes(b"\xff\xfe" + ("\x01\x02\x03" * 200).encode("utf-16-le"))
    with pytest.raises(ContextError, match="binary"):
        open_context(control)


def test_a_wide_file_past_the_cap_is_refused_with_the_way_to_convert_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """It refuses a UTF-16 file larger than the decoding cap, naming iconv, and opens a smaller one."""
    monkeypatch.setattr(handles_module, "MAX_TRANSCODED_BYTES", 64)
    big = tmp_path / "big.txt"
    big.write_bytes(("line\n" * 100).encode("utf-16"))
    with pytest.raises(ContextError, match="iconv -f utf-16-le -t utf-8"):
        open_context(big)


def test_the_check_for_something_to_read_does_not_decode_a_wide_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """It judges a UTF-16 file by its head (text: something to read), without decoding it (the run decodes it once)."""
    from rlm_runtime.context.sources import nothing_to_read

    path = tmp_path / "wide.txt"
    path.write_bytes(FORMS["utf-16"])

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("decoded during the check")

    monkeypatch.setattr(handles_module, "_transcoded", refuse)
    assert nothing_to_read([path]) is None
    (tmp_path / "empty.txt").write_bytes(b"")
    assert nothing_to_read([tmp_path / "empty.txt"]) == "empty.txt: empty"
