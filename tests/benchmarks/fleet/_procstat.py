"""Memory and thread figures of a process, read from ``/proc`` (Linux) so any process can be measured,
and the CPUs its threads may run on."""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os

__all__ = ["MiB", "ProcStat", "malloc_trim", "proc_stat", "pss_bytes", "pin"]

MiB = 1024 * 1024


class ProcStat(dict[str, int]):
    """``rss``, ``peak_rss`` (VmHWM) in bytes and ``threads`` of one process."""


def proc_stat(pid: int | None = None) -> ProcStat:
    """RSS, peak RSS and thread count of ``pid`` (default: this process); zeros once it is gone."""
    out = ProcStat(rss=0, peak_rss=0, threads=0)
    try:
        with open(f"/proc/{pid or os.getpid()}/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key == "VmRSS":
                    out["rss"] = int(value.split()[0]) * 1024
                elif key == "VmHWM":
                    out["peak_rss"] = int(value.split()[0]) * 1024
                elif key == "Threads":
                    out["threads"] = int(value)
    except (FileNotFoundError, ProcessLookupError):
        pass
    return out


def pss_bytes(pid: int) -> int:
    """Proportional set size of ``pid``: shared pages split among the processes that map them."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        pass
    return 0


def pin(pid: int, cpus: set[int]) -> None:
    """Let every thread of ``pid`` run on ``cpus`` only (threads it starts later inherit that)."""
    with contextlib.suppress(FileNotFoundError):
        for tid in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError):  # a thread that just ended
                os.sched_setaffinity(int(tid), cpus)


def malloc_trim() -> bool:
    """Hand the C allocator's free pages back to the OS (glibc's ``malloc_trim(0)``); False
    where there is no such call. RSS measured after it tells memory still in use from
    memory freed and kept by the allocator for reuse."""
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    trim = getattr(ctypes.CDLL(name), "malloc_trim", None)
    if trim is None:
        return False
    trim(0)
    return True
