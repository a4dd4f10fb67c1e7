"""``Session``: one sandbox, its contexts, a conversation and a budget, over many questions.

A session keeps its worker between questions, so variables an earlier question (or a
person's cell) left are there for the next, and a new question starts its first cell
without starting a worker. Each question is told what earlier questions asked and
answered (a compact history within ``RunLimits.history_chars``) and which variables exist.
``RLM.run`` is a one-question session.

Contexts may be registered ones (``ctx:ID``, ``rlm_runtime.registry``): each is resolved when
the session opens it (checked against ``context_roots``), and each question's use of it (a
load, its peeks, greps and chunks, the searches) is recorded in the registry when the
question ends, with the run's id (``registry/usage.py``).

Threads: a session serves one thread at a time; a call from a second thread while one runs
raises ``SessionBusy`` (it does not wait: a REPL and a program should not interleave
questions by accident). ``close()`` and ``cancel()`` may come from any thread.
"""

from __future__ import annotations

import dataclasses
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlm_runtime import harness, private, profiles
from rlm_runtime._version import __version__ as _version
from rlm_runtime.budget import Budget, Governor, RunLimits, SessionBudget, SessionLimits
from rlm_runtime.config import Paths, paths_from_env, user_path
from rlm_runtime.context import open_context
from rlm_runtime.context.beneath import seal
from rlm_runtime.context.brief import load_probe_config, mark_skipped_documents
from rlm_runtime.context.handles import DEFAULT_LAZY_CACHE
from rlm_runtime.context.living import Living, of_handle, what_changed
from rlm_runtime.errors import ConfigError, ContextError, RLMError, SessionBusy, SessionClosed
from rlm_runtime.llm import LLMClient, checked_client, make_client
from rlm_runtime.loop import Event, Run, Tree, cell_output
from rlm_runtime.profiles import Profile
from rlm_runtime.prompts import Prompts
from rlm_runtime.quoting import VALUE_CHARS, quoted
from rlm_runtime.registry import leads as _leads
from rlm_runtime.registry.usage import RunUsage
from rlm_runtime.result import RunResult
from rlm_runtime.sandbox import CellLimits, CellResult, Policy, load_policy
from rlm_runtime.searching import ChunkSearch
from rlm_runtime.setup import Setup
from rlm_runtime.subcalls import open_sandbox
from rlm_runtime.tools import Tool, as_tools
from rlm_runtime.trajectory import TraceWriter

if TYPE_CHECKING:  # imported when a store is used: a session without memory never pays for it
    from rlm_runtime.memory.store import MemoryStore
    from rlm_runtime.registry import Registry

#: Characters of the variable listing shown with a new question.
_VARIABLES_CHARS = 1500


class Session:
    """Many questions and cells over the same contexts, in one persistent sandbox.

    Args:
        model: the root model (a name, see ``rlm_runtime.llm.make_client``, or a client).
        sub_model: the model of ``llm_query`` and child runs (default: ``model``).
        contexts: context sources or handles (see ``open_context``); more with ``add_context``.
        limits: the limits of each question (default: ``RunLimits.for_model(model)``).
        session_limits: totals over all questions (calls, tokens, dollars; default: none).
        policy: the sandbox policy (name, path or Policy).
        cell_limits: per-cell sandbox limits (default: the policy's).
        tools: the program's own functions the model may call (callables or ``Tool``s).
        trace: a ``.jsonl`` file, or a folder for one file per session (default
            ``$RLM_HOME/traces``); ``False`` writes none.
        on_event: called with every trajectory event (a JSON-ready dict) as it happens, and
            with live events the trace never holds: ``model_call`` (a turn's call begins:
            its prompt's tokens), ``model_progress`` (how far a local server has read the
            prompt: ``total``, ``cached``, ``processed`` tokens, ``elapsed_ms``; a few a
            second at most), ``model_text`` (a piece of its reply as it streams in) and
            ``cell_start`` (a cell's code, before it runs).
        governor: concurrency caps (default: from this machine's memory and CPUs).
        probe: a ``ProbeConfig`` (default: ``[probe]`` of rlm.toml or pyproject.toml found
            from the current directory, else the defaults).
        pool: the worker pool (default: the process's, sized from memory).
        protect_host: see ``Sandbox``.
        memory: the memory store ``search_chunks`` searches too: True for the default one
            (``$RLM_HOME/brain/memory.db``), a path, or a ``MemoryStore`` (None: no store;
            ``search_chunks`` still searches the contexts, each indexed on first use).
        memory_readonly: open the memory store named by ``memory`` or by a registered
            memory store among ``contexts`` read-only: searches read it, nothing is ever
            written to it (no recall records, no notes; ``remember`` is refused).
        remember: store every answered question in the memory store (question, answer,
            the cells that found it, the memory chunks it read), as ``ask(remember=...)``
            does for one question.
        profile: a profile's name (``brain/profiles/NAME.toml``), a ``.toml`` path or a
            ``Profile``: its limits (unless ``limits`` is given), sub-model (unless
            ``sub_model`` is given), temperature (for models given by name) and prompt
            addendum. See ``rlm_runtime.profiles``.
        registry: the registry ``ctx:ID`` contexts are looked up in (default: the one of
            ``paths``, ``$RLM_HOME/registry.db``, opened at the first ``ctx:ID``). A registered
            memory store among ``contexts`` becomes the session's memory store (when
            ``memory`` names no other).
        context_roots: the folders a ``ctx:ID`` context's real path must lie under, checked
            each time one is opened (None: anywhere, the caller is trusted; ``[]``: none).
        always: the always-on contexts every question sees (``registry.always``): True, the
            registered contexts whose type is always loaded (``identity``), those the project's
            ``[contexts] always`` in rlm.toml names and the profile's ``always``; a list of
            ``ctx:ID``s: the always-loaded types and those; False: none. Read again at each
            question, under ``context_roots``.
    """

    def __init__(self, model: str | LLMClient, sub_model: str | LLMClient | None = None, *,
                 contexts: Sequence[Any] = (), limits: RunLimits | None = None, session_limits: SessionLimits | None = None,
                 policy: str | Path | Policy = "default", cell_limits: CellLimits | None = None,
                 tools: Sequence[Tool | Callable[..., Any]] = (), trace: str | Path | bool | None = None,
                 on_event: Callable[[Event], None] | None = None, governor: Governor | None = None,
                 probe: Any = None, pool: Any = None, paths: Paths | None = None, protect_host: bool = True,
                 memory: bool | str | Path | MemoryStore | None = None, remember: bool = False,
                 profile: str | Path | Profile | None = None, registry: Registry | None = None,
                 context_roots: Sequence[str | Path] | None = None, memory_readonly: bool = False,
                 always: bool | Sequence[str] = True) -> None:
        self.paths = paths or paths_from_env()
        if memory_readonly and remember:
            raise ConfigError("remember=True writes to the memory store, which memory_readonly opens read-only")
        # Contexts' text is copied under $RLM_HOME (traces, indexes, memory): private to the user,
        # and never read back as a context through a folder that holds it.
        private.secure_home(self.paths.home)
        seal(self.paths.home)
        #: Clients the session made from names (it closes them); a client passed in is the caller's.
        self._made: list[LLMClient] = []
        self.profile = _load_profile(profile, self.paths)
        settings = self._profile_settings(RunLimits())
        self._models = (model, sub_model if sub_model is not None else settings.sub_model)
        client = self._client(model, settings.temperature)
        sub_client = client if self._models[1] is None else self._client(self._models[1], settings.temperature)
        self._limits_follow_model = limits is None
        if limits is None:
            settings = self._profile_settings(RunLimits.for_model(client.model))
            limits = settings.limits
        loaded = load_policy(policy)
        worker_mb = (cell_limits or loaded.limits).memory_mb
        self.setup = Setup(client=client, sub_client=sub_client, limits=limits, policy=loaded, cell_limits=cell_limits,
                           prompts=Prompts(self.paths.brain_dirs), tools=tuple(as_tools(tools)),
                           governor=governor or Governor.from_system(worker_mb=worker_mb, ceiling=limits.max_concurrency),
                           probe=probe if probe is not None else _probe_config(), pool=pool, protect_host=protect_host,
                           system_addendum=settings.system_addendum)
        # The lazy contexts' cache is the process's: its budget is the settings' ([probe] lazy_cache_mb).
        DEFAULT_LAZY_CACHE.set_budget(int(getattr(self.setup.probe, "lazy_cache_mb", 256)) * 1024 * 1024)
        self.session_id = uuid.uuid4().hex[:12]
        self.budget = SessionBudget(session_limits)
        self.on_event = on_event
        self._registry = registry
        self._owns_registry = False
        self.context_roots = None if context_roots is None else tuple(Path(r) for r in context_roots)
        self._usage = RunUsage()
        self._always = always
        self._handles: list[Any] = []
        #: How each context stays current (``context.living``; None: no file or folder behind it).
        self._living: list[Living | None] = []
        try:
            for source in contexts:
                opened = self._open_source(source, memory_ok=True)
                if isinstance(opened, Path):  # a registered memory store
                    memory = _registered_store(memory, opened, source if isinstance(source, str) else f"ctx:{source.id}")
                else:
                    self._handles.append(opened)
                    self._living.append(self._living_of(source, opened))
        except BaseException:
            if self._registry is not None and self._owns_registry:
                self._registry.close()
            raise
        # Skip marks travel to the worker when it maps its contexts: set them before it starts.
        mark_skipped_documents(self._handles, self.setup.probe)
        self._history: list[harness.Exchange] = []
        self._questions = 0
        self._cells = 0
        self._closed = False
        self._busy = threading.Lock()
        self._tree: Tree | None = None  # the question or cell running now, for cancel()
        self.memory: MemoryStore | None = _open_memory(memory, self.paths, readonly=memory_readonly)
        self._owns_memory = self.memory is not None and self.memory is not memory
        self.remember = remember
        self.search = ChunkSearch(self.paths.home / "index", self.memory)
        self.search.set_contexts(self._handles)
        self._trace_path = _trace_path(trace, self.paths)
        self._writer = TraceWriter(self._trace_path)
        self._emit({"type": "trace_start", "schema": 2, "version": _version, "session_id": self.session_id,
                    "model": client.model, "sub_model": sub_client.model})
        self._sandbox, self._table = open_sandbox(self.setup, self._handles, pool_key=self.session_id, on_wait=self._on_wait)

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the worker, end the trajectory and close the clients the session made. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._sandbox.close()
        self.search.close()
        if self.memory is not None and self._owns_memory:
            self.memory.close()
        if self._registry is not None and self._owns_registry:
            self._registry.close()
        self._emit({"type": "session_end", "session_id": self.session_id, "usage": self.budget.usage(),
                    "questions": self._questions})
        self._writer.close()
        for client in self._made:
            client.close()

    @contextmanager
    def _turn(self) -> Iterator[None]:
        if self._closed:
            raise SessionClosed("this session is closed")
        if not self._busy.acquire(blocking=False):
            raise SessionBusy("this session is answering in another thread (or in a callback of its own): "
                              "a session serves one thread at a time")
        try:
            yield
        finally:
            self._busy.release()

    # ------------------------------------------------------------------ questions

    def ask(self, question: str, *, limits: RunLimits | None = None, remember: bool | None = None) -> RunResult:
        """Answer ``question`` in this session's sandbox.

        Args:
            limits: this question's own limits (default: the session's).
            remember: store the answer in the memory store (default: the session's setting).
        """
        if not isinstance(question, str) or not question.strip():
            raise ValueError("a question must be a non-empty str")
        with self._turn():
            self._refresh()
            setup = self.setup if limits is None else _with_limits(self.setup, limits)
            setup = dataclasses.replace(setup, always=self.always_on().text)
            turn = self._questions
            self._questions += 1
            history = harness.compact_history(self._history, setup.limits.history_chars,
                                              no_answer=setup.prompts.notes["no_answer"])
            variables = self._variables() if turn > 0 or self._cells > 0 else ""
            tree = Tree(setup, Budget(setup.limits, parent=self.budget), self._emit, pool_key=self.session_id,
                        search=self.search, live=self._live if self.on_event is not None else None)
            self.search.memory_ids_read = {}
            began = time.monotonic()
            run = Run(tree, question, depth=0, parent_id=None, turn=turn)
            if self._usage.tracked:
                self._usage.begin(run.run_id)
            with self._running(tree), self.memory.busy() if self.memory is not None else nullcontext():
                result = run.execute(self._sandbox, self._table, history=history, variables=variables,
                                     earlier=self._earlier_answers())
            self._record_usage()
            result.usage = tree.budget.usage()
            result.max_depth_reached = tree.budget.max_depth_reached
            result.duration_s = time.monotonic() - began
            result.trajectory = str(self._trace_path) if self._trace_path else None
            self._history.append(harness.Exchange(question, result.answer, result.error))
            for handle in self._handles:  # said to this question's brief: not again
                if getattr(handle, "changed", ""):
                    handle.changed = ""
            if result.answer is not None and (self.remember if remember is None else remember):
                self._remember(question, result, run)
            return result

    def _remember(self, question: str, result: RunResult, run: Run) -> None:
        if self.memory is None:
            raise ConfigError("remember needs a memory store: Session(memory=True) or a store path")
        try:
            ids = self.memory.remember(question, result.answer or "", run_id=run.run_id, trajectory=self._trace_path,
                                       cells=run.cells, read_chunk_ids=list(self.search.memory_ids_read))
        except RLMError as e:  # the answer stands; say why nothing was stored
            self._emit({"type": "tool_call", "run_id": run.run_id, "parent_id": None, "depth": 0, "name": "remember",
                        "args": "", "result": "", "error": str(e), "duration_s": 0.0})
            return
        self._emit({"type": "tool_call", "run_id": run.run_id, "parent_id": None, "depth": 0, "name": "remember",
                    "args": "", "result": f"chunks {ids}", "error": None, "duration_s": 0.0})

    def execute(self, code: str) -> CellResult:
        """Run a cell typed by a person, through the same policy, in the namespace the model uses.
        ``llm_query``, ``search_chunks`` and the session's tools work in it too (on the
        session's budget)."""
        with self._turn():
            # A person's cell may call the built-ins and tools by hand, on the session's budget.
            tree = Tree(self.setup, Budget(self.setup.limits, parent=self.budget), self._emit, pool_key=self.session_id,
                        search=self.search, live=self._live if self.on_event is not None else None)
            self._table.current = Run(tree, "(a cell typed by a person)", depth=0, parent_id=None, turn=self._questions).functions()
            tree.sandboxes.add(self._sandbox)
            try:
                with self._running(tree):
                    if tree.budget.cancelled.is_set():  # cancel() came before the cell reached the sandbox
                        result = CellResult(error="KeyboardInterrupt: the cell was interrupted before it started",
                                            error_type="KeyboardInterrupt")
                    else:
                        result = self._sandbox.execute(code)
            finally:
                self._table.current = {}
            self._cells += 1
            self._emit({"type": "cell", "run_id": None, "parent_id": None, "depth": 0, "turn": self._questions,
                        "code": code, "output": cell_output(result)})
            return result

    def cancel(self) -> bool:
        """Stop the question or cell running now, from any thread; True if one was running.

        The running ``ask`` returns a failed ``RunResult`` whose ``exception`` is
        ``Cancelled`` (what it used is settled in the budget; ``partial`` holds its last
        output): no new model call or tool call starts, a streaming model call stops
        reading, and the cell running in the worker is interrupted (a ``KeyboardInterrupt``
        error; variables kept). A cell that ignores the interrupt is killed ``kill_grace_s``
        later and the worker replaced (the cell's result says ``worker_restarted``).
        """
        tree = self._tree
        if tree is None:
            return False
        tree.cancel()
        return True

    @contextmanager
    def _running(self, tree: Tree) -> Iterator[None]:
        self._tree = tree
        try:
            yield
        finally:
            self._tree = None

    # ------------------------------------------------------------------ models and limits

    @property
    def limits(self) -> RunLimits:
        """The limits of each question (``ask(limits=...)`` overrides them for one)."""
        return self.setup.limits

    def set_limits(self, limits: RunLimits) -> None:
        """Use ``limits`` for later questions (the session's totals are unchanged)."""
        if not isinstance(limits, RunLimits):
            raise ConfigError("set_limits takes a RunLimits")
        with self._turn():
            self.setup = dataclasses.replace(self.setup, limits=limits)
            self._limits_follow_model = False

    def set_models(self, model: str | LLMClient | None = None, sub_model: str | LLMClient | None = None) -> None:
        """Switch the root model and/or the sub-model for later questions (a name is checked
        first: a wrong one raises ``UnknownModel``, ``MissingAPIKey`` or ``ConfigError`` and
        nothing changes). A sub-model that
        was the root model's (none given at start) follows a new root model. Limits that
        came from the model (none given) follow the new root model too."""
        with self._turn():
            setup = self.setup
            temperature = self._profile_settings(RunLimits()).temperature
            client = self._client(model, temperature, checked=True) if model is not None else setup.client
            if sub_model is not None:
                sub_client = self._client(sub_model, temperature, checked=True)
            else:
                sub_client = client if setup.sub_client is setup.client else setup.sub_client
            self._models = (model if model is not None else self._models[0],
                            sub_model if sub_model is not None else self._models[1])
            limits = self._profile_settings(RunLimits.for_model(client.model)).limits if self._limits_follow_model \
                else setup.limits
            self.setup = dataclasses.replace(setup, client=client, sub_client=sub_client, limits=limits)
            self._emit({"type": "models", "model": client.model, "sub_model": sub_client.model})

    def set_profile(self, profile: str | Path | Profile | None) -> None:
        """Use ``profile`` (None: none) for later questions: its limits over the root model's
        own (limits set before are replaced), its sub-model if it names one, its
        temperature for models given by name, and its prompt addendum."""
        loaded = _load_profile(profile, self.paths)
        with self._turn():
            previous, self.profile = self.profile, loaded
            try:
                settings = self._profile_settings(RunLimits())
                model, sub_model = self._models
                if previous is not None and previous.sub_model is not None and sub_model == previous.sub_model:
                    sub_model = None  # the old profile's sub-model goes with it
                sub_model = sub_model if sub_model is not None else settings.sub_model
                client = self._client(model, settings.temperature) if isinstance(model, str) else self.setup.client
                if sub_model is None:
                    sub_client = client
                elif isinstance(sub_model, str):
                    sub_client = self._client(sub_model, settings.temperature)
                else:
                    sub_client = self.setup.sub_client
                limits = self._profile_settings(RunLimits.for_model(client.model)).limits
            except BaseException:
                self.profile = previous
                raise
            self._models = (model, sub_model)
            self._limits_follow_model = True
            self.setup = dataclasses.replace(self.setup, client=client, sub_client=sub_client, limits=limits,
                                             system_addendum=settings.system_addendum)
            self._emit({"type": "models", "model": client.model, "sub_model": sub_client.model})

    def _profile_settings(self, base: RunLimits) -> profiles.Settings:
        if self.profile is None:
            return profiles.Settings(limits=base, sub_model=None, temperature=None, system_addendum="")
        return profiles.resolve(self.profile, base, self.paths.brain_dirs)

    def _client(self, model: str | LLMClient, temperature: float | None = None, *, checked: bool = False) -> LLMClient:
        """A client for ``model``; ``checked``: the name is checked first (``llm.checked_client``:
        the provider knows it, its key is set), so a switch to a wrong name changes nothing."""
        if not isinstance(model, str):
            return model
        make = checked_client if checked else make_client
        client = make(model, **({} if temperature is None else {"temperature": temperature}))
        self._made.append(client)
        return client

    # ------------------------------------------------------------------ contexts

    def add_context(self, source: Any, name: str | None = None) -> Any:
        """Open ``source`` and make it the next of ``contexts`` (``context`` if it is the first),
        keeping the worker and its variables. Returns the handle. A ``ctx:ID`` is resolved
        as at the session's start; a registered memory store cannot be added (the session's
        store is chosen when it opens): ``ContextError``."""
        with self._turn():
            handle = self._open_source(source, name=name)
            mark_skipped_documents([handle], self.setup.probe)
            self._sandbox.add_context(handle)
            self._handles = list(self._sandbox.contexts)
            self._living.append(self._living_of(source, handle))
            self.search.set_contexts(self._handles)
            return handle

    def remove_context(self, which: int | str) -> Any:
        """Take a context out of the session: ``which`` is its place in ``contexts`` or its
        name. The worker is replaced by one with the other contexts (numbered again from 0),
        so its variables go, as with ``reset``; the conversation and the budget stay. Returns
        the handle taken out.

        Raises:
            ContextError: no context has that place or name.
        """
        with self._turn():
            if isinstance(which, int) and not isinstance(which, bool):
                k = which if 0 <= which < len(self._handles) else -1
            else:
                k = next((n for n, h in enumerate(self._handles) if getattr(h, "name", None) == which), -1)
            if k < 0:
                names = ", ".join(str(getattr(h, "name", "?")) for h in self._handles) or "none"
                raise ContextError(f"no context {which!r} in this session (contexts: {names})")
            handle = self._handles[k]
            self._sandbox.close()
            self._handles = self._handles[:k] + self._handles[k + 1:]
            self._living = self._living[:k] + self._living[k + 1:]
            self.search.drop_contexts_from(k)
            self.search.set_contexts(self._handles)
            self._sandbox, self._table = open_sandbox(self.setup, self._handles, pool_key=self.session_id,
                                                      on_wait=self._on_wait)
            return handle

    def refresh_contexts(self) -> list[tuple[str, str]]:
        """Read again now every file or folder context whose source changed since it was
        opened (as each question does at its start); return (name, what changed) of each.
        Variables stay; a variable holding an old handle keeps it."""
        with self._turn():
            return self._refresh()

    def _refresh(self) -> list[tuple[str, str]]:
        """Open again each context whose file or folder changed (``context.living``), bind the
        new handle in the worker where the old one was and drop its search index (built again
        on the next search, incrementally); the handle's ``changed`` says what changed, for
        the next question's brief. A source that cannot be opened again keeps its old handle,
        and the brief says that too."""
        changes: list[tuple[str, str]] = []
        for k, living in enumerate(self._living):
            if living is None:
                continue
            now = living.stamp()
            if now == living.seen:
                continue
            old = self._handles[k]
            living.seen = now
            try:
                new = living.reopen()
                new.name = old.name
                self._sandbox.replace_context(k, new)
            except RLMError as e:
                old.changed = (f"it changed on disk but could not be read again ({quoted(str(e), VALUE_CHARS)}): "
                               "this is its text as it was")
                changes.append((old.name, old.changed))
                continue
            new.changed = f"{what_changed(old, new)}; variables set before hold its old text"
            self._handles[k] = new
            self.search.drop_context(k)
            changes.append((new.name, new.changed))
            close = getattr(old, "close", None)
            if callable(close):
                close()
        if changes:
            self.search.set_contexts(self._handles)
            mark_skipped_documents([h for h in self._handles if getattr(h, "changed", "")], self.setup.probe)
        return changes

    def always_on(self) -> Any:
        """The always-on contexts' block as the next question sees it (``registry.always.Always``:
        its text, the ids shown, and what was left out and why)."""
        from rlm_runtime.config import load_settings
        from rlm_runtime.registry.always import Always, gather

        if self._always is False:
            return Always()
        refs: list[str] = []
        if self._always is True:
            table, where = load_settings("contexts")
            listed = table.get("always", [])
            if not isinstance(listed, list) or not all(isinstance(x, str) for x in listed):
                raise ConfigError(f"{where}: [contexts] always is a list of ctx:ID strings")
            refs += listed
            refs += list(self.profile.always) if self.profile is not None else []
        else:
            refs += [str(r) for r in self._always]
        if not refs and self._registry is None and not self.paths.registry.exists():
            return Always()  # nothing registered: no registry to make
        return gather(self._registry_open(), refs, self.context_roots)

    def _living_of(self, source: Any, handle: Any) -> Living | None:
        """How ``handle`` (opened from ``source``) is read again when its file or folder changes."""
        from rlm_runtime.registry import Opened

        if isinstance(source, Opened):
            return None if source.reopen is None else of_handle(handle, source.reopen, source.path)
        name = getattr(handle, "name", None)
        if source is handle:  # a handle the caller opened: read again from where it was opened
            where = getattr(handle, "path", None) or getattr(handle, "root", None)
            return None if where is None else of_handle(handle, lambda: open_context(where, name=name))
        return of_handle(handle, lambda: self._open_source(source, name=name))

    @property
    def contexts(self) -> list[Any]:
        """The session's context handles, in the order the sandbox numbers them."""
        return list(self._handles)

    # ------------------------------------------------------------------ state

    def usage(self) -> dict[str, Any]:
        """What the session used: totals, by model, and the questions asked."""
        return {"totals": self.budget.totals(), "by_model": self.budget.usage(), "questions": self._questions}

    def reset(self) -> None:
        """A fresh worker with the same contexts: variables and the conversation are gone;
        the budget keeps what was spent."""
        with self._turn():
            self._sandbox.close()
            self._history.clear()
            self._sandbox, self._table = open_sandbox(self.setup, self._handles, pool_key=self.session_id,
                                                      on_wait=self._on_wait)

    def variable_names(self) -> list[str]:
        """The names of the variables in the worker (what ``SHOW_VARS`` lists)."""
        return list(self.variables())

    def variables(self) -> dict[str, str]:
        """The worker's variables and their types' names (``SHOW_VARS``: ``hits: GrepResult =
        ...``), in its order."""
        with self._turn():
            result = self._sandbox.execute("SHOW_VARS()")
        if not result.ok:
            return {}
        found: dict[str, str] = {}
        for line in (result.stdout or "").split("\n"):  # a value's U+2028 or "\r" starts no line
            name, sep, rest = line.partition(": ")
            if sep and name.isidentifier():
                kind = rest.partition(" = ")[0]
                found[name] = kind if kind.isidentifier() else ""
        return found

    def calls_in_flight(self) -> int:
        """Sub-calls (``llm_query`` and friends) of the running question in flight now (0 when idle)."""
        tree = self._tree
        return tree.slots.in_use if tree is not None else 0

    def worker_rss(self) -> int | None:
        """The session worker's resident memory in bytes (None when it is not running)."""
        return None if self._closed else self._sandbox.worker_rss()

    @property
    def history(self) -> list[harness.Exchange]:
        return list(self._history)

    @property
    def trajectory(self) -> str | None:
        return str(self._trace_path) if self._trace_path else None

    # ------------------------------------------------------------------ internals

    def _open_source(self, source: Any, name: str | None = None, *, memory_ok: bool = False) -> Any:
        """The handle of ``source``; for a registered memory store (``memory_ok``), its path."""
        from rlm_runtime.registry import Opened, is_ref

        if isinstance(source, Opened):  # opened by the caller from what it checked: taken as it is
            if source.store is not None:
                if not memory_ok:
                    raise ContextError(f"ctx:{source.id} is a memory store: it can only be the session's store, "
                                       "chosen when the session opens")
                if source.id is not None:
                    self._usage.track_store(source.id)
                return source.store
            if source.id is not None:
                self._usage.track(source.handle, source.id)
            return source.handle
        if not is_ref(source):
            return open_context(source, name=name)
        from rlm_runtime.registry import open_resolved

        resolved = self._registry_open().resolve(source, self.context_roots)
        if resolved.entry.kind == "memory" and memory_ok and resolved.path is not None:
            self._usage.track_store(resolved.entry.id)
            return resolved.path
        handle = open_resolved(resolved, name)
        self._usage.track(handle, resolved.entry.id)
        return handle

    def _registry_open(self) -> Registry:
        if self._registry is None:
            from rlm_runtime.registry import Registry

            self._registry = Registry.open(self.paths)
            self._owns_registry = True
        return self._registry

    def _record_usage(self) -> None:
        """Record the question's use of its registered contexts; a registry that refuses
        (busy past its timeout, removed) costs the answer nothing: a warning says so."""
        run_id = self._usage.end()
        if run_id is None:
            return
        try:
            registry = self._registry_open()
            registry.record_run(run_id, self._usage.counts(self._handles))
            found = self._usage.leads(self._handles)
            if found:
                registry.record_leads(found)
        except RLMError as e:
            import warnings

            warnings.warn(f"the registry of contexts did not record this run's use: {e}", stacklevel=3)

    def _earlier_answers(self) -> str:
        """The answer leads of the main context, when it is registered and the probe settings
        ask for them (``ProbeConfig.earlier_answers``); "" otherwise or when the registry
        cannot say (the question goes on without them)."""
        probe = self.setup.probe
        key = self._usage.registry_id(self._handles[0]) if self._handles else None
        if key is None or not getattr(probe, "earlier_answers", False):
            return ""
        try:
            return _leads.describe(self._registry_open().leads(key))
        except RLMError:
            return ""

    def _variables(self) -> str:
        """What SHOW_VARS prints, cut to a few lines: the names a follow-up may use."""
        text = self._sandbox.variables()
        return harness.cap(text, _VARIABLES_CHARS, self.setup.prompts.notes["cut"]) if text else ""

    def _on_wait(self, info: dict[str, Any]) -> None:
        self._emit({"type": "worker_wait", "run_id": None, "parent_id": None, "depth": 0,
                    "waited_s": float(info.get("waited_s", 0.0)), "pool_size": int(info.get("pool_size", 0)),
                    "detail": str(info.get("detail", ""))})

    def _live(self, event: Event) -> None:
        """A live event (a reply's text as it streams, a cell starting): for ``on_event``
        alone, never the trace."""
        if self.on_event is not None:
            try:
                self.on_event(event)
            except Exception:  # a display callback must not break a run
                pass

    def _emit(self, event: Event) -> None:
        event.setdefault("t", time.time())
        if event["type"] not in ("trace_start", "session_end"):
            event.setdefault("session_id", self.session_id)
        data = self._writer.emit(event)
        self._usage.observe(event)
        if self.on_event is not None:
            try:
                self.on_event(data)
            except Exception:  # a display callback must not break a run
                pass


def _with_limits(setup: Setup, limits: RunLimits) -> Setup:
    return dataclasses.replace(setup, limits=limits)


def _trace_path(trace: str | Path | bool | None, paths: Paths) -> Path | None:
    if trace is False:
        return None
    folder = Path(trace) if isinstance(trace, (str, Path)) else paths.traces
    if folder.suffix == ".jsonl":
        return folder
    return folder / f"run-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}.jsonl"


def _load_profile(profile: str | Path | Profile | None, paths: Paths) -> Profile | None:
    if profile is None or isinstance(profile, Profile):
        return profile
    return profiles.load_profile(profile, paths.brain_dirs)


def _open_memory(memory: bool | str | Path | MemoryStore | None, paths: Paths, *, readonly: bool = False) -> MemoryStore | None:
    if memory is None or memory is False:
        return None
    from rlm_runtime.memory.store import MemoryStore, default_store_path

    if isinstance(memory, MemoryStore):
        if readonly and not memory.db.readonly:
            raise ConfigError("memory_readonly: the MemoryStore given was opened for writing (open it with readonly=True)")
        return memory
    from rlm_runtime import contextual

    return MemoryStore(default_store_path(paths) if memory is True else user_path(memory), readonly=readonly,
                       quality=contextual.factory(paths.models))


def _registered_store(memory: bool | str | Path | MemoryStore | None, path: Path, ref: str) -> Any:
    """The session's memory store when ``ref`` (``ctx:ID``) names the store at ``path``."""
    if memory is None or memory is False:
        return path
    if isinstance(memory, (str, Path)) and user_path(memory).resolve() == path:
        return memory
    raise ConfigError(f"{ref} is a memory store, and the session has another one (memory=...): a session searches one")


def _probe_config() -> Any:
    return load_probe_config()
