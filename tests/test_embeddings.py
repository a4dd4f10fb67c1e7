"""The embedding model: wordllama's bundled files, loaded with no network, and what it makes of text."""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rlm_runtime import embeddings

pytestmark = pytest.mark.skipif(not embeddings.installed(), reason="the embed extra is not installed")


def test_loads_from_the_wheel_with_every_socket_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """It loads the model and embeds text while any attempt to open a connection raises."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"a network connection was attempted: {args!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    model = embeddings.load_wordllama()
    assert model.dim == 256 and model.name.startswith("wordllama-")
    assert model.embed(["a first sentence", ""]).shape == (2, 256)


def test_a_fresh_process_loads_it_offline_without_importing_a_hub_client() -> None:
    """It loads in a new process with sockets refused and HOME empty, and imports neither wordllama's loader nor a hub client."""
    code = textwrap.dedent("""
        import socket, sys
        def refuse(*a, **k):
            raise SystemExit("network attempted")
        socket.socket.connect = refuse
        socket.create_connection = refuse
        socket.getaddrinfo = refuse
        from rlm_runtime.embeddings import default_embedder
        model = default_embedder()
        assert model is not None, "no model"
        model.embed(["refunds are accepted within thirty days"])
        loaded = [m for m in ("wordllama", "huggingface_hub", "requests") if m in sys.modules]
        print(",".join(loaded))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
                               "HF_HUB_OFFLINE": "", "NO_PROXY": ""})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ""


def test_ranks_a_paraphrase_first() -> None:
    """It ranks 'Refunds are accepted within 30 days' first for 'when may I get my money back?' (the real weights)."""
    model = embeddings.default_embedder()
    assert model is not None
    docs = ["Refunds are accepted within 30 days of purchase.", "The shipping takes five business days.",
            "Our office is open Monday to Friday.", "Passwords must contain at least eight characters."]
    scores = model.embed(docs) @ model.embed(["when may I get my money back?"])[0]
    assert int(scores.argmax()) == 0


def test_reads_words_lower_cased_without_stop_words_or_punctuation() -> None:
    """It embeds a text as its lower-cased words without stop words: case, punctuation and stop words change nothing."""
    model = embeddings.load_wordllama()
    a, b, empty = model.embed(["The Refund, of the PURCHASE!", "refund purchase", " ... the of "])
    assert float(a @ b) == pytest.approx(1.0, abs=1e-5)
    assert not empty.any()
    assert model.words("snake_case x.y") == ["snake", "case", "x", "y"]


def test_any_text_embeds_to_unit_rows() -> None:
    """It embeds any str (control characters, other scripts, huge) to unit-length or zero float32 rows."""
    import numpy as np

    model = embeddings.load_wordllama()
    texts = ["\x00\x01", "日本語のテキスト", "a\u2581b", "\ud800 lone", "x" * 100_000, "word " * 50_000, ""]
    out = model.embed(texts)
    assert out.dtype == np.float32 and out.shape == (len(texts), 256)
    norms = np.linalg.norm(out, axis=1)
    assert all(n == pytest.approx(1.0, abs=1e-5) or n == 0 for n in norms)


def test_without_the_files_there_is_no_model_and_one_log_line(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """It returns None, logs why once, and says how to install it, when wordllama is missing."""
    monkeypatch.setattr(embeddings, "wordllama_files", lambda: None)
    monkeypatch.setattr(embeddings, "_reason", [])
    embeddings.default_embedder.cache_clear()
    try:
        with caplog.at_level("WARNING", logger="rlm_runtime.embeddings"):
            assert embeddings.default_embedder() is None
            assert embeddings.default_embedder() is None
        assert len(caplog.records) == 1 and "pip install" in caplog.records[0].getMessage()
        assert "rlm_runtime[embed]" in str(embeddings.unavailable_reason())
    finally:
        embeddings.default_embedder.cache_clear()
