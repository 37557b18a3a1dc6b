"""The debug pages (``ManagerOptions.debug_bind_address``): what every thread and every
running reconcile is doing now, as text, for an operator that seems stuck.

Go's controller-runtime serves pprof for this (``PprofBindAddress``: its goroutine dump);
``py-spy dump`` needs ptrace, which a pod rarely may. The pages read the threads' frames
as they are (``sys._current_frames``): nothing is paused, and nothing is kept between
requests. They show code and request names (namespace/name), never objects or locals.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import traceback
from collections.abc import Iterable
from typing import TYPE_CHECKING

from mcruntime._local import display_name

if TYPE_CHECKING:
    from mcruntime.controller import Controller

__all__ = ["PAGES", "page"]

#: the pages, by path, and what each shows
PAGES = {
    "/debug/reconciles": "the reconciles running now, the longest first, and where each is",
    "/debug/threads": "every thread of the process and its stack",
}


def page(path: str, controllers: Iterable[Controller]) -> str | None:
    """The page at ``path`` (``/debug`` lists them), or None for a path that is none."""
    if path == "/debug":
        return "".join(f"{p}  {what}\n" for p, what in PAGES.items())
    if path == "/debug/threads":
        return threads_page()
    if path == "/debug/reconciles":
        return reconciles_page(controllers)
    return None


def _indent(lines: Iterable[str], prefix: str) -> str:
    return "".join(
        prefix + line + "\n" for block in lines for line in block.rstrip("\n").split("\n")
    )


def reconciles_page(controllers: Iterable[Controller]) -> str:
    """Per controller: the requests waiting for a cluster not answering, and its running
    reconciles (cluster, request, seconds, worker, stack)."""
    out = [f"pid {os.getpid()}, {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\n"]
    for c in controllers:
        running = c.in_flight_reconciles()
        out.append(
            f"\ncontroller {c.name}: {len(running)} running, {len(c.queue)} queued, "
            f"{c.max_concurrent_reconciles} workers\n"
        )
        for cluster, waiting in sorted(c.waiting_requests().items()):
            shown = ", ".join(
                sorted(f"{display_name(r.cluster_name)}/{r.key}" for r in waiting)[:5]
            )
            more = f" and {len(waiting) - 5} more" if len(waiting) > 5 else ""
            out.append(
                f"  waiting for cluster {display_name(cluster)} to answer: {len(waiting)} "
                f"(retried at its first answer): {shown}{more}\n"
            )
        for r in running:
            req = r.request
            out.append(
                f"  cluster={display_name(req.cluster_name)} request={req.key} "
                f"running {r.seconds:.1f}s on {r.thread}\n"
            )
            out.append(_indent(r.stack, "  "))
    return "".join(out)


def threads_page() -> str:
    """Every thread, by name, with its stack (innermost call last)."""
    frames = sys._current_frames()
    threads = sorted(threading.enumerate(), key=lambda t: t.name)
    out = [f"pid {os.getpid()}, {len(threads)} threads\n"]
    for t in threads:
        frame = frames.get(t.ident) if t.ident is not None else None
        kind = "daemon" if t.daemon else "thread"
        out.append(f"\n{t.name} ({kind} {t.ident})\n")
        if frame is not None:
            out.append(_indent(traceback.format_stack(frame), ""))
    return "".join(out)
