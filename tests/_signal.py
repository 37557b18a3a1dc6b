"""A program in a new interpreter, sent a signal once it printed a line."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

__all__ = ["Signalled", "signal_after"]

ROOT = Path(__file__).resolve().parents[1]


class Signalled:
    """How the program ended: exit code, output after the line, stderr, seconds from signal to exit."""

    def __init__(self, returncode: int, out: str, err: str, took: float) -> None:
        self.returncode, self.out, self.err, self.took = returncode, out, err, took


def signal_after(script: str, line: str, signum: int, timeout: float = 15.0) -> Signalled:
    """Run ``script`` (from the repository's root) and send ``signum`` once it printed ``line``,
    while it still runs; the process is killed if it has not ended ``timeout`` seconds later."""
    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == line
        assert proc.poll() is None, f"the program ended after {line!r}, before the signal"
        began = time.monotonic()
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=timeout)
        return Signalled(proc.returncode, out, err, time.monotonic() - began)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
