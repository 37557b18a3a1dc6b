"""A program built on ``mcruntime.cli`` run as a container runs it: its own process, stopped
by SIGTERM."""

from __future__ import annotations

import signal

import pytest

from tests._signal import signal_after

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
