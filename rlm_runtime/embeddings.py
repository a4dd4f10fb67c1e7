"""Text to vectors, offline: the embedding model behind search by meaning.

One job: turn texts into unit-length ``float32`` vectors whose dot product says how close
their meanings are. The model is a static one: a table of one vector per token, a text's
vector the mean of its tokens' vectors. The default, ``wordllama`` (the ``embed`` extra),
ships its 256-dimension table (16 MB) and its tokenizer inside its wheel; they are loaded
here from those files with ``safetensors`` and ``tokenizers`` directly. wordllama's own
``load()`` is never called: it looks for the tokenizer in another folder and then downloads
from a model hub (and importing the package configures the root logger), so nothing here
can reach a network: no hub client is imported, no file is fetched, and a missing file is
"no embedder", never a download.

How a text is read: lower-cased, cut into words (runs of letters and digits: ``snake_case``
and ``a.b`` are two words each), stop words left out; each word is tokenized alone, the way
the tokenizer reads a word after a space, and its token ids are cached; the text's vector is
the mean of its words' token vectors, normalised. Punctuation, whitespace and stop words are
most of a source file's tokens and carry little meaning: leaving them out ranked the answer of
paraphrased questions higher (bench/SEARCH_MEANING.md), and a word seen once is never
tokenized again, which makes it fast.

Without the extra, ``default_embedder()`` is None, search stays BM25, and one log line says
why (``unavailable_reason()`` has the sentence for a command line to print).
"""

from __future__ import annotations

import importlib.util
import logging
import re
import threading
from collections.abc import Callable, Sequence
from functools import lru_cache
from itertools import chain, repeat
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

log = logging.getLogger(__name__)

#: Characters of a text embedded at most (a query is short; a chunk is at most ~800 tokens).
MAX_CHARS = 16_000
#: Distinct words whose token ids are kept; the cache starts over past it.
CACHE_WORDS = 200_000
#: A word, as the embedder reads text (letters and digits of any script).
WORDS = re.compile(r"[^\W_]+")
#: Every ASCII character that is not a letter or a digit, to a space.
_ASCII_GAPS = str.maketrans({c: " " for c in map(chr, range(128)) if not c.isalnum()})
#: The install hint shown when there is no model.
INSTALL_HINT = "pip install 'rlm_runtime[embed]'"

#: The model the ``embed`` extra installs: wordllama's l2_supercat table, 256 dimensions.
WORDLLAMA_WEIGHTS = ("weights", "l2_supercat_256.safetensors")
WORDLLAMA_TOKENIZER = ("tokenizers", "l2_supercat_tokenizer_config.json")
WORDLLAMA_NAME = "wordllama-l2_supercat-256/lower-words-1"


class Embedder(Protocol):
    """Text to vectors.

    Lifecycle: made by a factory (``default_embedder``, or a test's), ready once made, shared
    by every thread of the process; nothing to close. ``embed`` raises nothing for any list
    of ``str``: an empty text, or one with no word the model knows, is the zero vector.
    ``name`` identifies the model and its way of reading text: vectors stored under one name
    are never compared with a query embedded under another.
    """

    @property
    def name(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """An ``(len(texts), dim)`` array of unit-length (or zero) float32 rows."""
        ...


#: What a store is given: called once, when vectors are first needed; None: no vectors.
EmbedderFactory = Callable[[], "Embedder | None"]


class StaticEmbedder:
    """A static embedding model: a token table and its tokenizer (see the module docstring).

    Args:
        table: ``(vocabulary, dim)`` token vectors (any float dtype; kept as float32).
        tokenizer: a ``tokenizers.Tokenizer`` whose ids index ``table``.
        name: the model's name (stored beside the vectors it makes).
        stopwords: words left out (default: the store's own list, ``memory.terms.STOPWORDS``).
    """

    def __init__(self, table: Any, tokenizer: Any, name: str, stopwords: frozenset[str] | None = None) -> None:
        import numpy as np
        from tokenizers import pre_tokenizers

        from rlm_runtime.memory.terms import STOPWORDS

        self.table = np.ascontiguousarray(table, dtype=np.float32)
        self._name = name
        # A word alone, read as after a space: split on spaces, "▁" before each piece (the
        # tokenizer's own normalizer would prepend it once and join the words into one piece).
        self.tokenizer = tokenizer
        self.tokenizer.normalizer = None
        self.tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
        self.tokenizer.no_padding()
        self.tokenizer.no_truncation()
        self.stopwords = STOPWORDS if stopwords is None else stopwords
        self._ids: dict[str, tuple[int, ...]] = {}
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self._name

    @property
    def dim(self) -> int:
        return int(self.table.shape[1])

    def _learn(self, words: Sequence[str]) -> None:
        """Tokenize the words not seen yet, in one call (no thread pool: ``encode``, not
        ``encode_batch``). A word holding "▁" (the tokenizer's own word mark, which it would
        split at) is left unknown."""
        new = [w for w in dict.fromkeys(words) if w not in self._ids and "\u2581" not in w]
        if not new:
            return
        encoding = self.tokenizer.encode(" ".join(new), add_special_tokens=False)
        per: list[list[int]] = [[] for _ in new]
        vocabulary = self.table.shape[0]
        for token, word in zip(encoding.ids, encoding.word_ids, strict=True):
            if word is not None and 0 <= token < vocabulary and word < len(per):
                per[word].append(token)
        with self._lock:
            if len(self._ids) + len(new) > CACHE_WORDS:
                self._ids.clear()
            self._ids.update(zip(new, map(tuple, per), strict=True))

    def words(self, text: str) -> list[str]:
        """The words of ``text`` the model reads (see the module docstring)."""
        low = str(text)[:MAX_CHARS].lower()
        # ASCII text (most of it) is split by a translation table, several times faster than
        # the regular expression, which other scripts need.
        found = low.translate(_ASCII_GAPS).split() if low.isascii() else WORDS.findall(low)
        stop = self.stopwords
        return [w for w in found if w not in stop]

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        import numpy as np

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(texts), 256):
            part = [self.words(t) for t in texts[start:start + 256]]
            self._learn([w for words in part for w in words])
            known = self._ids
            for row, words in enumerate(part, start):
                ids = np.fromiter(chain.from_iterable(map(known.get, words, repeat(()))), dtype=np.intp)
                if ids.size:
                    out[row] = self.table[ids].sum(axis=0)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out


def wordllama_files() -> tuple[Path, Path] | None:
    """The weights and tokenizer files inside the installed wordllama wheel, or None. The
    package is located, not imported (its ``__init__`` sets up the root logger)."""
    try:
        spec = importlib.util.find_spec("wordllama")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(list(spec.submodule_search_locations)[0])
    weights, tokenizer = root.joinpath(*WORDLLAMA_WEIGHTS), root.joinpath(*WORDLLAMA_TOKENIZER)
    return (weights, tokenizer) if weights.is_file() and tokenizer.is_file() else None


def load_wordllama(files: tuple[Path, Path] | None = None) -> StaticEmbedder:
    """The wordllama model from its bundled files (local paths only: nothing is downloaded).

    Raises:
        ImportError: numpy, safetensors or tokenizers is missing.
        FileNotFoundError: the wheel's files are not there.
    """
    files = files or wordllama_files()
    if files is None:
        raise FileNotFoundError("the wordllama package and its bundled model files are not installed")
    from safetensors.numpy import load_file
    from tokenizers import Tokenizer

    weights, tokenizer = files
    tensors = load_file(str(weights))
    return StaticEmbedder(tensors["embedding.weight"], Tokenizer.from_file(str(tokenizer)), WORDLLAMA_NAME)


def installed() -> bool:
    """Whether the default model can load (its packages and files are there), without
    importing or loading anything."""
    try:
        found = all(importlib.util.find_spec(name) is not None for name in ("numpy", "safetensors", "tokenizers"))
    except (ImportError, ValueError):
        return False
    return found and wordllama_files() is not None


_reason: list[str] = []


@lru_cache(maxsize=1)
def default_embedder() -> Embedder | None:
    """The default model (wordllama from its wheel), loaded once per process; None when the
    ``embed`` extra is not installed or its files cannot be read (logged once)."""
    try:
        return load_wordllama()
    except Exception as e:  # whatever stops the model loading leaves search by words: never a failed search
        missing = isinstance(e, (ImportError, FileNotFoundError))
        _reason.append(f"no embedding model ({'for search by meaning: ' + INSTALL_HINT if missing else f'{type(e).__name__}: {e}'})")
        log.warning("%s; search ranks by words only (BM25)", _reason[-1])
        return None


def unavailable_reason() -> str | None:
    """Why ``default_embedder()`` is None (after it was called), else None."""
    return _reason[-1] if _reason else None


__all__ = ["Embedder", "EmbedderFactory", "StaticEmbedder", "default_embedder", "installed", "load_wordllama",
           "unavailable_reason", "wordllama_files"]
