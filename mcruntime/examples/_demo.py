"""What every example's ``main`` shares: run the manager beside demo tasks for a while, then stop all."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from mcruntime.manager import Manager

Task = Callable[[threading.Event], None]

log = logging.getLogger(__name__)


def say(line: str, out: Any = None) -> None:
    """One whole line per write, so lines of concurrent workers never interleave."""
    stream = out or sys.stdout
    stream.write(line + "\n")
    stream.flush()


def run_demo(
    mgr: Manager,
    *,
    duration: float | None,
    tasks: Mapping[str, Task] | None = None,
    cleanup: Callable[[], None] | None = None,
) -> int:
    """Run ``mgr`` until Ctrl-C, or ``duration`` seconds, with each task in a thread of its own.

    A task gets a stop event, set when the run ends; every thread is joined and
    ``cleanup`` runs before this returns 0. A Ctrl-C (or SIGTERM) at any moment stops it
    cleanly: while the manager starts, and before ``mgr.run()`` takes the signals over.
    """
    stop = threading.Event()
    threads = [
        threading.Thread(
            target=_task, args=(name, fn, stop), name=f"mcruntime/example/{name}", daemon=True
        )
        for name, fn in (tasks or {}).items()
    ]
    # a Ctrl-C stops the manager from within run(), its clusters leaving while the tasks still
    # write: they are told to stop as soon as the manager starts to stop
    mgr.add(lambda stopping: _stop_with(stopping, stop))
    timer: threading.Timer | None = None

    def end() -> None:
        # the tasks end first: a write of theirs must not meet a manager that stops
        stop.set()
        for t in threads:
            if t.ident is not None:
                t.join(5)
        mgr.stop()

    if duration is not None:
        timer = threading.Timer(duration, end)
        timer.name, timer.daemon = "mcruntime/example/timer", True
    early = _EarlySignals(stop)
    try:
        try:
            mgr.start()  # waits for the provider's initial clusters
            early.started()
        except KeyboardInterrupt:  # Ctrl-C before it is up: stop as cleanly as after
            return 0
        if early.requested:  # (while it started: its KeyboardInterrupt may have been lost)
            return 0
        for t in threads:
            t.start()
        if timer is not None:
            timer.start()
        mgr.run()
    finally:
        early.close()
        stop.set()
        if timer is not None:
            timer.cancel()
        for t in [*threads, *([timer] if timer else [])]:
            if t.ident is not None:
                t.join(5)
        mgr.stop()
        if cleanup is not None:
            cleanup()
    return 0


def _task(name: str, fn: Task, stop: threading.Event) -> None:
    """Run a task; an error it meets once the run ends (a write to a cluster that left) is
    not its failure."""
    try:
        fn(stop)
    except Exception as exc:
        if not stop.is_set():
            raise
        log.debug("task %s ended by the stop: %s: %s", name, type(exc).__name__, exc)


def _stop_with(stopping: threading.Event, stop: threading.Event) -> None:
    """The manager's runnable: set the tasks' ``stop`` when the manager starts to stop."""
    stopping.wait()
    stop.set()


class _EarlySignals:
    """SIGINT and SIGTERM until `Manager.run` takes them over (main thread only).

    Python's own handler raises ``KeyboardInterrupt`` wherever the main thread happens to
    be when it handles the signal (in a threaded program, possibly well after it came):
    between ``mgr.start()`` returning and ``mgr.run()`` installing its handlers, that ended
    the process with a traceback (exit status -2); in a finalizer (an ``io`` object closed
    as it is freed), it is dropped silently, and ``run()`` then waited for a signal that had
    come already. Here a signal is recorded; while the manager starts it raises
    ``KeyboardInterrupt`` as well (cutting the start short, as before); after, it is sent
    again once ``run()`` has its handlers, which stop the manager.
    """

    _SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, stop: threading.Event) -> None:
        self.requested: list[int] = []
        self._starting = True
        self._stop = stop  # set as the run ends: nothing is sent after
        self._lock = threading.Lock()
        self._previous: dict[signal.Signals, Any] = {}
        self._resending: list[threading.Thread] = []
        if threading.current_thread() is threading.main_thread():
            for sig in self._SIGNALS:
                self._previous[sig] = signal.signal(sig, self._on_signal)

    def started(self) -> None:
        """The manager started: a signal from now on waits for ``run()``'s handlers."""
        self._starting = False

    def _on_signal(self, signum: int, _frame: object) -> None:
        self.requested.append(signum)
        if self._starting:
            raise KeyboardInterrupt
        t = threading.Thread(
            target=self._resend, args=(signum,), name="mcruntime/example/signal", daemon=True
        )
        self._resending.append(t)
        t.start()

    def _resend(self, signum: int) -> None:
        while not self._stop.wait(0.01):
            with self._lock:
                if self._stop.is_set():
                    return
                if signal.getsignal(signum) != self._on_signal:  # run() has its own now
                    os.kill(os.getpid(), signum)
                    return

    def close(self) -> None:
        """Give the signals back to the handlers they had (a resend pending is dropped)."""
        with self._lock:
            self._stop.set()
            for sig, handler in self._previous.items():
                signal.signal(sig, handler)
            self._previous.clear()
        for t in self._resending:
            t.join(1)


def wait_engaged(
    mgr: Manager, names: Iterable[str], stop: threading.Event, timeout: float = 30
) -> bool:
    """Wait until every cluster of ``names`` is engaged: False after ``timeout`` or at ``stop``."""
    names = list(names)
    deadline = time.monotonic() + timeout
    while not stop.is_set() and time.monotonic() < deadline:
        if all(n in mgr.engaged_clusters() for n in names):
            return True
        stop.wait(0.05)
    return False


def main_on_fleet(
    argv: list[str] | None,
    *,
    prog: str,
    doc: str,
    build: Callable[[Manager], Any],
    scenario: Callable[[Manager, Any, float, threading.Event], None],
    default_duration: float,
) -> int:
    """The ``main`` of an example whose default provider is ``embedded``: the common flags and
    ``--duration``; on the embedded fleet, ``scenario(mgr, provider, duration, stop)`` plays."""
    from mcruntime.cli import add_arguments, manager_from_args, setup_logging
    from mcruntime.errors import MCRuntimeError

    parser = argparse.ArgumentParser(prog=f"python -m {prog}", description=doc.partition("\n")[0])
    add_arguments(parser, default_provider="embedded")
    parser.add_argument(
        "--duration",
        type=float,
        default=None,
        help=f"stop after this many seconds (default: {default_duration:g} on the embedded fleet, "
        "else run until Ctrl-C)",
    )
    args = parser.parse_args(argv)
    setup_logging(args.log_level)
    try:
        mgr = manager_from_args(args)
    except MCRuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    build(mgr)
    embedded = args.provider == "embedded"
    duration = (
        args.duration if args.duration is not None else (default_duration if embedded else None)
    )
    tasks: dict[str, Task] = {}
    if embedded:
        provider: Any = mgr.provider  # --provider embedded: the embedded provider
        provider.start_fleet()
        played = duration or default_duration
        tasks["scenario"] = lambda stop: scenario(mgr, provider, played, stop)
    try:
        return run_demo(mgr, duration=duration, tasks=tasks)
    except MCRuntimeError as exc:  # (a provider that failed: the manager logged it, and stopped)
        print(f"error: {exc}", file=sys.stderr)
        return 1
