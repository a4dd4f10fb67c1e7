"""The one place secrets are taken out of text the host hands on: to sandboxed code, or to a file.

A failed model call's message can hold what a provider or an HTTP library put in it: the
``api_base`` with its ``user:password@``, an ``Authorization`` header, a body that echoes the
key. Sandboxed code must never read those (it can send them anywhere an answer goes), and a
trajectory must never store them. ``redact`` replaces, with ``[REDACTED]``:

* every secret the runtime knows: the ``api_key`` and URL credentials of every model client
  made in this process (``add_secret``), and the values of the environment's key-like
  variables (``config.secret_env_values``: ``*_API_KEY``, ``*_TOKEN``, ``*_SECRET``...);
  each also in the forms a message quotes it in (``_forms``: JSON-escaped, percent-encoded,
  base64 at any alignment, hex), and cut by line breaks (a provider's body wrapped at 76
  columns, a ``\n`` escape between two of its characters);
* the userinfo of any URL (``scheme://user:pass@host`` -> ``scheme://[REDACTED]@host``);
* ``Authorization:`` / ``Proxy-Authorization:`` values, ``Bearer``/``Basic`` credentials,
  ``api_key=...`` / ``"token": "..."`` pairs;
* token shapes of the common providers (``sk-...``, ``ghp_...``, ``xoxb-...``, ``AKIA...``,
  ``AIza...``, ``hf_...``).

Linear in the text (RE2: the known secrets are one pattern, the shapes another). ``redact_clipped`` bounds
the work too: only ``limit`` characters (and a margin, so a secret cut by the limit is still
found whole) are looked at.
"""

from __future__ import annotations

import base64
import json
import re
import threading
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote, quote_plus, unquote, urlsplit

import re2

MASK = "[REDACTED]"

#: A known secret shorter than this is not looked for: ``GITHUB_TOKEN=1`` must not turn
#: every "1" of a message into the mask.
MIN_SECRET_CHARS = 8

#: Characters looked at past a clipping limit, so a secret that straddles the limit is found
#: whole and taken out before the text is cut (no prefix of it survives the cut).
CLIP_MARGIN = 512

#: Run on UTF-8 bytes (``surrogatepass``: a cell can print a lone surrogate, which RE2's own
#: encoding of a str refuses), the way ``context.grep`` runs RE2: faster, and any text goes.
_PATTERN = re2.compile(
    # 1: the userinfo of a URL (the scheme kept).
    br"\b((?i:[a-z][a-z0-9+.\-]{0,30})://)[^\s/?#@\"'<>\\]{1,512}@"
    # 2: a header or key/value pair that carries a credential (the name kept).
    br"|((?i:(?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?(?:(?:bearer|basic|token|digest)\s+)?"
    br"|\b(?:bearer|basic)\s+"
    br"|(?:\btoken|api[_-]?key|x-api-key|access[_-]?token|auth[_-]?token|refresh[_-]?token|client[_-]?secret|secret|password|passwd)"
    br"[\"']?\s*[:=]\s*[\"']?))[A-Za-z0-9\-._~+/=:%*]{6,}"
    # 3: the shapes of providers' keys.
    br"|\b(?:sk|pk|rk)-[A-Za-z0-9_\-*]{12,}|\bsk_(?:live|test)_[A-Za-z0-9]{12,}|\bgh[pousr]_[A-Za-z0-9]{20,}"
    br"|\bgithub_pat_[A-Za-z0-9_]{20,}|\bxox[abposr]-[A-Za-z0-9\-]{10,}|\bAKIA[0-9A-Z]{16}\b"
    br"|\bAIza[0-9A-Za-z_\-]{30,}|\bhf_[A-Za-z0-9]{20,}"
)

#: What a line wrap can put between two characters of a known secret: whitespace, or the
#: escape of a line break (a JSON body, a ``repr``). Nothing else: a secret is not found in
#: ordinary text by accident.
_GAP = rb"(?:[\t\n\r\x0b\x0c ]|\\[nrt])*"

#: Memory RE2 may use for the pattern of the known secrets (hundreds of keys, each in ~15 forms).
_KNOWN_MAX_MEM = 64 << 20

_lock = threading.Lock()
_known: set[str] = set()
_version = 0  # bumped by add_secret: the cached list below is stale
_cache: tuple[tuple[int, tuple[str, ...]], list[str]] | None = None


def add_secret(value: str | None) -> None:
    """Remember ``value`` (a key or a password this process uses) so ``redact`` removes it."""
    global _version
    if isinstance(value, str) and len(value) >= MIN_SECRET_CHARS:
        with _lock:
            if value not in _known:
                _known.add(value)
                _version += 1


def add_url_secrets(url: str | None) -> None:
    """Remember the user name and password of ``url`` (``https://user:pass@host``), raw and decoded."""
    if not isinstance(url, str) or "@" not in url:
        return
    try:
        parts = urlsplit(url)
    except ValueError:
        return
    for value in (parts.username, parts.password):
        if value:
            add_secret(value)
            add_secret(unquote(value))


def _secrets() -> list[str]:
    global _cache
    from rlm_runtime.config import secret_env_values

    env = tuple(v for v in secret_env_values() if len(v) >= MIN_SECRET_CHARS)
    with _lock:
        if _cache is not None and _cache[0] == (_version, env):
            return _cache[1]
        found = sorted(_known.union(env), key=len, reverse=True)  # longest first: a key holding another goes whole
        _cache = ((_version, env), found)
        return found


def _forms(secret: str) -> set[str]:
    """The ways a message can quote ``secret``: as is, JSON-escaped (``ensure_ascii`` or not),
    percent-encoded (upper or lower hex, ``+`` for a space), hex, and base64 (both alphabets):
    for base64, the characters that depend on the secret alone, at each of the three
    alignments it can start at in a longer encoded text."""
    raw = secret.encode("utf-8", "surrogatepass")
    forms = {secret, json.dumps(secret, ensure_ascii=False)[1:-1], json.dumps(secret)[1:-1], raw.hex(), raw.hex().upper()}
    for encoded in (quote(secret, safe=""), quote(secret), quote_plus(secret)):
        forms.add(encoded)
        forms.add(re.sub("%[0-9A-F]{2}", lambda m: m.group(0).lower(), encoded))
    for start in range(3):
        whole = raw[start:][: (len(raw) - start) // 3 * 3]
        if len(whole) >= 6:
            forms.add(base64.b64encode(whole).decode())
            forms.add(base64.urlsafe_b64encode(whole).decode())
    return {f for f in forms if len(f) >= MIN_SECRET_CHARS}


_patterns: dict[tuple[str, ...], Any] = {}


def _known_pattern(secrets: tuple[str, ...]) -> Any:
    """One RE2 pattern matching every form of every secret, a line wrap allowed between
    two characters (compiled once per set of secrets)."""
    with _lock:
        found = _patterns.get(secrets)
    if found is not None:
        return found
    forms = sorted({f for s in secrets for f in _forms(s)}, key=len, reverse=True)  # longest first: a key holding another goes whole
    alternatives = [_GAP.join(re2.escape(c.encode("utf-8", "surrogatepass")) for c in form) for form in forms]
    options = re2.Options()
    options.max_mem = _KNOWN_MAX_MEM
    pattern = re2.compile(b"|".join(alternatives), options)
    with _lock:
        if len(_patterns) > 16:  # sets of secrets change rarely: keep the last few
            _patterns.clear()
        _patterns[secrets] = pattern
    return pattern


class Redactor:
    """The secrets known when it was made, applied to many texts (one event's fields, say)."""

    def __init__(self, secrets: Iterable[str] | None = None) -> None:
        self.secrets: list[str] = list(secrets) if secrets is not None else _secrets()
        self._known = _known_pattern(tuple(self.secrets)) if self.secrets else None

    def text(self, text: str) -> str:
        """``text`` with every secret and credential shape masked."""
        return self._shapes(self.known(text))

    @staticmethod
    def _shapes(text: str) -> str:
        raw = text.encode("utf-8", "surrogatepass")
        if _PATTERN.search(raw) is None:
            return text
        return bytes(_PATTERN.sub(_mask, raw)).decode("utf-8", "surrogatepass")

    def json_line(self, line: str) -> str:
        """A JSON text with every secret masked, inside its strings (a known secret is
        looked for as JSON writes it too; no credential shape matches across a quote)."""
        return self.text(line)

    def known(self, text: str) -> str:
        """``text`` with the known secrets masked, in any of their forms (the shapes left:
        for data, not messages)."""
        if self._known is None:
            return text
        raw = text.encode("utf-8", "surrogatepass")
        if self._known.search(raw) is None:
            return text
        return bytes(self._known.sub(_BMASK, raw)).decode("utf-8", "surrogatepass")

    def clipped(self, text: str, limit: int, note: str = "") -> str:
        """``text`` redacted and cut to at most ``limit`` characters (plus ``note`` when cut).

        Only ``limit + CLIP_MARGIN`` characters are read: linear in the limit, not the text.
        """
        if len(text) <= limit:
            return self.text(text)
        head = self.text(text[: limit + CLIP_MARGIN])
        return head[:limit] + note

    def value(self, value: Any, *, shapes: bool = False) -> Any:
        """Plain data (str, list, dict...) with the known secrets masked in every string
        (and the credential shapes, with ``shapes``)."""
        if shapes:
            return _walk(value, self.text)
        if self._known is None:
            return value
        return _walk(value, self.known)


def _walk(value: Any, fn: Any) -> Any:
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, list):
        return [_walk(v, fn) for v in value]
    if isinstance(value, tuple):
        return tuple(_walk(v, fn) for v in value)
    if isinstance(value, dict):
        return {_walk(k, fn): _walk(v, fn) for k, v in value.items()}
    return value


_BMASK = MASK.encode()


def _mask(m: Any) -> bytes:
    if m.group(1) is not None:
        return bytes(m.group(1)) + _BMASK + b"@"
    if m.group(2) is not None:
        return bytes(m.group(2)) + _BMASK
    return _BMASK


def redact(text: str) -> str:
    """``text`` with every known secret and credential shape replaced by ``[REDACTED]``."""
    return Redactor().text(text)


def redact_clipped(text: str, limit: int, note: str = "") -> str:
    """``redact(text)`` cut to ``limit`` characters (``note`` appended when cut), reading at
    most ``limit + CLIP_MARGIN`` of them."""
    return Redactor().clipped(text, limit, note)


def redact_url(url: str) -> str:
    """``url`` without its user name and password."""
    return redact(url)
