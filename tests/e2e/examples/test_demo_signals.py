"""An example stopped by Ctrl-C in the moments around ``mgr.start()`` (the examples' shared
``run_demo``): it stops cleanly, exit status 0, never hangs.

The example tests interrupt an example as soon as its output says what they wait for, which
may come while its manager still starts or just after: a SIGINT then met Python's own handler
(``KeyboardInterrupt`` wherever the main thread was), not ``Manager.run``'s. Each case puts
the signal at one such moment, deterministically, by wrapping a manager method in the child.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.timeout(90)

_CHILD = """
import io, signal, sys
from mcruntime.manager import _manager
from mcruntime.examples import namespaces

where = sys.argv[1]
run, start = _manager.Manager.run, _manager.Manager.start

class _Closing(io.RawIOBase):
    sent = False

    def close(self):
        # the signal is handled here, in the finalizer of an io object freed on the main
        # thread: its KeyboardInterrupt is dropped silently (io's finalizer clears errors)
        if not _Closing.sent:  # (the finalizer may call close() again)
            _Closing.sent = True
            signal.raise_signal(signal.SIGINT)  # (to this thread; handled before it returns)
        super().close()

def late_start(self):
    mgr = start(self)
    if where == "lost":
        _Closing()  # (freed at once)
    return mgr

def early_run(self):
    if where == "gap":  # after start() returned, before run() has its handlers
        signal.raise_signal(signal.SIGINT)  # (to this thread)
    return run(self)

_manager.Manager.start = late_start
_manager.Manager.run = early_run
sys.exit(namespaces.main(["--duration", "60"]))
"""


def _stopped_cleanly(child: str, *args: str, timeout: float) -> str:
    """Run ``child`` in a Python of its own; its output, once it exited with status 0."""
    proc = subprocess.run(
        [sys.executable, "-c", child, *args], capture_output=True, text=True, timeout=timeout
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    return out


@pytest.mark.parametrize("where", ["gap", "lost"])
def test_a_ctrl_c_around_the_start_stops_the_example_cleanly(where: str) -> None:
    # before: "gap" ended with a KeyboardInterrupt traceback, exit status -2 (130), and "lost"
    # waited for a signal that had come, until killed
    out = _stopped_cleanly(_CHILD, where, timeout=30)
    assert "manager stopped" in out
    # (not "Traceback": the embedded API server may log a client's reset connection as it ends)
    assert "KeyboardInterrupt" not in out, out


_MID_SCENARIO = """
import os, signal, sys, time
from mcruntime.examples import webhooks

play = webhooks.scenario

def interrupted(mgr, names, stop):
    # Ctrl-C while the scenario is about to write: the manager stops, and its clusters go
    os.kill(os.getpid(), signal.SIGINT)
    deadline = time.monotonic() + 20
    while "cluster-0" in mgr.engaged_clusters() and not stop.is_set():
        if time.monotonic() > deadline:
            sys.exit("the manager did not stop")
        time.sleep(0.01)
    play(mgr, names, stop)

webhooks.scenario = interrupted
sys.exit(webhooks.main(["--duration", "60"]))
"""


def test_a_ctrl_c_while_the_scenario_writes_stops_its_task_first() -> None:
    # before: the manager stopped on the signal while the scenario's task went on, and its
    # next write met a cluster that had left (a traceback of the task's thread)
    out = _stopped_cleanly(_MID_SCENARIO, timeout=60)
    assert "Exception in thread" not in out, out
    assert "widget" not in out, out  # nothing written once the run ends


_CONFIGSETS = """
import signal, sys
from mcruntime.examples import configsets

def interrupted(*args, **kwargs):
    signal.raise_signal(signal.SIGINT)  # Ctrl-C while it waits for the roll-up

configsets.print = interrupted  # (its roll-up lines)
sys.exit(configsets.main(["--duration", "30"]))
"""


def test_a_ctrl_c_stops_the_configsets_example_cleanly() -> None:
    # configsets plays its scenario without run_demo; before, Ctrl-C ended it with a
    # KeyboardInterrupt traceback, exit status -2 (130 in a shell)
    out = _stopped_cleanly(_CONFIGSETS, timeout=60)
    assert "KeyboardInterrupt" not in out, out
