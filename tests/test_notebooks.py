"""The notebooks under ``notebooks/``: each runs top to bottom in a fresh kernel, and each is
committed with its outputs cleared.

The kernel is this interpreter (``sys.executable``, the venv's), through a kernel spec
written to a temp folder, so a ``python3`` kernel installed elsewhere on the machine can
never stand in for it. It runs with the notebook's folder as its working directory, as
Jupyter does, with ``RLM_HOME`` in a temp folder and Jupyter's and IPython's own files there
too. ``RLM_NOTEBOOK_LOCAL`` is removed: the local-model sections print that they are
skipped, so the suite never waits for a model.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

NOTEBOOKS_DIR = Path(__file__).resolve().parent.parent / "notebooks"
NOTEBOOKS = sorted(NOTEBOOKS_DIR.glob("*.ipynb"))
#: Seconds one cell may take (the slowest here take about two).
CELL_TIMEOUT_S = 120
KERNEL_NAME = "rlm-notebook-test"


@pytest.fixture
def kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A kernel spec that starts ipykernel on this very interpreter; its name."""
    jupyter = tmp_path / "jupyter"
    spec_dir = jupyter / "kernels" / KERNEL_NAME
    spec_dir.mkdir(parents=True)
    spec = {"argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "rlm_runtime test kernel", "language": "python"}
    (spec_dir / "kernel.json").write_text(json.dumps(spec), encoding="utf-8")
    monkeypatch.setenv("JUPYTER_PATH", str(jupyter))
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "runtime"))
    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    monkeypatch.setenv("RLM_HOME", str(tmp_path / "rlm_home"))
    monkeypatch.delenv("RLM_NOTEBOOK_LOCAL", raising=False)
    return KERNEL_NAME


def test_there_are_notebooks() -> None:
    """It finds the notebooks the docs promise (a rename must not silently drop one from CI)."""
    names = {p.name for p in NOTEBOOKS}
    assert {"sandbox_and_contexts.ipynb", "quickstart.ipynb", "memory.ipynb"} <= names, names


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_notebook_runs_top_to_bottom(path: Path, kernel: str) -> None:
    """It runs every cell of the notebook in order, from notebooks/, with no cell raising."""
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, kernel_name=kernel, timeout=CELL_TIMEOUT_S, startup_timeout=120,
                            resources={"metadata": {"path": str(path.parent)}})
    began = time.monotonic()
    try:
        client.execute()
    except CellExecutionError as e:
        pytest.fail(f"{path.name}: a cell raised:\n{e}")
    errors = [(n, o) for n, cell in enumerate(nb.cells) if cell.cell_type == "code"
              for o in cell.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, f"{path.name}: cells with errors: {[n for n, _ in errors]}"
    ran = [cell.execution_count for cell in nb.cells if cell.cell_type == "code" and cell.source.strip()]
    assert all(isinstance(n, int) for n in ran), f"{path.name}: some cells did not run"
    print(f"{path.name}: {len(ran)} cells in {time.monotonic() - began:.1f}s")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_committed_notebook_has_no_outputs(path: Path) -> None:
    """It keeps notebooks in the repository valid, with outputs cleared and execution counts null."""
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    dirty = [n for n, cell in enumerate(nb.cells) if cell.cell_type == "code"
             and (cell.get("outputs") or cell.get("execution_count") is not None)]
    assert not dirty, f"{path.name}: cells {dirty} hold outputs or execution counts; clear them before committing"
