"""The batch runner of ``rlm eval``: every task under every method, concurrently, durably.

* Jobs (task x method) run on a thread pool of ``concurrency`` threads (default
  ``default_concurrency``: the governor's worker count; one for a ``local:`` model, whose
  server holds one root conversation's window at a time), at most that many in flight.
* Each finished job is scored and appended to ``DIR/results.jsonl`` at once (``results.py``:
  fsync per line), from the worker thread, so a ``kill -9`` loses only the jobs in flight.
* ``resume=True`` skips jobs whose configuration hash is already in the file; without it, a
  folder holding results is refused (a new run would mix with an old one by accident).
* ``budget_usd`` caps the dollars of this invocation: each rlm job's session is capped at what
  is left when it starts, no job starts once it is spent, and a job stopped by that cap is not
  recorded (``--resume`` runs it later). Jobs in flight together may overshoot by their own cost.
* Ctrl-C (``KeyboardInterrupt`` in the thread that called ``run``): no job starts; every job in
  flight is cancelled (``Session.cancel``: the model call stops reading, the cell is
  interrupted); cancelled jobs are not recorded; ``run`` returns with ``stopped="interrupted"``.
* ``executor="ray"``: the jobs run on a Ray cluster (``ray_executor.py``: one runner per node,
  ``concurrency`` jobs at once per node); resume, the budget and the results file stay here,
  in the driver. Needs the ``ray`` extra (``ConfigError`` without it).
"""

from __future__ import annotations

import json
import re
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from rlm_runtime import private
from rlm_runtime.budget import RunLimits
from rlm_runtime.config import Paths, paths_from_env
from rlm_runtime.errors import ConfigError
from rlm_runtime.eval import scorers
from rlm_runtime.eval.methods import METHODS, Cancel, Job, MethodSettings, Outcome, run_method
from rlm_runtime.eval.results import ResultsFile, config_hash, done_hashes
from rlm_runtime.eval.tasks import Task, TaskFile
from rlm_runtime.eval.windows import context_window
from rlm_runtime.llm.base import Usage

if TYPE_CHECKING:
    from rlm_runtime.eval.ray_executor import RayOptions

EXECUTORS = ("local", "ray")


@dataclass(frozen=True)
class EvalConfig:
    """One ``rlm eval`` run.

    Args:
        model / sub_model: model names (``scripted:PATH``, ``local:NAME``, litellm names).
        methods: any of ``methods.METHODS``.
        profile: a profile name or TOML path (its limits, prompt addendum, temperature).
        limits: overrides of the run limits (``max_iterations=...``; None values ignored).
        policy: the sandbox policy.
        concurrency: jobs at once (None: ``default_concurrency``).
        out: the run's folder.
        resume: skip jobs done with the same configuration.
        budget_usd: dollars this invocation may spend (None: no cap).
        window: the model's window in tokens for direct and rag (None: ``windows.context_window``).
        judge_model: the model of the ``judge`` scorer (None: ``model``).
        rag_k: chunks the rag method searches for.
        executor: ``local`` (threads here) or ``ray`` (``ray_executor.py``).
        address: with ``ray``: an existing cluster's address (None: start a local one).
        cold: before each job, stop this process's local model engines, so that each task
            starts from a cold engine and its run does not depend on the tasks before it (a
            ``local:`` model at temperature 0 then gives one trajectory a task, whatever ran
            before; each task reads its first prompt cold). Jobs run one at a time, here.
    """

    model: str
    methods: tuple[str, ...] = ("rlm",)
    sub_model: str | None = None
    profile: str | None = None
    limits: dict[str, Any] = field(default_factory=dict)
    policy: str = "default"
    concurrency: int | None = None
    out: Path = Path("eval-out")
    resume: bool = False
    budget_usd: float | None = None
    window: int | None = None
    judge_model: str | None = None
    rag_k: int = 8
    executor: str = "local"
    address: str | None = None
    cold: bool = False


class Progress(Protocol):
    """What the runner tells a progress display (from the thread that called ``run``)."""

    def start(self, total: int, skipped: int, concurrency: int) -> None: ...

    def started(self, task: Task, method: str) -> None: ...

    def finished(self, record: dict[str, Any] | None, task: Task, method: str) -> None: ...

    def close(self, summary: Summary) -> None: ...


@dataclass
class Summary:
    """What a run did."""

    out: str
    jobs: int = 0
    skipped: int = 0
    done: int = 0
    failed: int = 0
    not_recorded: int = 0
    stopped: str | None = None  # None, "budget" or "interrupted"
    cost_usd: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    elapsed_s: float = 0.0
    accuracy: dict[str, float] = field(default_factory=dict)
    invalid_lines: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def default_concurrency(model: str, policy: str = "default") -> int:
    """Jobs at once: the governor's worker count (memory, CPUs), 1 for a ``local:`` model."""
    if model.startswith("local:"):
        return 1
    from rlm_runtime.governor import Governor
    from rlm_runtime.sandbox import load_policy

    return Governor.from_system(worker_mb=load_policy(policy).limits.memory_mb).max_workers


def resolve_limits(model: str, profile: str | None, overrides: dict[str, Any], paths: Paths) -> RunLimits:
    """The run limits of a model under a profile, with explicit overrides on top."""
    limits = RunLimits.for_model(model)
    if profile:
        from rlm_runtime import profiles

        loaded = profiles.load_profile(profile, paths.brain_dirs)
        limits = profiles.resolve(loaded, limits, paths.brain_dirs).limits
    changes = {k: v for k, v in overrides.items() if v is not None}
    try:
        return RunLimits(**{**limits.model_dump(), **changes})
    except ValueError as e:
        raise ConfigError(f"invalid limit: {e}") from e


def _safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)[:120] or "task"


def _symlink_prone(out: Path) -> list[Path]:
    """The parts of a run folder a planted symlink could send elsewhere: the folder itself, and
    every part of a relative one (the default ``eval-runs/<name>`` lies in the current folder,
    often an unpacked bundle whose ``eval-runs`` or ``eval-runs/<name>`` pointed at a served
    or shared folder, or at the home folder, which the run then made 0700 and wrote into)."""
    if out.is_absolute():
        return [out]
    return [Path(*out.parts[:n]) for n in range(1, len(out.parts) + 1)]


def check_run_folder(out: Path, *entries: str) -> None:
    """Raise ``ConfigError`` when the run folder ``out`` (see ``_symlink_prone``) or one of its
    ``entries`` is a symlink: a run writes only inside its folder."""
    for part in (*_symlink_prone(out), *(out / name for name in entries)):
        if part.is_symlink():
            raise ConfigError(f"{part} is a symlink: a run writes only inside its folder; remove it or choose another --out")


class Runner:
    """Runs ``config`` over the tasks of ``task_file``; ``run()`` once."""

    def __init__(self, config: EvalConfig, task_file: TaskFile, *, progress: Progress | None = None,
                 paths: Paths | None = None, ray_options: RayOptions | None = None) -> None:
        """``ray_options``: the ray executor's settings (``config.address`` and
        ``config.concurrency``, when set, take precedence over theirs)."""
        if config.executor not in EXECUTORS:
            raise ConfigError(f"unknown executor {config.executor!r}; executors: {', '.join(EXECUTORS)}")
        if config.executor == "ray":
            from rlm_runtime.eval.ray_executor import import_ray

            import_ray()
        elif config.address is not None:
            raise ConfigError("--address is for --executor ray")
        unknown = [m for m in config.methods if m not in METHODS]
        if unknown or not config.methods:
            raise ConfigError(f"unknown method {unknown[0] if unknown else '(none)'!r}; methods: {', '.join(METHODS)}")
        if config.budget_usd is not None and config.budget_usd < 0:
            raise ConfigError("--budget-usd must be 0 or more")
        if config.concurrency is not None and config.concurrency < 1:
            raise ConfigError("--concurrency must be at least 1")
        if config.cold:
            if not any(m is not None and m.startswith("local:") for m in (config.model, config.sub_model)):
                raise ConfigError("--cold restarts a local: model's engine; this run has none")
            if config.executor != "local" or (config.concurrency or 1) > 1:
                raise ConfigError("--cold runs one job at a time on the local executor")
        self.config = config
        self.task_file = task_file
        self.progress = progress
        self.paths = paths or paths_from_env()
        self.out = Path(config.out)
        self.results = ResultsFile(self.out / "results.jsonl")
        self.limits = resolve_limits(config.model, config.profile, config.limits, self.paths)
        needs_window = any(m in ("direct", "rag") for m in config.methods)
        self.window = context_window(config.model, config.window) if needs_window else (config.window or 0)
        self.settings = MethodSettings(model=config.model, sub_model=config.sub_model, limits=self.limits,
                                       profile=config.profile, policy=config.policy, window=self.window, rag_k=config.rag_k,
                                       trace_dir=self.out / "trajectories", paths=self.paths)
        self.ray_options = ray_options
        # With ray, the slots of the whole cluster, known once it is reached (``run``).
        self.concurrency = 1 if config.cold else config.concurrency or default_concurrency(config.model, config.policy)
        self._lock = threading.Lock()
        self._spent = 0.0
        self._budget_hit = False
        self._judge_client: Any = None

    # ------------------------------------------------------------------ configuration

    def job_config(self, method: str) -> dict[str, Any]:
        """What, besides the task, decides a result of ``method`` (hashed for resume)."""
        c = self.config
        data: dict[str, Any] = {"model": c.model, "sub_model": c.sub_model, "profile": c.profile, "policy": c.policy,
                                "method": method}
        if method in ("rlm", "rlm-nosub", "rlm-words"):
            data["limits"] = self.limits.model_dump(exclude={"assists"})
            # Only when not "auto": results from before the switch keep their hashes.
            if self.limits.assists != "auto":
                data["assists"] = self.limits.assists
        else:
            data.update(window=self.window, rag_k=c.rag_k if method == "rag" else None)
        if any(t.scorer_name == "judge" for t in self.task_file.tasks):
            data["judge_model"] = c.judge_model or c.model
        return data

    def jobs(self) -> tuple[list[tuple[Task, str, str]], int]:
        """(jobs to run, jobs skipped as done).

        Raises:
            ConfigError: results already there without ``resume``, or a file the run writes
                is a symlink (a run folder from someone else could point it anywhere).
        """
        check_run_folder(self.out, "results.jsonl", "runs.jsonl", "trajectories")
        records = self.results.read()
        if records and not self.config.resume:
            raise ConfigError(f"{self.results.path} holds results already: pass --resume to continue that run, "
                              "or choose another --out")
        done = done_hashes(records)
        todo: list[tuple[Task, str, str]] = []
        skipped = 0
        for task in self.task_file.tasks:
            for method in self.config.methods:
                h = config_hash(task, method, self.job_config(method))
                if h in done:
                    skipped += 1
                else:
                    todo.append((task, method, h))
        return todo, skipped

    def _write_config(self) -> None:
        c = self.config
        info = {"model": c.model, "sub_model": c.sub_model, "methods": list(c.methods), "profile": c.profile,
                "policy": c.policy, "limits": self.limits.model_dump(), "window": self.window or None,
                "tasks": str(self.task_file.path), "concurrency": self.concurrency, "cold": c.cold, "budget_usd": c.budget_usd,
                "started": time.strftime("%Y-%m-%dT%H:%M:%S")}
        from rlm_runtime._version import __version__

        info["version"] = __version__
        private.make_dir(self.out)
        runs = self.out / "runs.jsonl"
        with private.open_append(runs) as f:
            f.write(json.dumps(info) + "\n")

    # ------------------------------------------------------------------ running

    def run(self) -> Summary:
        """Run every job not done yet; see the module docstring for stops and interruption."""
        began = time.monotonic()
        todo, skipped = self.jobs()
        self._write_config()
        summary = Summary(out=str(self.out), jobs=len(todo), skipped=skipped, invalid_lines=len(self.task_file.errors))
        pool: Any
        if self.config.executor == "ray" and todo:
            from dataclasses import replace

            from rlm_runtime.eval.ray_executor import RayOptions, RayPool

            options = self.ray_options or RayOptions()
            options = replace(options, address=self.config.address or options.address,
                              per_node=self.config.concurrency or options.per_node)
            pool = RayPool(self, options)
            self.concurrency = pool.start()
            submit = pool.submit
        else:
            pool = ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="rlm-eval")

            def submit(task: Task, method: str, h: str, cancel: Cancel) -> Future[dict[str, Any] | None]:
                return pool.submit(self._job, task, method, h, cancel)
        if self.progress is not None:
            self.progress.start(len(todo), skipped, self.concurrency)
        running: dict[Future[dict[str, Any] | None], tuple[Task, str, Cancel]] = {}
        pending = iter(todo)
        scores: dict[str, list[float]] = {}
        try:
            exhausted = False
            while True:
                while not exhausted and len(running) < self.concurrency and summary.stopped is None:
                    if self._over_budget():
                        summary.stopped = "budget"
                        break
                    item = next(pending, None)
                    if item is None:
                        exhausted = True
                        break
                    task, method, h = item
                    cancel = Cancel()
                    running[submit(task, method, h, cancel)] = (task, method, cancel)
                    if self.progress is not None:
                        self.progress.started(task, method)
                if not running:
                    break
                finished, _ = wait(list(running), timeout=0.5, return_when=FIRST_COMPLETED)
                for fut in finished:
                    task, method, _ = running.pop(fut)
                    self._count(fut.result(), summary, scores, task, method)
                if self._budget_hit and summary.stopped is None:
                    summary.stopped = "budget"
        except KeyboardInterrupt:
            summary.stopped = "interrupted"
            for _, _, cancel in running.values():
                cancel.cancel()
            for fut, (task, method, _) in list(running.items()):
                try:
                    self._count(fut.result(), summary, scores, task, method)
                except Exception:
                    summary.not_recorded += 1
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        summary.elapsed_s = time.monotonic() - began
        summary.accuracy = {m: sum(v) / len(v) for m, v in scores.items() if v}
        if self.progress is not None:
            self.progress.close(summary)
        return summary

    def _count(self, record: dict[str, Any] | None, summary: Summary, scores: dict[str, list[float]], task: Task,
               method: str) -> None:
        if record is None:
            summary.not_recorded += 1
        else:
            summary.done += 1
            summary.failed += record.get("error") is not None
            summary.cost_usd += float(record.get("cost_usd") or 0.0)
            summary.input_tokens += int(record.get("input_tokens") or 0)
            summary.output_tokens += int(record.get("output_tokens") or 0)
            scores.setdefault(method, []).append(float(record.get("score") or 0.0))
        if self.progress is not None:
            self.progress.finished(record, task, method)

    def _over_budget(self) -> bool:
        budget = self.config.budget_usd
        with self._lock:
            return self._budget_hit or (budget is not None and self._spent >= budget)

    def _cost_cap(self) -> float | None:
        budget = self.config.budget_usd
        if budget is None:
            return None
        with self._lock:
            return budget - self._spent

    def job_spec(self, task: Task, method: str, h: str) -> dict[str, Any]:
        """A job's fields but its ``Cancel`` (``methods.Job``), its cost cap taken now."""
        sources, memory = self.task_file.sources(task)
        trace = self.out / "trajectories" / f"{_safe_name(task.id)}.{method}.{h[:8]}.jsonl" if method.startswith("rlm") else None
        return {"task_id": task.id, "question": task.question, "sources": sources, "memory": memory, "trace": trace,
                "cost_cap": self._cost_cap()}

    def _job(self, task: Task, method: str, h: str, cancel: Cancel) -> dict[str, Any] | None:
        """Run one job in a pool thread; its record (already written), or None when it was
        cancelled or stopped by the batch budget (not written: resume runs it again)."""
        began = time.monotonic()
        try:
            # job_spec checks the task's contexts again: a refused one fails this task alone.
            job = Job(**self.job_spec(task, method, h), cancel=cancel)
            if self.config.cold:
                from rlm_runtime.llm.local import stop_all

                stop_all()  # the next request starts the engine afresh: no prompt of an earlier task cached
            outcome = run_method(method, job, self.settings)
        except Exception as e:  # a bug or an OS error: the task fails, the batch goes on
            outcome = Outcome(None, error=f"{type(e).__name__}: {e}", error_type=type(e).__name__)
        return self._settle(task, method, h, cancel, outcome, time.monotonic() - began)

    def _settle(self, task: Task, method: str, h: str, cancel: Cancel, outcome: Outcome, wall: float) -> dict[str, Any] | None:
        """What a finished job leaves: its record, scored and appended, or None (not written)."""
        if cancel.event.is_set() and outcome.answer is None:
            return None
        if outcome.error_type == "BudgetExceeded" and (outcome.limit or "").startswith("session."):
            with self._lock:
                self._budget_hit = True
            self._add_cost(outcome.usage)
            return None
        record = self._record(task, method, h, outcome, wall)
        self.results.append(record)
        with self._lock:
            self._spent += float(record["cost_usd"])
        return record

    def _add_cost(self, usage: dict[str, dict[str, Any]]) -> None:
        with self._lock:
            self._spent += sum(float(u.get("cost_usd") or 0.0) for u in usage.values())

    def _judge_for(self, usage: dict[str, dict[str, Any]]) -> scorers.Judge:
        """A judge whose calls are added to ``usage`` (one task's record) under
        ``judge:<model>``, so that they count in the record's cost and the batch budget."""
        with self._lock:
            if self._judge_client is None:
                from rlm_runtime.llm import make_client

                self._judge_client = make_client(self.config.judge_model or self.config.model)
            client = self._judge_client

        def add(model: str, spent: Any) -> None:
            row = usage.setdefault(f"judge:{model}", Usage().to_dict())
            for key, value in spent.to_dict().items():
                row[key] = round(row[key] + value, 6) if key == "cost_usd" else row[key] + value

        return scorers.model_judge(client, self.paths.brain_dirs, usage=add)

    def _record(self, task: Task, method: str, h: str, outcome: Outcome, wall: float) -> dict[str, Any]:
        usage = dict(outcome.usage)
        score_error = None
        try:
            judge = self._judge_for(usage) if task.scorer_name == "judge" and outcome.answer is not None else None
            score = scorers.score(task, outcome.answer, judge)
        except Exception as e:  # a judge that failed: the task scores 0 and says why
            score, score_error = 0.0, f"scoring failed: {type(e).__name__}: {e}"
        trajectory = outcome.trajectory
        if trajectory:
            try:
                trajectory = Path(trajectory).resolve().relative_to(self.out.resolve()).as_posix()
            except ValueError:
                pass
        return {
            "task_id": task.id, "method": method, "config_hash": h, "model": self.config.model,
            "sub_model": self.config.sub_model, "profile": self.config.profile, "family": task.family,
            "length": task.length, "chars": task.metadata.get("chars"), "question": task.question, "gold": task.answer,
            "scorer": task.scorer_name, "answer": outcome.answer, "score": round(score, 4),
            "correct": score >= 0.999, "usage": usage,
            "input_tokens": sum(int(u.get("input_tokens") or 0) for u in usage.values()),
            "output_tokens": sum(int(u.get("output_tokens") or 0) for u in usage.values()),
            "cost_usd": round(sum(float(u.get("cost_usd") or 0.0) for u in usage.values()), 6),
            "wall_s": round(wall, 3), "iterations": outcome.iterations, "depth": outcome.depth,
            "trajectory": trajectory, "error": outcome.error if score_error is None else score_error,
            "error_type": outcome.error_type if score_error is None else "ScoringError",
            "window": (self.window or None) if method in ("direct", "rag") else None, "extra": outcome.extra,
            "load_all_tokens": outcome.load_all_tokens, "probe_s": outcome.probe_s,
            "ended": time.strftime("%Y-%m-%dT%H:%M:%S"),
        }
