"""What every example's ``main`` shares: run the manager beside demo tasks for a while, then stop all."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Mapping
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
    if duration is not None:
        timer = threading.Timer(duration, mgr.stop)
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
