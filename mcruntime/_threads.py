"""Thread naming: every thread mcruntime starts is named ``mcruntime/<component>/<cluster>``, or
``mcruntime/<component>`` when it works for no one cluster."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from typing import Any

from mcruntime._local import display_name

PREFIX = "mcruntime/"


def thread_name(component: str, cluster: str | None = None, *extra: str) -> str:
    """Name for a thread of ``component`` working for ``cluster`` (``""``: the local cluster,
    ``mcruntime/informer/local/ConfigMap``), or for none (``None``: the manager's own, as
    ``mcruntime/manager/stop``, whose name says no cluster)."""
    parts = [component, None if cluster is None else display_name(cluster), *extra]
    return PREFIX + "/".join(p for p in parts if p)


def start_thread(
    target: Callable[..., Any], name: str, *args: Any, daemon: bool = True, **kwargs: Any
) -> threading.Thread:
    """Start a named daemon thread; the caller owns it and must make it stop."""
    t = threading.Thread(target=target, name=name, args=args, kwargs=kwargs, daemon=daemon)
    t.start()
    return t


def interrupted(exc: BaseException) -> bool:
    """Whether ``exc`` is a Ctrl-C: a ``KeyboardInterrupt`` on the main thread, the only one
    Python delivers signals to. Where a user's callback's failure is contained (logged, the
    event dropped), any other `BaseException` is one; this one is the user's and goes on."""
    return (
        isinstance(exc, KeyboardInterrupt) and threading.current_thread() is threading.main_thread()
    )


def mcruntime_threads() -> list[threading.Thread]:
    """Live threads started by mcruntime (by name); used by leak checks."""
    return [t for t in threading.enumerate() if t.name.startswith(PREFIX)]


def where(thread: threading.Thread, depth: int = 8) -> str:
    """Where ``thread`` is now: its innermost ``depth`` frames, ``file:line function``,
    innermost first; "" when it is not running.

    Said beside "did not stop in time", so a thread stuck on a call nobody cut names the
    call. Code locations only: no argument or variable, so no secret, reaches the log.
    """
    frame = sys._current_frames().get(thread.ident) if thread.ident is not None else None
    found: list[str] = []
    while frame is not None and len(found) < depth:
        code = frame.f_code
        found.append(f"{os.path.basename(code.co_filename)}:{frame.f_lineno} {code.co_name}")
        frame = frame.f_back
    return " < ".join(found)


def described(threads: list[threading.Thread]) -> str:
    """``threads`` by name, each with [`where`][] it is: for "still running" warnings."""
    return "; ".join(f"{t.name} (at {where(t) or '?'})" for t in threads)
