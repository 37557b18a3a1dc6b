"""Thread naming: every thread mcruntime starts is named ``mcruntime/<component>/<cluster>``."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from mcruntime._local import display_name

PREFIX = "mcruntime/"


def thread_name(component: str, cluster: str = "", *extra: str) -> str:
    """Name for a thread of ``component`` working for ``cluster`` ("" = the local cluster)."""
    parts = [component, display_name(cluster), *extra]
    return PREFIX + "/".join(p for p in parts if p)


def start_thread(
    target: Callable[..., Any], name: str, *args: Any, daemon: bool = True, **kwargs: Any
) -> threading.Thread:
    """Start a named daemon thread; the caller owns it and must make it stop."""
    t = threading.Thread(target=target, name=name, args=args, kwargs=kwargs, daemon=daemon)
    t.start()
    return t


def mcruntime_threads() -> list[threading.Thread]:
    """Live threads started by mcruntime (by name); used by leak checks."""
    return [t for t in threading.enumerate() if t.name.startswith(PREFIX)]
