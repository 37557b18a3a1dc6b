"""Helpers for the example tests: run an example as ``python -m`` and follow its output, poll, leak checks."""

from __future__ import annotations

import functools
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any

from kubernetes import client, config

from mcruntime._threads import mcruntime_threads
from mcruntime.envtest import APIServer, wait_for
from mcruntime.manager import Manager

wait_until = functools.partial(wait_for, interval=0.05)


def leaked_threads() -> list[str]:
    """mcruntime threads still alive, other than the envtest servers' shared loop."""
    return [t.name for t in mcruntime_threads() if not t.name.startswith("mcruntime/envtest/")]


def core_api(server: APIServer) -> client.CoreV1Api:
    """The real ``kubernetes`` client for ``server`` (the test's own view of a cluster)."""
    return client.CoreV1Api(config.new_client_from_config_dict(server.kubeconfig()))


def reconcile_errors(mgr: Manager, controller: str) -> float:
    """The failed reconciles ``mgr`` counted for ``controller`` (all clusters)."""
    return sum(
        s.value
        for metric in mgr.metrics.reconcile_errors.collect()
        for s in metric.samples
        if s.name.endswith("_total") and s.labels.get("controller") == controller
    )


def exists(read: Callable[[], Any]) -> bool:
    """Whether ``read()`` finds its object (False on 404)."""
    try:
        read()
    except client.ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True


class ExampleProcess:
    """``python -m mcruntime.examples.<module> args`` with its output (stdout and stderr) followed line by line."""

    def __init__(self, module: str, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", f"mcruntime.examples.{module}", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self.lines: list[str] = []
        self._eof = False
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, name="test/example-output", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._cond:
                self.lines.append(line.rstrip("\n"))
                self._cond.notify_all()
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    @property
    def output(self) -> str:
        with self._cond:
            return "\n".join(self.lines)

    def wait_for(self, pattern: str, timeout: float = 15.0) -> str:
        """The first output line matching the regex ``pattern``; fails after ``timeout`` or at exit."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for line in self.lines:
                    if rx.search(line):
                        return line
                left = deadline - time.monotonic()
                if self._eof or left <= 0:
                    tail = "\n".join(self.lines[-40:])
                    why = "exited" if self._eof else f"not within {timeout}s"
                    raise AssertionError(
                        f"no line matching {pattern!r} ({why}); output tail:\n{tail}"
                    )
                self._cond.wait(left)

    def interrupt(self, timeout: float = 15.0) -> int:
        """Ctrl-C: send SIGINT and return the exit code."""
        self.proc.send_signal(signal.SIGINT)
        return self.proc.wait(timeout)

    def wait(self, timeout: float = 30.0) -> int:
        return self.proc.wait(timeout)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._reader.join(5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def __enter__(self) -> ExampleProcess:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
