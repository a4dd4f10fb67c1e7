"""The only module that imports litellm: any hosted or local model litellm can reach.

Credentials and options go with each call (no litellm globals are set). Rate limits and
server errors are retried with exponential backoff; timeouts are honoured; usage and cost
are recorded per call. litellm's exceptions are translated here, and only here. A streamed
call to a llama.cpp server can report how far the server has read the prompt
(``progress=True``, see ``progress.py``).
"""

from __future__ import annotations

import contextlib
import io
import json
import random
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from rlm_runtime import redact
from rlm_runtime.errors import LLMCallError, MissingAPIKey, ModelUnavailable, UnknownModel
from rlm_runtime.llm import progress as prefill
from rlm_runtime.llm.base import Completion, Message, Usage, abandonable, heard, stop_requested
from rlm_runtime.llm.tokens import count_tokens

_litellm: Any = None
_import_lock = threading.Lock()


def _lib() -> Any:
    """Import litellm once, offline: its price map must not be fetched at import."""
    global _litellm
    with _import_lock:
        if _litellm is None:
            from rlm_runtime.config import prepare_litellm

            prepare_litellm()
            with _quiet():
                import litellm

            _litellm = litellm
            _keep_prefixes(litellm)
    return _litellm


def _prefixes_file() -> Path | None:
    """Where the names litellm takes before a ``/`` are kept for this version of litellm
    (``$RLM_HOME/cache``), or None when its version cannot be read."""
    from importlib.metadata import PackageNotFoundError, version

    from rlm_runtime.config import paths_from_env

    try:
        made = version("litellm")
    except PackageNotFoundError:
        return None
    if not all(c.isalnum() or c in ".-+_" for c in made):
        return None
    return paths_from_env().home / "cache" / f"litellm-{made}-prefixes.json"


def _keep_prefixes(lib: Any) -> None:
    """Write the prefixes litellm knows (its providers, and the first part of every model name
    in its price map), so a later process refuses a name with an unknown prefix without
    importing litellm (about 4 s). Best effort: a file that cannot be written is skipped."""
    path = _prefixes_file()
    if path is None or path.exists():
        return
    try:
        names = {str(p) for p in lib.provider_list}
        names |= {k.split("/", 1)[0] for k in lib.model_cost if isinstance(k, str) and "/" in k}
        from rlm_runtime import private

        private.make_dir(path.parent)
        private.write_text(path, json.dumps(sorted(names)))
    except Exception:  # noqa: BLE001 - a cache: never the reason a model call fails
        pass


def _known_prefixes() -> frozenset[str] | None:
    """The prefixes ``_keep_prefixes`` wrote for this litellm, or None (none written yet, or
    a file that is not a list of names: then litellm itself is asked)."""
    path = _prefixes_file()
    try:
        if path is None or path.stat().st_size > 1_000_000:
            return None
        names = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(names, list) or "openai" not in names or not all(isinstance(n, str) for n in names):
        return None  # not what _keep_prefixes writes (every litellm knows openai)
    return frozenset(names)


class _MutedThreads(io.TextIOBase):
    """``sys.stdout`` while litellm calls run: what a thread inside a call writes is dropped,
    what any other thread writes goes to the real stdout."""

    def __init__(self) -> None:
        self.real: Any = None
        self.muted: dict[int, int] = {}  # thread id -> depth of nested calls

    def write(self, text: str) -> int:
        if threading.get_ident() in self.muted:
            return len(text)
        return int(self.real.write(text))

    def flush(self) -> None:
        self.real.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["real"], name)


_mute_lock = threading.Lock()
#: The one proxy, for the life of the process. ``print()`` in CPython 3.11 holds a borrowed
#: reference to ``sys.stdout`` while it writes: a thread printing outside a call (litellm's
#: cost lookups and its logging threads print banners) kept using a proxy that the last call
#: to end had just freed, and the process died with a segmentation fault. Never freed, the
#: proxy stays valid however late a write arrives; uninstalled, it passes writes through.
_MUTE = _MutedThreads()


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Keep litellm's banners off stdout during a call, from this thread only.

    ``contextlib.redirect_stdout`` swaps a process-wide ``sys.stdout``: with calls on several
    threads (``llm_query_batched``) one call restored what another had swapped in, and stdout
    stayed a StringIO for good, so the answer printed after the run was lost. The proxy is
    installed by the first call in flight and removed by the last, and mutes only the
    threads inside a call.
    """
    me = threading.get_ident()
    with _mute_lock:
        if not _MUTE.muted and sys.stdout is not _MUTE:
            _MUTE.real = sys.stdout
            sys.stdout = _MUTE
        _MUTE.muted[me] = _MUTE.muted.get(me, 0) + 1
    try:
        yield
    finally:
        with _mute_lock:
            depth = _MUTE.muted.pop(me) - 1
            if depth:
                _MUTE.muted[me] = depth
            elif not _MUTE.muted and sys.stdout is _MUTE:
                sys.stdout = _MUTE.real


def _nearest(lib: Any, model: str) -> str:
    """``; did you mean 'NAME'?`` for the known model name closest to ``model`` (litellm's
    price map, read offline), or nothing when none is close."""
    import difflib

    try:
        names = [k for k in lib.model_cost if isinstance(k, str) and k != "sample_spec"]
    except Exception:  # a litellm without the map: no suggestion, the message stands
        return ""
    match = difflib.get_close_matches(model, names, n=1, cutoff=0.6)
    return f"; did you mean {match[0]!r}?" if match else ""


def _fence_closed(text: str) -> bool:
    """True once a fenced code block has opened and closed in ``text``."""
    first = text.find("```")
    if first < 0:
        return False
    body = text.find("\n", first)
    return body >= 0 and text.find("```", body) >= 0


class LiteLLMClient:
    """A litellm model name (``openai/gpt-4o-mini``, ``ollama/qwen2.5-coder``, ...).

    Args:
        model: the litellm model name.
        api_base: server URL (an OpenAI-compatible local server, say).
        api_key: a key to pass explicitly (else litellm reads the provider's variable).
        timeout_s: per request.
        retries: attempts after the first on rate limits, 5xx and connection errors.
        progress: a streamed call asks the server for its prefill progress and reports it
            (``base.progressed``): for llama.cpp's server only (``local.py`` sets it).
    """

    def __init__(self, model: str, *, api_base: str | None = None, api_key: str | None = None,
                 timeout_s: float = 120.0, retries: int = 4, backoff_s: float = 1.0,
                 extra: dict[str, Any] | None = None, progress: bool = False) -> None:
        self.model = model
        self.api_base = api_base
        self.api_key = api_key
        self.timeout_s = timeout_s
        self.retries = retries
        self.backoff_s = backoff_s
        self.extra = dict(extra or {})
        self.progress = progress
        self._checked = False
        # Whatever the provider or the HTTP library puts in an error may quote these: every
        # message that leaves this client, or reaches sandboxed code, is redacted of them.
        redact.add_secret(api_key)
        redact.add_url_secrets(api_base)

    def check(self) -> None:
        """Fail early, with an actionable message, on an unknown model or a missing key."""
        if self._checked:
            return
        prefix, slash, _ = self.model.partition("/")
        known = _known_prefixes() if slash and self.api_base is None else None
        if known is not None and prefix not in known:  # refused at once: no import of litellm
            import difflib

            close = difflib.get_close_matches(prefix, sorted(known), n=1, cutoff=0.6)
            raise UnknownModel(f"unknown model {self.model!r}: {prefix!r} is no provider litellm knows (use a litellm "
                               "name such as openai/gpt-4o-mini, anthropic/claude-3-5-haiku-latest or "
                               "ollama/qwen2.5-coder, or scripted:PATH)"
                               + (f"; did you mean {close[0] + '/' + self.model.partition('/')[2]!r}?" if close else ""))
        lib = _lib()
        try:
            with _quiet():
                _, provider, _, _ = lib.get_llm_provider(self.model, api_base=self.api_base)
        except Exception as e:
            raise UnknownModel(
                f"unknown model {self.model!r}: use a litellm name such as openai/gpt-4o-mini, "
                f"anthropic/claude-3-5-haiku-latest or ollama/qwen2.5-coder, or scripted:PATH{_nearest(lib, self.model)}"
            ) from e
        if self.api_key is None and self.api_base is None:
            env = lib.validate_environment(self.model)
            missing = [k for k in env.get("missing_keys", []) if not k.endswith("API_BASE")]
            if missing:
                raise MissingAPIKey(f"model {self.model} ({provider}) needs {' and '.join(missing)} set in the environment")
        self._checked = True

    def complete(self, messages: list[Message], *, max_tokens: int | None = None,
                 stop_after_code_block: bool = False, timeout_s: float | None = None) -> Completion:
        self.check()
        lib = _lib()
        # max_retries=0: the provider SDK must not retry inside our own retry loop.
        kwargs: dict[str, Any] = {"model": self.model, "messages": messages, "timeout": timeout_s or self.timeout_s,
                                  "max_retries": 0, **self.extra}
        if self.api_base:
            kwargs["api_base"] = self.api_base
        if self.api_key:
            kwargs["api_key"] = self.api_key
        elif self.api_base:
            # Local OpenAI-compatible servers need no key, but the client insists on one.
            kwargs["api_key"] = "no-key-required"
        if max_tokens:
            kwargs["max_tokens"] = max_tokens
        start = time.monotonic()

        def abandoned() -> Completion:
            sent = sum(self.count_tokens(m.get("content", "")) for m in messages)
            return Completion("", self.model, Usage(1, sent, 0, 0.0), "cancelled", time.monotonic() - start)

        return abandonable(lambda: self._attempts(lib, kwargs, messages, stop_after_code_block, start), abandoned)

    def _attempts(self, lib: Any, kwargs: dict[str, Any], messages: list[Message], stop_after_code_block: bool,
                  start: float) -> Completion:
        for attempt in range(self.retries + 1):
            try:
                # litellm prints debugging banners on stdout when a call fails; keep them
                # out of the user's output (our own output goes to stderr meanwhile).
                # The cost lookup prints them too, for a model without a price.
                with _quiet():
                    if stop_after_code_block:
                        return self._streamed(lib, kwargs, messages, start)
                    return self._completion(lib, lib.completion(**kwargs), start)
            except Exception as e:
                time.sleep(self._translate(lib, e, attempt))  # raises when not worth a retry
        raise ModelUnavailable(f"{self.model}: no answer after {self.retries + 1} attempts")

    def _translate(self, lib: Any, e: Exception, attempt: int) -> float:
        """Raise the runtime's error for ``e``, or return the delay before a retry."""
        ex = lib.exceptions
        retryable = (ex.RateLimitError, ex.ServiceUnavailableError, ex.InternalServerError, ex.APIConnectionError,
                     ex.Timeout, ex.BadGatewayError)
        # A refused connection rarely heals in seconds: one retry, then say so. (litellm
        # reports some of them as InternalServerError("... Connection error."))
        connection = isinstance(e, (ex.APIConnectionError, ex.Timeout)) or "Connection error" in str(e)
        limit = min(1, self.retries) if connection else self.retries
        if isinstance(e, retryable) and attempt < limit:
            return self.backoff_s * (2 ** attempt) * (0.5 + random.random())
        where = f" at {redact.redact_url(self.api_base)}" if self.api_base else ""
        if isinstance(e, ex.AuthenticationError):
            raise MissingAPIKey(f"{self.model}: the provider refused the credentials: {_short(e)}") from e
        if isinstance(e, ex.NotFoundError):
            raise UnknownModel(f"{self.model}: the provider does not know this model: {_short(e)}") from e
        if connection:
            raise ModelUnavailable(f"{self.model}: server unreachable{where}: {_short(e)}") from e
        if isinstance(e, retryable):
            raise ModelUnavailable(f"{self.model}: still failing after {attempt + 1} attempts: {_short(e)}") from e
        if isinstance(e, ex.BadRequestError) and "LLM Provider NOT provided" in str(e):
            raise UnknownModel(f"unknown model {self.model!r}: prefix it with a provider, e.g. openai/{self.model}") from e
        raise LLMCallError(f"{self.model}: {_short(e)}") from e

    def _completion(self, lib: Any, response: Any, start: float) -> Completion:
        choice = response.choices[0]
        text = choice.message.content or ""
        heard(text)
        u = getattr(response, "usage", None)
        usage = Usage(1, int(getattr(u, "prompt_tokens", 0) or 0), int(getattr(u, "completion_tokens", 0) or 0),
                      self._cost(lib, response))
        return Completion(text, self.model, usage, str(choice.finish_reason or "stop"), time.monotonic() - start)

    def _streamed(self, lib: Any, kwargs: dict[str, Any], messages: list[Message], start: float) -> Completion:
        """Stream, and stop reading once the first code block has closed."""
        parts: list[str] = []
        finish = "stop"
        if self.progress:
            kwargs = {**kwargs, "extra_body": {**(kwargs.get("extra_body") or {}), **prefill.REQUEST}}
        stream = lib.completion(**kwargs, stream=True)
        if self.progress:
            _tap(stream, prefill.Reporter().see)
        try:
            for piece in stream:
                if stop_requested():
                    finish = "cancelled"
                    break
                delta = piece.choices[0].delta.content if piece.choices else None
                if delta:
                    parts.append(delta)
                    heard(delta)
                    if "`" in delta and _fence_closed("".join(parts)):
                        finish = "code_block_closed"
                        break
                if piece.choices and piece.choices[0].finish_reason:
                    finish = str(piece.choices[0].finish_reason)
        finally:
            _close_stream(stream)
        text = "".join(parts)
        usage = Usage(1, sum(self.count_tokens(m.get("content", "")) for m in messages), self.count_tokens(text), 0.0)
        with contextlib.suppress(Exception):  # models without a price cost nothing we can know
            prompt_cost, completion_cost = lib.cost_per_token(model=self.model, prompt_tokens=usage.input_tokens,
                                                              completion_tokens=usage.output_tokens)
            usage.cost_usd = float(prompt_cost + completion_cost)
        return Completion(text, self.model, usage, finish, time.monotonic() - start)

    def _cost(self, lib: Any, response: Any) -> float:
        try:
            return float(lib.completion_cost(completion_response=response) or 0.0)
        except Exception:  # models without a price (local ones) cost nothing we can know
            return 0.0

    def count_tokens(self, text: str) -> int:
        return count_tokens(text)

    def close(self) -> None:
        pass


class _Tapped:
    """A provider's stream whose raw chunks are shown to ``see`` before litellm reads them.

    litellm's stream wrapper drops the chunks that carry no text, and llama.cpp's prefill
    reports are such chunks; reading them here keeps litellm's one parser of the stream.
    """

    def __init__(self, raw: Any, see: Callable[[Any], None]) -> None:
        self.raw = raw
        self._see = see

    def __iter__(self) -> _Tapped:
        return self

    def __next__(self) -> Any:
        chunk = next(self.raw)
        try:
            self._see(chunk)
        except Exception:  # a report must not break the reply
            pass
        return chunk

    def close(self) -> None:
        for obj in (getattr(self.raw, "_iterator", None), self.raw):  # as _close_stream does, for the raw stream
            close = getattr(obj, "close", None)
            if callable(close):
                with contextlib.suppress(Exception):
                    close()


def _tap(stream: Any, see: Callable[[Any], None]) -> None:
    """Show ``stream``'s raw chunks to ``see``: when litellm holds the provider's stream as an
    iterator (its OpenAI-compatible providers do); else nothing is shown, the call goes on."""
    raw = getattr(stream, "completion_stream", None)
    if raw is not None and hasattr(raw, "__next__"):
        stream.completion_stream = _Tapped(raw, see)


def _close_stream(stream: Any) -> None:
    """Release a stream we stopped reading early, now, on this thread.

    litellm's sync stream wrapper has no ``close()``, and closing the provider's stream object
    leaves its generator suspended. That generator's ``finally`` closes the HTTP response when
    the garbage collector finalises it, which can happen inside the next request while that
    request holds the connection pool's (non-reentrant) lock: the process then deadlocks.
    So close the provider's generator first (its ``finally`` runs here), then the objects.
    """
    inner = getattr(stream, "completion_stream", None)
    for obj in (getattr(inner, "_iterator", None), inner, stream):
        close = getattr(obj, "close", None)
        if callable(close):
            with contextlib.suppress(Exception):
                close()


def _short(e: Exception) -> str:
    """The first line of ``e``'s message, short, without the credentials it may quote (a
    provider's body echoing the key, a URL with ``user:pass@``)."""
    text = str(e).strip()
    first = text.splitlines()[0] if text else type(e).__name__
    return redact.redact_clipped(first, 300)
