"""A program in a new interpreter, sent a signal once it printed a line."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

__all__ = ["Signalled", "signal_after"]

ROOT = Path(__file__).resolve().parents[1]

#: Ctrl-C raises KeyboardInterrupt, as in a program started from a terminal: one started in
#: the background by a shell without job control (``nohup pytest ... &``, some CI runners)
#: inherits SIGINT ignored, and Python then leaves it ignored
_AS_FROM_A_TERMINAL = "import signal; signal.signal(signal.SIGINT, signal.default_int_handler)\n"


class Signalled:
    """How the program ended: exit code, output after the line, stderr, seconds from signal to exit."""

    def __init__(self, returncode: int, out: str, err: str, took: float) -> None:
        self.returncode, self.out, self.err, self.took = returncode, out, err, took


def signal_after(
    script: str, line: str, signum: int, timeout: float = 15.0, *, again_after: str = ""
) -> Signalled:
    """Run ``script`` (from the repository's root) and send ``signum`` once it printed ``line``,
    while it still runs; the process is killed if it has not ended ``timeout`` seconds later.

    With ``again_after``, the signal is sent a second time once a line of stderr contains it
    (``took`` then counts from the second signal; ``err`` holds all of stderr)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _AS_FROM_A_TERMINAL + script],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == line
        assert proc.poll() is None, f"the program ended after {line!r}, before the signal"
        proc.send_signal(signum)
        before = _stderr_until(proc, again_after) if again_after else ""
        began = time.monotonic()
        if again_after:
            proc.send_signal(signum)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            # what it was doing: the stacks a program dumps (faulthandler) before it is killed
            proc.kill()
            out, err = proc.communicate()
            raise AssertionError(
                f"still running {timeout:g}s after the signal; stdout {out!r}; stderr:\n"
                f"{(before + err)[-8000:]}"
            ) from None
        return Signalled(proc.returncode, out, before + err, time.monotonic() - began)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _stderr_until(proc: subprocess.Popen[str], text: str) -> str:
    """stderr of ``proc`` up to and including the first line containing ``text``."""
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if text in line:
            return "".join(seen)
    raise AssertionError(f"the program ended before {text!r} on stderr: {''.join(seen)[-2000:]}")
