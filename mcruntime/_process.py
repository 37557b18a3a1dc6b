"""Child processes killed whole: an exec credential plugin, a provider's command line tool."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess

__all__ = ["kill_group", "kill_process_group"]

#: process groups exist here (POSIX)
_GROUPS = hasattr(os, "killpg")


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL ``proc`` and what it started (its process group), without waiting."""
    with contextlib.suppress(OSError):
        if _GROUPS:
            os.killpg(proc.pid, signal.SIGKILL)
        else:  # pragma: no cover - no process groups on this OS
            proc.kill()


def kill_process_group(proc: subprocess.Popen[bytes], reap: float = 1.0) -> None:
    """Kill ``proc`` and what it started, and reap it, within about twice ``reap`` seconds.

    ``proc`` must have been started with ``start_new_session=True`` (a group of its
    own). Killing the process alone would leave its children (``docker`` under
    ``kind``) holding its stdout, and reading that to its end would wait for them.
    """
    kill_group(proc)
    try:
        proc.communicate(timeout=reap)
    except subprocess.TimeoutExpired:
        # a process that left the group still holds the pipes: stop reading them
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=reap)
