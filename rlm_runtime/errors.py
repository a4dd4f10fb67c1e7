"""The one error tree of rlm_runtime.

Recoverable errors are the model's own mistakes (bad code, a refused cell, a failed host
call): they are shown back to it as text. Terminal errors mean the runtime cannot go on as
it is (the worker cannot start, the protocol broke). Third-party exceptions are translated
where they are caught, always with ``raise ... from``.
"""

from __future__ import annotations


class RLMError(Exception):
    """Base class of every error rlm_runtime raises on purpose."""


class ConfigError(RLMError):
    """A policy, limit or setting is missing or invalid (names the file or field)."""


class SourceRefused(ConfigError):
    """A file someone else wrote (an eval task file) names a context it may not read: a path
    that resolves outside its folder, a memory store, a file that is not a regular file."""


class ContextOutsideRoots(SourceRefused):
    """A path to register or open as a registered context resolves (symlinks and ``..``
    followed) outside every root the caller allows (``registry.roots``)."""


class RegistryError(ConfigError):
    """The registry of contexts cannot do what was asked: an id, name, tag or kind that breaks
    its rules, an id already taken, a text too large, a registered file that is gone or
    changed kind, or a ``registry.db`` that is not one (corrupt, another program's)."""


class UnknownContext(RegistryError):
    """No registered context has this id (``ctx:ID``). ``suggestion`` is the nearest id, if
    one is close."""

    def __init__(self, message: str, *, context_id: str = "", suggestion: str | None = None) -> None:
        super().__init__(message)
        self.context_id = context_id
        self.suggestion = suggestion


class DamagedContext(RegistryError):
    """A registered context's rows in ``registry.db`` hold a value this version never writes
    (text where a time goes, a negative size, metadata that is not the probe's): a list leaves
    it out with a warning, a lookup by its id is refused, ``rlm context rm ID`` removes it.
    ``context_id`` names it, ``problem`` the value (``"contexts.created: not a time"``)."""

    def __init__(self, message: str, *, context_id: str, problem: str) -> None:
        super().__init__(message)
        self.context_id = context_id
        self.problem = problem


class RecoverableError(RLMError):
    """Something the model did wrong; the session goes on."""


class PolicyViolation(RecoverableError):
    """A cell was refused by the policy check; ``report`` holds the reasons."""

    def __init__(self, report: object) -> None:
        super().__init__(str(report))
        self.report = report


class ContextError(RecoverableError):
    """A context source is missing, unreadable or binary, or a probe argument is invalid
    (a grep pattern RE2 cannot run, a chunk index out of range)."""


class HostCallError(RecoverableError):
    """A host function called from sandboxed code failed or got invalid arguments."""


class TerminalError(RLMError):
    """The runtime cannot continue in its current state."""


class SandboxError(TerminalError):
    """The sandbox could not start, or a worker could not be (re)created."""


class ProtocolError(TerminalError):
    """A frame on the worker channel was malformed, too large or unexpected."""


class WorkerCrashed(TerminalError):
    """The worker process died during a cell (a signal, the CPU limit, its zygote gone)."""


class WorkersBusy(SandboxError):
    """No worker could be had from the process's worker pool: every slot is held (by this
    call tree's own ancestors, or for longer than the wait allowed). ``pool_size`` says how
    many workers this machine's memory allows at once."""

    def __init__(self, message: str, *, pool_size: int = 0) -> None:
        super().__init__(message)
        self.pool_size = pool_size


class SessionError(RLMError):
    """A session was used wrongly: after ``close()``, or from two threads at once."""


class SessionClosed(SessionError):
    """The session (or RLM) was closed; open a new one."""


class SessionBusy(SessionError):
    """Another thread is using this session; a session serves one thread at a time."""


class UnknownTrajectory(RLMError):
    """No trajectory has the id a client named (a server's ``/api/traces/{id}``)."""


class ReadOnlyToken(RLMError):
    """A server's client whose token is read-only (``rlm serve --add-token NAME --read-only``)
    asked to write: a note, a memory edit, a context to register."""


class TooLarge(RLMError):
    """A request to a server asked for more than its limits allow (``ServeLimits``); it is
    refused whole, never cut."""


class RunFailed(RLMError):
    """A run ended without an answer. ``partial`` holds the last useful output, if any."""

    def __init__(self, message: str, *, partial: str | None = None) -> None:
        super().__init__(message)
        self.partial = partial


class NoAnswer(RunFailed):
    """The model used every iteration and the forced last turn without calling FINAL."""


class TooManyErrors(RunFailed):
    """The run stopped after ``max_consecutive_errors`` failing turns in a row."""


class RunCrashed(RunFailed):
    """The run stopped on an exception no step of the runtime expected (a host-side step that
    hostile text reached unguarded: a bug to report). The run still ends as a failed
    ``RunResult`` with its ``partial`` output and a ``run_end`` event; ``__cause__`` holds
    the original exception."""


class Cancelled(RunFailed):
    """The run was cancelled (``Session.cancel()``; Ctrl-C in ``rlm repl``). What it had
    used is settled in the budget; ``partial`` holds its last useful output."""


class LLMError(RLMError):
    """A model call failed. Subclasses say whether the user can fix it."""


class UnknownModel(LLMError):
    """The model name names no provider or model we can reach."""


class MissingAPIKey(LLMError):
    """The provider needs a key that is not set; the message names the variable."""


class ModelUnavailable(LLMError):
    """The model's server is unreachable, or kept failing after retries."""


class LLMCallError(LLMError):
    """The provider refused the call (bad request, content policy, context too long...)."""


class BudgetExceeded(RunFailed):
    """A run went over one of its limits. ``partial`` holds the best answer so far and
    ``limit`` names the limit (``max_llm_calls``, ``max_cost_usd``, ...)."""

    def __init__(self, message: str, *, limit: str, partial: str | None = None) -> None:
        super().__init__(message, partial=partial)
        self.limit = limit
