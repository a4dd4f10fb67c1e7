"""``utf8safe``: strings UTF-8 can encode, for JSON answers and the memory store."""

from __future__ import annotations

from rlm_runtime.utf8safe import is_utf8, utf8safe


def test_it_replaces_each_lone_surrogate_wherever_it_sits() -> None:
    """It puts U+FFFD in place of each lone surrogate, in strings, keys, lists and tuples, and
    leaves text and other values as they are."""
    data = {"a\ud800": ["b\udcffc", ("\udfff", 3)], "ok": "café 😀", "n": None, 1.5: True}
    assert utf8safe(data) == {"a\ufffd": ["b\ufffdc", ("\ufffd", 3)], "ok": "café 😀", "n": None, 1.5: True}
    assert utf8safe("\ud83d\ude00") == "\ufffd\ufffd"  # a pair of surrogate code points is no character either
    text = "plain ascii"
    assert utf8safe(text) is text


def test_it_tells_text_from_what_holds_a_lone_surrogate() -> None:
    """It says whether UTF-8 can encode a string."""
    assert is_utf8("café 😀") and is_utf8("")
    assert not is_utf8("bad\udcff.txt") and not is_utf8("\ud800")
