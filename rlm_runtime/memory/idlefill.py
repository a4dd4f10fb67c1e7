"""The quality tier's fill in the background, while the store's owner is idle
(``MemoryStore.fill_quality``, started by ``MemoryStore.fill_while_idle``). One fill may keep
several stores (a server's default store and its tokens' own): each quiet spell fills them in
the order given, one after the other.

An owner that is busy now and then (a server answering requests, a REPL or ``Session``
answering questions) marks its work with ``request()``; once nothing has been running for
``idle_s`` seconds, the fill gives chunks their quality vectors batch by batch (on its own
connection to the store; each batch embedded with no lock held), and stops between two
chunks' embeddings as soon as work comes or the owner closes (a chunk is eight of the model's
windows at most); it tries again after the next quiet spell. On Linux the fill's thread runs
at the lowest CPU priority (niceness 19), as do the threads the model's runs go on (the
fill's thread starts them, and they inherit it). A store with nothing left to fill is looked
at again every ``recheck_s`` (a note remembered since, a folder added). Any failure (the
model cannot load or run, the store is busy or damaged) is kept in ``errors`` (by the store's
label) and logged, and tried again later; a store that fails does not keep the next from its
fill.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from rlm_runtime.errors import RLMError

log = logging.getLogger(__name__)


class _Busy(Exception):
    """Work came (or the owner is closing): the fill stops between chunks."""


class IdleFill:
    """Fills the quality tier while its owner is idle (see the module docstring).

    Args:
        stores: the stores to fill now, each as a label and what opens it for writing (a
            connection of the fill's own); asked again at each quiet spell (a store added
            since is filled too).
        idle_s: seconds with no request before a fill starts.
        recheck_s: seconds between looks at stores that had nothing left to fill.
    """

    def __init__(self, stores: Callable[[], Iterable[tuple[str, Callable[[], Any]]]], *, idle_s: float = 60.0,
                 recheck_s: float = 60.0) -> None:
        self._stores = stores
        self.idle_s = idle_s
        self.recheck_s = recheck_s
        self._lock = threading.Lock()
        self._running = 0
        self._last = time.monotonic()
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rlm-quality-fill", daemon=True)
        #: What the fills did (for health): chunks embedded, and by store label the error
        #: that ended its last fill (none once a fill of it ends well).
        self.embedded = 0
        self.errors: dict[str, str] = {}

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._closing.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30)

    @contextlib.contextmanager
    def request(self) -> Iterator[None]:
        """Around each piece of the owner's work: the fill waits for the quiet after it."""
        with self._lock:
            self._running += 1
        try:
            yield
        finally:
            with self._lock:
                self._running -= 1
                self._last = time.monotonic()

    def idle(self) -> bool:
        with self._lock:
            return self._running == 0 and time.monotonic() - self._last >= self.idle_s

    def _check(self) -> None:
        if self._closing.is_set() or not self.idle():
            raise _Busy

    def _run(self) -> None:
        _lowest_priority()
        wait = min(self.idle_s, 5.0)
        while not self._closing.wait(wait):
            if not self.idle():
                wait = min(self.idle_s, 5.0)
                continue
            try:
                for label, open_store in list(self._stores()):
                    self._fill(label, open_store)
            except _Busy:
                wait = min(self.idle_s, 5.0)
                continue
            except Exception as e:  # noqa: BLE001 - the list of stores could not be made: tried later
                log.warning("the quality tier's fill found no stores: %s", e)
            wait = self.recheck_s

    def _fill(self, label: str, open_store: Callable[[], Any]) -> None:
        """One store's fill, to its end or until work comes (``_Busy``, raised on); any other
        failure is kept under ``label`` and logged."""
        self._check()
        # Counted as each batch commits: a fill held off by busy() after a batch keeps its count.
        before = self.embedded

        def committed(progress: Any, start: int = before) -> None:
            self.embedded = start + progress.done

        try:
            with contextlib.closing(open_store()) as store:
                store.fill_quality(stop=self._check, progress=committed)
        except _Busy:
            raise
        except Exception as e:  # noqa: BLE001 - the model cannot load or run, the store is busy or damaged:
            # said (health shows it) and tried later; the thread lives on
            self.errors[label] = str(e) if isinstance(e, RLMError) else f"{type(e).__name__}: {e}"
            log.warning("the quality tier's fill of %s stopped: %s", label, e)
            return
        self.errors.pop(label, None)


def _lowest_priority() -> None:
    """This thread (and the threads it starts) at niceness 19, on Linux, where a thread id
    names the thread to ``setpriority`` (elsewhere it could name another process)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
    except (AttributeError, OSError):
        pass
