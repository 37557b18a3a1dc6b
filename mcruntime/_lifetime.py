"""Lifetimes: stop events that run callbacks when they end (below every layer that needs them)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from mcruntime._threads import start_thread, thread_name

log = logging.getLogger("mcruntime.multicluster")

_POLL = 0.2


class Lifetime(threading.Event):
    """A stop event that also runs callbacks, once, when it is set.

    Providers should pass a ``Lifetime`` to ``engage``: ending an engagement
    then needs no watcher thread. A plain `threading.Event` works too.

    Work that still needs the cluster after its lifetime ended (the removal of the
    webhook configurations installed in it) *holds* the lifetime until it is done, so a
    provider about to delete the cluster itself can wait for it (`wait_released`).
    """

    def __init__(self) -> None:
        super().__init__()
        self._callbacks: list[Callable[[], None]] = []
        self._cb_lock = threading.Lock()
        #: what still needs the cluster, by hold (a hold is an object of its own: two holds
        #: may say the same)
        self._holds: dict[object, str] = {}
        self._released = threading.Condition(threading.Lock())

    def set(self) -> None:
        with self._cb_lock:
            if self.is_set():
                return
            super().set()
            callbacks, self._callbacks = self._callbacks, []
        for cb in callbacks:
            try:
                cb()
            except Exception:
                log.exception("lifetime callback %r failed", cb)

    def add_callback(self, fn: Callable[[], None]) -> Callable[[], None]:
        """Run ``fn`` when the lifetime ends (now, if it has). Returns a function that cancels it."""
        with self._cb_lock:
            if not self.is_set():
                self._callbacks.append(fn)
                return lambda: self._cancel(fn)
        fn()
        return lambda: None

    def hold(self, what: str) -> Callable[[], None]:
        """Say that ``what`` still needs the cluster once the lifetime ends; returns the
        function that releases the hold (calling it again does nothing)."""
        token = object()
        with self._released:
            self._holds[token] = what

        def release() -> None:
            with self._released:
                if self._holds.pop(token, None) is not None and not self._holds:
                    self._released.notify_all()

        return release

    def wait_released(self, timeout: float) -> list[str]:
        """Wait up to ``timeout`` seconds until every hold is released; returns what still
        holds the lifetime then (empty when nothing does)."""
        with self._released:
            self._released.wait_for(lambda: not self._holds, max(0.0, timeout))
            return sorted(self._holds.values())

    def _cancel(self, fn: Callable[[], None]) -> None:
        with self._cb_lock:
            if fn in self._callbacks:
                self._callbacks.remove(fn)


def on_end(
    event: threading.Event, fn: Callable[[], None], *, name: str = "", join: bool = False
) -> Callable[[], None]:
    """Run ``fn`` once ``event`` is set; returns a cancel function.

    With a [`Lifetime`][mcruntime.multicluster.Lifetime] (or any event with an
    ``add_callback`` like it) this is a callback; a plain Event is watched by a small
    thread (``mcruntime/lifetime/<name>``) that also ends on cancel. With ``join``,
    cancelling waits for that thread to end (unless called from it).
    """
    add_callback = getattr(event, "add_callback", None)
    if callable(add_callback):
        cancel: Callable[[], None] = add_callback(fn)
        return cancel
    cancelled = threading.Event()

    def watch() -> None:
        while not cancelled.is_set():
            if event.wait(_POLL):
                if not cancelled.is_set():
                    fn()
                return

    watcher = start_thread(watch, thread_name("lifetime", name))
    if not join:
        return cancelled.set

    def cancel_and_join() -> None:
        cancelled.set()
        if watcher is not threading.current_thread():
            watcher.join()

    return cancel_and_join
