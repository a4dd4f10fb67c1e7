"""The runtime sessions of a server's clients.

A client (an MCP connection, a REST caller naming a session) gets one ``Session``, kept
between its requests so that its worker, its variables and its conversation carry from one
question to the next. Sessions are capped in number, because each holds a worker process
and the machine's memory decides how many of those fit: when every place is taken by a
session answering right now, a new client waits ``wait_s`` and is then told the server is
busy; an idle session is closed to make room, the longest idle first, and any session idle
for ``idle_s`` is closed anyway.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from rlm_runtime.errors import SessionBusy, WorkersBusy

#: What opens a session: (what to open it over, as the opener takes it; the callback its
#: events go to) -> a Session.
Opener = Callable[[Any, Callable[[dict[str, Any]], None]], Any]
#: A listener of one request's events.
Listener = Callable[[dict[str, Any]], None]


@dataclass
class _Place:
    """One session place: the session (None while it opens), what it was opened over."""

    contexts: tuple[str, ...]
    session: Any = None
    used: float = 0.0
    busy: bool = True
    listener: Listener | None = field(default=None, repr=False)

    def hear(self, event: dict[str, Any]) -> None:
        listener = self.listener
        if listener is not None:
            listener(event)


class SessionPool:
    """Sessions by client key, at most ``size`` at once.

    Args:
        opener: makes a session over context sources, its events sent to a callback.
        size: sessions kept at once.
        idle_s: a session unused this long is closed at the next lease or ``sweep``.
        wait_s: how long a lease waits for a place when all are answering.
    """

    def __init__(self, opener: Opener, *, size: int, idle_s: float, wait_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._opener = opener
        self.size = max(1, size)
        self.idle_s = idle_s
        self.wait_s = wait_s
        self._clock = clock
        self._places: dict[Hashable, _Place] = {}
        self._changed = threading.Condition()
        self._closed = False

    def __len__(self) -> int:
        with self._changed:
            return len(self._places)

    def worker_rss(self) -> list[int | None]:
        """The resident memory of each kept session's worker (None: not started, or busy)."""
        with self._changed:
            held = [p.session for p in self._places.values() if p.session is not None]
        out: list[int | None] = []
        for session in held:
            try:
                out.append(session.worker_rss())
            except Exception:  # noqa: BLE001 - a session closing meanwhile reads as no worker
                out.append(None)
        return out

    @contextmanager
    def lease(self, key: Hashable | None, contexts: tuple[str, ...], sources: Any,
              listener: Listener | None = None) -> Iterator[Any]:
        """The client's session over ``contexts`` (opened from ``sources`` when it has none,
        or when it had one over other contexts), for the length of one request.

        ``key`` None: a session for this request alone, closed after it.

        Raises:
            SessionBusy: the client's session is answering another request.
            WorkersBusy: no place came free within ``wait_s``.
        """
        own_key: Hashable = key if key is not None else object()
        place, stale = self._claim(own_key, contexts)
        if stale is not None:
            _close(stale)
        try:
            if place.session is None:
                place.session = self._opener(sources, place.hear)
        except BaseException:
            self._drop(own_key, place)
            raise
        place.listener = listener
        try:
            yield place.session
        finally:
            place.listener = None
            if key is None:
                self._drop(own_key, place)
            else:
                with self._changed:
                    place.busy = False
                    place.used = self._clock()
                    self._changed.notify_all()

    def _claim(self, key: Hashable, contexts: tuple[str, ...]) -> tuple[_Place, Any]:
        """A place for ``key`` marked busy, and a session to close outside the lock (or None)."""
        deadline = self._clock() + self.wait_s
        with self._changed:
            while True:
                if self._closed:
                    raise WorkersBusy("the server is shutting down", pool_size=self.size)
                stale = self._sweep_locked()
                held = self._places.get(key)
                if held is not None and held.busy:
                    for s in stale:
                        _close_later(s)
                    raise SessionBusy("this client's session is answering another request; wait for it, or cancel it")
                if held is not None and held.contexts == contexts:
                    held.busy = True
                    return held, _many(stale)
                if held is not None:  # over other contexts: a new session replaces it
                    del self._places[key]
                    stale.append(held.session)
                if len(self._places) >= self.size:
                    idle = [(p.used, k) for k, p in self._places.items() if not p.busy]
                    if idle:
                        _, victim = min(idle, key=lambda item: item[0])
                        stale.append(self._places.pop(victim).session)
                if len(self._places) < self.size:
                    place = _Place(contexts=contexts, used=self._clock())
                    self._places[key] = place
                    return place, _many(stale)
                for s in stale:
                    _close_later(s)
                left = deadline - self._clock()
                if left <= 0:
                    raise WorkersBusy(f"the server is busy: all {self.size} sessions are answering; try again shortly",
                                      pool_size=self.size)
                self._changed.wait(min(left, 1.0))

    def _sweep_locked(self) -> list[Any]:
        now = self._clock()
        old = [k for k, p in self._places.items() if not p.busy and now - p.used >= self.idle_s]
        return [self._places.pop(k).session for k in old]

    def _drop(self, key: Hashable, place: _Place) -> None:
        with self._changed:
            if self._places.get(key) is place:
                del self._places[key]
            self._changed.notify_all()
        _close(place.session)

    def sweep(self) -> int:
        """Close the sessions idle for ``idle_s``; how many were closed."""
        with self._changed:
            stale = self._sweep_locked()
            self._changed.notify_all()
        for s in stale:
            _close(s)
        return len(stale)

    def cancel(self, key: Hashable) -> bool:
        """Stop what the client's session is answering; True if something was running."""
        with self._changed:
            place = self._places.get(key)
        return bool(place is not None and place.session is not None and place.session.cancel())

    def close(self, key: Hashable) -> None:
        """Close the client's session (the client left); one answering is cancelled first."""
        with self._changed:
            place = self._places.pop(key, None)
            self._changed.notify_all()
        if place is not None and place.session is not None:
            place.session.cancel()
            _close(place.session)

    def close_all(self) -> None:
        """Close every session (the server stops); later leases are refused."""
        with self._changed:
            self._closed = True
            places = list(self._places.values())
            self._places.clear()
            self._changed.notify_all()
        for place in places:
            if place.session is not None:
                place.session.cancel()
                _close(place.session)


def _many(sessions: list[Any]) -> Any:
    """Sessions to close after the lock is let go, as one object with a ``close``."""
    return _Closer(sessions) if sessions else None


class _Closer:
    def __init__(self, sessions: list[Any]) -> None:
        self.sessions = sessions

    def close(self) -> None:
        for s in self.sessions:
            _close(s)


def _close_later(session: Any) -> None:
    # Closing stops a worker (tens of milliseconds): not under the pool's lock.
    threading.Thread(target=_close, args=(session,), name="rlm-serve-close", daemon=True).start()


def _close(session: Any) -> None:
    if session is None:
        return
    try:
        session.close()
    except Exception:  # noqa: BLE001 - a session that fails to close must not take the server with it
        pass
