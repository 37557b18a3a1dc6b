"""What every example's ``main`` shares: run the manager beside demo tasks for a while, then stop all."""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from mcruntime.manager import Manager

Task = Callable[[threading.Event], None]


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
    ``cleanup`` runs before this returns 0.
    """
    stop = threading.Event()
    threads = [
        threading.Thread(target=fn, args=(stop,), name=f"mcruntime/example/{name}", daemon=True)
        for name, fn in (tasks or {}).items()
    ]
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
    try:
        try:
            mgr.start()  # waits for the provider's initial clusters
        except KeyboardInterrupt:  # Ctrl-C before it is up: stop as cleanly as after
            return 0
        for t in threads:
            t.start()
        if timer is not None:
            timer.start()
        mgr.run()
    finally:
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
        provider = mgr.provider
        provider.start_fleet()  # type: ignore[attr-defined]
        played = duration or default_duration
        tasks["scenario"] = lambda stop: scenario(mgr, provider, played, stop)
    return run_demo(mgr, duration=duration, tasks=tasks)
