"""``rlm eval --executor ray``: the jobs of a batch run on a Ray cluster, one runner per node.

The driver (the process running ``rlm eval``) keeps everything that decides what is done:
the job list and resume by configuration hash, the batch budget (each job's cost cap is what
is left when it starts), scoring, and the only writer of ``DIR/results.jsonl``
(``runner.Runner``). Ray runs the jobs:

* one ``NodeRunner`` actor per node that has CPUs (soft node affinity), holding the run's
  ``MethodSettings`` and a governor-sized number of slots (``runner.default_concurrency`` on
  that node, or ``--concurrency``: jobs at once *per node*); its jobs run on the actor's
  threads, so they share that process's sandbox worker pool;
* the driver keeps at most the sum of the slots in flight, each job on the least loaded
  actor; a driver thread per job waits for its outcome (``ray.get``) and settles it there
  (``Runner._settle``: score, append, count the cost), exactly as a local pool thread does.

A Ray worker dying mid-job (the actor's process killed, its node lost): Ray restarts the
actor (``max_restarts``) and runs its unfinished jobs again (``max_task_retries``), up to
``max_retries`` times; a job run twice is recorded once, since only the driver writes and
only its final outcome comes back. A job that still cannot finish is not recorded, counted in
``Summary.not_recorded`` and logged: ``--resume`` runs it later. Ctrl-C cancels the jobs in
flight on their actors (``Session.cancel`` there); they are not recorded either.

Clusters:

* no ``--address``: a local cluster is started for the run and shut down at its end: this
  machine only, every Ray server on ``127.0.0.1`` (Ray binds the node's IP, and is told the
  node IP is loopback), no dashboard, a small object store (``object_store_mb``);
* ``--address HOST:PORT`` (or ``auto``, or ``ray://HOST:10001`` for Ray Client): connect to
  an existing cluster, started on the head with ``ray start --head --port 6379`` and on each
  other node with ``ray start --address HEAD:6379``; every node needs rlm_runtime installed
  (same version) and the task file's contexts and ``--out`` at the same paths (a shared
  filesystem), since jobs open their contexts and write trajectories there. The cluster is
  left running. A process already connected to Ray (``ray.init`` before ``Runner.run``) is
  used as it is.

Ray is an optional dependency (``pip install 'rlm_runtime[ray]'``), imported only here, only
when the executor starts.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rlm_runtime.errors import ConfigError, RLMError
from rlm_runtime.eval.methods import Cancel, Job, MethodSettings, Outcome, run_method

if TYPE_CHECKING:
    from rlm_runtime.eval.runner import Runner
    from rlm_runtime.eval.tasks import Task

log = logging.getLogger(__name__)

INSTALL_HINT = "pip install 'rlm_runtime[ray]'"
#: Ray reads this at import: false makes it take 127.0.0.1 as this node's IP (and bind there).
_LOOPBACK_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


def import_ray() -> Any:
    """The ``ray`` module, or a ``ConfigError`` that says how to install it."""
    try:
        import ray
    except ImportError as e:
        raise ConfigError(f"--executor ray needs Ray, an optional dependency: {INSTALL_HINT}") from e
    return ray


@contextmanager
def loopback_node() -> Iterator[None]:
    """While Ray nodes start inside this block, they take 127.0.0.1 as their IP: every server
    they start (GCS, raylet, workers) listens on loopback only. Restores the environment after."""
    import_ray()
    from ray._private import ray_constants

    before_env, before_flag = os.environ.get(_LOOPBACK_ENV), ray_constants.ENABLE_RAY_CLUSTER
    os.environ[_LOOPBACK_ENV] = "0"  # the processes Ray spawns read it at their import
    ray_constants.ENABLE_RAY_CLUSTER = False  # this process imported ray already
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = before_flag
        if before_env is None:
            os.environ.pop(_LOOPBACK_ENV, None)
        else:
            os.environ[_LOOPBACK_ENV] = before_env


@dataclass(frozen=True)
class RayOptions:
    """How the Ray executor runs.

    Args:
        address: an existing cluster (``HOST:PORT``, ``auto``, ``ray://...``); None starts a
            local one for the run.
        per_node: jobs at once on each node (None: that node's governor count).
        max_retries: restarts of a dead node runner, and runs again of each job it held.
        num_cpus: CPUs of the local cluster (None: Ray's count).
        object_store_mb: the local cluster's object store (jobs pass small objects only).
        worker_setup: called in each node runner before its first job (say, to register a
            model provider); must pickle (a module-level function, or a partial of one).
    """

    address: str | None = None
    per_node: int | None = None
    max_retries: int = 2
    num_cpus: int | None = None
    object_store_mb: int = 100
    worker_setup: Callable[[], Any] | None = None


class NodeRunner:
    """Runs jobs on one node (made a Ray actor by ``RayPool``); threads, one job each."""

    def __init__(self, settings: MethodSettings, per_node: int | None, setup: Callable[[], Any] | None) -> None:
        if setup is not None:
            setup()
        from rlm_runtime.eval.runner import default_concurrency

        self.settings = settings
        self.capacity = per_node or default_concurrency(settings.model, settings.policy)
        self._cancels: dict[str, Cancel] = {}
        self._lock = threading.Lock()

    def info(self) -> dict[str, Any]:
        import socket

        return {"capacity": self.capacity, "host": socket.gethostname(), "pid": os.getpid()}

    def run(self, key: str, method: str, job: dict[str, Any]) -> tuple[Outcome, float]:
        """Run one job; (its outcome, wall seconds). Never raises for a failed task."""
        cancel = Cancel()
        with self._lock:
            self._cancels[key] = cancel
        began = time.monotonic()
        try:
            outcome = run_method(method, Job(**job, cancel=cancel), self.settings)
        except Exception as e:  # a bug or an OS error: the task fails, the batch goes on
            outcome = Outcome(None, error=f"{type(e).__name__}: {e}", error_type=type(e).__name__)
        finally:
            with self._lock:
                self._cancels.pop(key, None)
        return outcome, time.monotonic() - began

    def cancel(self, key: str) -> None:
        with self._lock:
            cancel = self._cancels.get(key)
        if cancel is not None:
            cancel.cancel()


class RayPool:
    """The runner's pool on a Ray cluster: ``submit`` a job, get a future of its record.

    ``start()`` connects (or starts a local cluster) and places one ``NodeRunner`` per node;
    ``slots`` is then the jobs the cluster takes at once. ``shutdown()`` ends the actors and
    a cluster this pool started.
    """

    def __init__(self, runner: Runner, options: RayOptions) -> None:
        self.runner = runner
        self.options = options
        self.slots = 0
        self.nodes: list[dict[str, Any]] = []
        self._actors: list[Any] = []
        self._load: list[int] = []
        self._dead: set[int] = set()
        self._free = threading.Condition()
        self._started_ray = False
        self._threads: ThreadPoolExecutor | None = None
        self._ray: Any = None

    def start(self) -> int:
        ray = self._ray = import_ray()
        o = self.options
        if not ray.is_initialized():
            try:
                if o.address is None:
                    with loopback_node():
                        # "local": a new cluster, even when RAY_ADDRESS names another.
                        ray.init(address="local", num_cpus=o.num_cpus, include_dashboard=False, object_store_memory=o.object_store_mb * 2**20,
                                 log_to_driver=False, configure_logging=False)
                else:
                    ray.init(address=o.address, log_to_driver=False, configure_logging=False)
            except (ConnectionError, RuntimeError, ValueError) as e:
                where = f"the Ray cluster at {o.address}" if o.address else "a local Ray cluster"
                raise ConfigError(f"cannot start or reach {where}: {e}") from e
            self._started_ray = True
        try:
            self._place(ray)
        except BaseException:
            self.shutdown()
            raise
        return self.slots

    def _place(self, ray: Any) -> None:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        o = self.options
        alive = [n for n in ray.nodes() if n.get("Alive")]
        nodes = [n for n in alive if (n.get("Resources") or {}).get("CPU", 0) > 0] or alive
        # num_cpus=0: the jobs mostly wait on models; the governor, not Ray, sizes a node's share.
        actor_cls = ray.remote(num_cpus=0, max_restarts=o.max_retries, max_task_retries=o.max_retries,
                               max_concurrency=1000)(NodeRunner)
        settings = self.runner.settings
        for node in nodes:
            strategy = NodeAffinitySchedulingStrategy(node["NodeID"], soft=True)
            self._actors.append(actor_cls.options(scheduling_strategy=strategy).remote(settings, o.per_node, o.worker_setup))
        try:
            infos = ray.get([a.info.remote() for a in self._actors], timeout=120)
        except Exception as e:
            raise ConfigError(f"the Ray node runners did not start: {type(e).__name__}: {e} "
                              "(is rlm_runtime installed on every node?)") from e
        self.nodes = [{**info, "node_id": n["NodeID"], "address": n.get("NodeManagerAddress")} for info, n in zip(infos, nodes, strict=True)]
        self._load = [0] * len(self._actors)
        self.slots = sum(int(i["capacity"]) for i in infos)
        self._threads = ThreadPoolExecutor(max_workers=max(1, self.slots), thread_name_prefix="rlm-eval-ray")

    def submit(self, task: Task, method: str, h: str, cancel: Cancel) -> Future[dict[str, Any] | None]:
        """Run a job on the least loaded node; the future gives its record, or None when it
        was not recorded (cancelled, stopped by the batch budget, or lost with its worker)."""
        assert self._threads is not None, "start() first"
        return self._threads.submit(self._job, task, method, h, cancel)

    def _take_slot(self) -> int | None:
        """The least loaded live node runner with a free slot (waiting for one), or None when
        every runner is dead."""
        with self._free:
            while True:
                live = [k for k in range(len(self._actors)) if k not in self._dead]
                if not live:
                    return None
                free = [k for k in live if self._load[k] < self.nodes[k]["capacity"]]
                if free:
                    i = min(free, key=lambda k: self._load[k] / self.nodes[k]["capacity"])
                    self._load[i] += 1
                    return i
                self._free.wait()

    def _job(self, task: Task, method: str, h: str, cancel: Cancel) -> dict[str, Any] | None:
        runner = self.runner
        if cancel.event.is_set():
            return None
        i = self._take_slot()
        if i is None:
            log.warning("rlm eval: job %s/%s not run: every Ray node runner is dead; --resume runs it", task.id, method)
            return None
        try:
            job = runner.job_spec(task, method, h)
        except RLMError as e:  # a context refused since the file was read: this task fails alone
            with self._free:
                self._load[i] -= 1
                self._free.notify_all()
            return runner._settle(task, method, h, cancel, Outcome(None, error=str(e), error_type=type(e).__name__), 0.0)
        actor = self._actors[i]
        key = f"{h}:{id(cancel)}"
        try:
            cancel.on_cancel(lambda: actor.cancel.remote(key))
            ref = actor.run.remote(key, method, job)
            outcome, wall = self._ray.get(ref)
        except Exception as e:  # the actor died past its retries, or Ray failed: left for --resume
            log.warning("rlm eval: job %s/%s lost on node %s (%s: %s); not recorded, --resume runs it",
                        task.id, method, self.nodes[i].get("address"), type(e).__name__, e)
            if isinstance(e, self._ray.exceptions.RayActorError):
                with self._free:
                    self._dead.add(i)  # no more jobs for it
            return None
        finally:
            with self._free:
                self._load[i] -= 1
                self._free.notify_all()
        return runner._settle(task, method, h, cancel, outcome, wall)

    def shutdown(self, wait: bool = True, cancel_futures: bool = False) -> None:
        if self._threads is not None:
            self._threads.shutdown(wait=wait, cancel_futures=cancel_futures)
        ray = self._ray
        if ray is None:
            return
        for actor in self._actors:
            try:
                ray.kill(actor, no_restart=True)
            except Exception:  # already gone
                pass
        self._actors = []
        if self._started_ray:
            ray.shutdown()
            self._started_ray = False
