"""Where rlm_runtime finds its files, and the one place that reads the environment.

Other modules receive paths and settings as arguments; only this module and ``cli/`` look
at ``os.environ``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_PACKAGE_DIR = Path(__file__).resolve().parent


def _data_dir(name: str) -> Path:
    """A folder shipped with the package: inside the wheel, or at the top of a checkout."""
    bundled = _PACKAGE_DIR / "_data" / name
    if bundled.is_dir():
        return bundled
    return _PACKAGE_DIR.parent / name


@dataclass(frozen=True)
class Paths:
    """Folders searched for policies (and, later, brain files): the user's first."""

    home: Path
    models_dir: Path | None = None

    @property
    def user_policies(self) -> Path:
        return self.home / "sandbox_policies"

    @property
    def policy_dirs(self) -> tuple[Path, ...]:
        return (self.user_policies, _data_dir("sandbox_policies"))

    @property
    def brain_dirs(self) -> tuple[Path, ...]:
        return (self.home / "brain", _data_dir("brain"))

    @property
    def traces(self) -> Path:
        return self.home / "traces"

    @property
    def registry(self) -> Path:
        """The registry of named contexts (``rlm context``, ``ctx:ID``)."""
        return self.home / "registry.db"

    @property
    def logs(self) -> Path:
        """Logs of helper processes (the local model server)."""
        return self.home / "logs"

    @property
    def models(self) -> Path:
        """Local model files: ``RLM_MODELS_DIR``, else ``$RLM_HOME/models``."""
        return self.models_dir or self.home / "models"


def paths_from_env(environ: dict[str, str] | None = None) -> Paths:
    """Resolve ``RLM_HOME`` (default ``~/.rlm``) and ``RLM_MODELS_DIR``."""
    env = os.environ if environ is None else environ
    home = env.get("RLM_HOME") or str(Path("~/.rlm").expanduser())
    models = env.get("RLM_MODELS_DIR")
    return Paths(home=Path(home), models_dir=Path(models) if models else None)


def user_path(text: str | os.PathLike[str]) -> Path:
    """A path a person gave, with a leading ``~`` or ``~user`` expanded.

    Raises:
        ConfigError: ``~user`` names no user of this machine, or ``~`` has no home
            (``Path.expanduser`` raises a bare ``RuntimeError`` for both).
    """
    try:
        return Path(text).expanduser()
    except RuntimeError as e:
        from rlm_runtime.errors import ConfigError

        head = os.fspath(text).split(os.sep, 1)[0]
        raise ConfigError(f"cannot expand {head!r} in {os.fspath(text)!r}: no such user (or no home folder)") from e


def tiktoken_cache_dir(environ: dict[str, str] | None = None) -> str | None:
    """Where tiktoken finds its encodings offline: ``TIKTOKEN_CACHE_DIR`` if set, else the
    tokenizers folder litellm ships (found without importing litellm, which is slow)."""
    env = os.environ if environ is None else environ
    if env.get("TIKTOKEN_CACHE_DIR"):
        return env["TIKTOKEN_CACHE_DIR"]
    import importlib.util

    spec = importlib.util.find_spec("litellm")
    for root in (spec.submodule_search_locations or []) if spec else []:
        folder = Path(root) / "litellm_core_utils" / "tokenizers"
        if folder.is_dir():
            return str(folder)
    return None


def prepare_tiktoken() -> None:
    """Point tiktoken at an offline cache before it is first used (it reads the variable)."""
    folder = tiktoken_cache_dir()
    if folder:
        os.environ.setdefault("TIKTOKEN_CACHE_DIR", folder)


def load_probe_settings(start: Path | None = None) -> tuple[dict[str, object], str | None]:
    """Probe settings from ``rlm.toml`` (table ``[probe]``) or ``pyproject.toml``
    (``[tool.rlm.probe]``), looked up from ``start`` (default: cwd) towards the root.

    Returns the table and the file it came from (None when no file has one).
    """
    return load_settings("probe", start)


def load_settings(table: str, start: Path | None = None) -> tuple[dict[str, object], str | None]:
    """The table ``[TABLE]`` of the nearest ``rlm.toml`` (or ``[tool.rlm.TABLE]`` of a
    ``pyproject.toml``) from ``start`` (default: cwd) towards the root, and its file (None
    when no file has one)."""
    import tomllib

    folder = (start or Path.cwd()).resolve()
    for candidate in (folder, *folder.parents):
        for name, keys in (("rlm.toml", (table,)), ("pyproject.toml", ("tool", "rlm", table))):
            path = candidate / name
            if not path.is_file():
                continue
            try:
                data: object = tomllib.loads(path.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError) as e:
                # RecursionError: tomllib recurses once per nested array or table.
                from rlm_runtime.errors import ConfigError

                reason = "nested too deeply" if isinstance(e, RecursionError) else e
                raise ConfigError(f"cannot read {path}: {reason}") from e
            for key in keys:
                data = data.get(key) if isinstance(data, dict) else None
            if isinstance(data, dict):
                return data, str(path)
    return {}, None


def prepare_litellm() -> None:
    """Set what litellm reads at import: no price-map download, offline tokenizers."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    prepare_tiktoken()


DEFAULT_LOCAL_MODEL = "local:qwen2.5-coder-1.5b"
#: A provider key present in the environment picks that provider's small model.
_KEYED_DEFAULTS = (("OPENAI_API_KEY", "openai/gpt-4o-mini"), ("ANTHROPIC_API_KEY", "anthropic/claude-3-5-haiku-latest"))


def default_model(environ: dict[str, str] | None = None) -> tuple[str, str | None]:
    """The model used when none is given, and a note saying why when it was not asked for.

    ``RLM_MODEL`` if set; else a small model of the provider whose key is set; else the
    embedded local model.
    """
    env = os.environ if environ is None else environ
    name = env.get("RLM_MODEL", "").strip()
    if name:
        return name, None
    for key, model in _KEYED_DEFAULTS:
        if env.get(key):
            return model, f"no model configured: using {model} because {key} is set (set RLM_MODEL or pass --model)"
    return DEFAULT_LOCAL_MODEL, (f"no model configured and no provider key set: using {DEFAULT_LOCAL_MODEL}, "
                                 "which runs offline (set RLM_MODEL or pass --model to change)")


def local_engine_choice(environ: dict[str, str] | None = None) -> str | None:
    """``RLM_LOCAL_ENGINE``: what serves ``local:`` models (``xllamacpp``, the default;
    ``llama-server`` from PATH; or the path of a llama-server binary). None when unset."""
    env = os.environ if environ is None else environ
    return env.get("RLM_LOCAL_ENGINE", "").strip() or None


#: Names of environment variables whose values are credentials (``redact`` masks their values
#: wherever they appear in text the host hands to sandboxed code or writes to a file).
#: Matched against the name's words (split on ``_``), a trailing S dropped (``API_KEYS``):
#: the short words whole (``PAT`` is not ``PATH``), the long ones anywhere in a word
#: (``PGPASSWORD``, ``MYAPIKEY``, ``SLACKTOKEN``), but for the tokenizers' own settings.
_SECRET_WORDS = frozenset({"KEY", "APIKEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASS", "PWD", "CREDENTIAL",
                           "CREDENTIALS", "AUTH", "PAT"})
_SECRET_PARTS = ("APIKEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASSPHRASE", "CREDENTIAL", "PRIVATEKEY")
_NOT_SECRET_WORDS = frozenset({"TIKTOKEN", "TOKENIZER", "TOKENIZERS"})


def _secret_word(word: str) -> bool:
    if word in _NOT_SECRET_WORDS:
        return False
    bare = word[:-1] if word.endswith("S") and len(word) > 3 else word
    return word in _SECRET_WORDS or bare in _SECRET_WORDS or any(part in word for part in _SECRET_PARTS)


#: Words of the names of variables that may hold a URL with ``user:pass@``.
_URL_WORDS = frozenset({"PROXY", "URL", "URI", "BASE", "ENDPOINT", "HOST", "SERVER", "DSN"})

_names_lock = threading.Lock()
_names_cache: tuple[tuple[Any, ...], tuple[str, ...], tuple[str, ...]] | None = None


def _credential_names(env: Mapping[str, str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(names of key-like variables, names of variables that may hold a URL), cached for
    ``os.environ`` while its set of names is unchanged (scanning it costs ~50 µs, and the
    redactor asks for every event and host call)."""
    global _names_cache
    raw = getattr(env, "_data", None) if env is os.environ else None
    fingerprint = tuple(raw) if isinstance(raw, dict) else None
    with _names_lock:
        if fingerprint is not None and _names_cache is not None and _names_cache[0] == fingerprint:
            return _names_cache[1], _names_cache[2]
    keys, urls = [], []
    for name in list(env):
        words = set(name.upper().split("_"))
        if any(_secret_word(w) for w in words) and name.upper() != "PWD":
            keys.append(name)
        elif _URL_WORDS & words:
            urls.append(name)
    if fingerprint is not None:
        with _names_lock:
            _names_cache = (fingerprint, tuple(keys), tuple(urls))
    return tuple(keys), tuple(urls)


def secret_env_values(environ: Mapping[str, str] | None = None) -> list[str]:
    """The values of the environment's key-like variables (``*_API_KEY``, ``*_TOKEN``,
    ``*_SECRET``, ``*_PASSWORD``...), and the credentials in URL-valued ones (a proxy or
    ``*_API_BASE`` holding ``user:pass@``)."""
    from urllib.parse import unquote, urlsplit

    env = os.environ if environ is None else environ
    keys, urls = _credential_names(env)
    found = [value for name in keys if (value := env.get(name))]
    for name in urls:
        value = env.get(name) or ""
        if "://" in value and "@" in value:
            try:
                parts = urlsplit(value)
            except ValueError:
                continue
            found += [unquote(v) for v in (parts.username, parts.password) if v]
    return found


def debug_enabled(environ: dict[str, str] | None = None) -> bool:
    """``RLM_DEBUG`` set to anything but empty, 0, false or no: the CLI then shows tracebacks."""
    env = os.environ if environ is None else environ
    return env.get("RLM_DEBUG", "").strip().lower() not in ("", "0", "false", "no")
