"""A program built on ``mcruntime.cli`` run as a container runs it: its own process, stdout a
pipe, ``PYTHONUNBUFFERED`` unset, stopped by SIGTERM."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys

import pytest

from tests._signal import ROOT, signal_after

pytestmark = pytest.mark.timeout(30)

_MAIN = """
import argparse
import sys

from mcruntime import cli

parser = argparse.ArgumentParser(prog="op")
cli.add_arguments(parser)
cli.add_manager_arguments(parser)
args = parser.parse_args(["--provider", "clusters", "--graceful-shutdown-timeout", "5s"])
cli.setup_logging(args.log_level)
mgr = cli.manager_from_args(args, parser=parser)
mgr.add(lambda stop: print("started", flush=True))
sys.exit(cli.run(mgr))
"""


def test_sigterm_ends_the_program_with_status_0() -> None:
    ended = signal_after(_MAIN, "started", signal.SIGTERM)
    assert ended.returncode == 0, ended.err[-2000:]
    assert "signal SIGTERM received, stopping" in ended.err
    assert "manager stopped" in ended.err and "Traceback" not in ended.err


_HANGS = _MAIN.replace("5s", "0.5s").replace(
    'mgr.add(lambda stop: print("started", flush=True))',
    """import threading


def sweeper(stop):
    print("started", flush=True)
    threading.Event().wait(60)  # does not look at its stop event


mgr.add(sweeper)""",
)


def test_sigterm_with_work_running_past_the_grace_period_exits_1_in_one_line() -> None:
    """controller-runtime's ``Start`` returns ``failed waiting for all runnables to end within
    grace period of ...`` and kubebuilder's ``main`` exits 1. Before, this program exited 0
    after abandoning its runnable: the orchestrator saw a clean stop."""
    ended = signal_after(_HANGS, "started", signal.SIGTERM)
    assert ended.returncode == 1, ended.err[-2000:]
    failed = [line for line in ended.err.splitlines() if "manager failed" in line]
    assert len(failed) == 1, ended.err[-2000:]
    assert failed[0].endswith(
        "manager failed: failed waiting for everything to end within the grace period of 0.5s "
        "(graceful_shutdown_timeout), still running: thread mcruntime/runnable/sweeper; "
        "exiting with status 1"
    ), failed
    assert "Traceback" not in ended.err
    assert ended.took < 10, "the process does not wait for the thread it abandoned"


_PRINTS = """
import sys

from mcruntime import cli

cli.setup_logging("INFO")
print("reconciled default/settings")  # as a reconciler prints, without flush
sys.stdin.readline()  # runs on until the test has read the line
"""


def test_a_print_reaches_the_log_while_the_program_runs() -> None:
    """A container's stdout is a pipe: Python filled it in blocks, so ``kubectl logs`` showed
    a reconciler's ``print()`` only once the program exited (and never if it was killed)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    with subprocess.Popen(
        [sys.executable, "-c", _PRINTS],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=ROOT,
        env=env,
    ) as proc:
        try:
            assert proc.stdout is not None and proc.stdin is not None
            with selectors.DefaultSelector() as sel:
                sel.register(proc.stdout, selectors.EVENT_READ)
                ready = sel.select(timeout=15)
            assert ready, "nothing on stdout within 15s while the program runs"
            assert proc.stdout.readline() == b"reconciled default/settings\n"
            proc.stdin.close()
            assert proc.wait(10) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
