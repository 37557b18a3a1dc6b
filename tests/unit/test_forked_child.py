"""What a child forked from a process using mcruntime inherits of its module state, and must
not act on: the parent's DNS lookups in flight (their threads are not in the child) and the
exec credential plugins the parent runs (the child's exit must not kill them)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from multiprocessing.connection import Connection
from typing import Any

import pytest

from mcruntime import _credentials, _resolve
from mcruntime.envtest import wait_for
from tests._forked import in_a_child

pytestmark = [
    pytest.mark.timeout(60),
    # forking a process with threads is what these tests are about: Python 3.12+ warns of it
    pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning"),
]

_NAME = "slow-in-the-parent.test"
_ADDRESS = ("127.0.0.1", 6443)


def _child_looks_up(conn: Connection) -> None:
    try:
        found = _resolve.lookup(_NAME, 6443, timeout=3)
        conn.send([info[4] for info in found])
    except _resolve.LookupTimeout as exc:
        conn.send(f"LookupTimeout: {exc}")


def test_a_child_forked_while_a_lookup_is_in_flight_makes_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before, the child joined the parent's lookup of the same name, whose thread it does not
    have: every lookup of that name timed out in the child."""
    parent = os.getpid()
    release = threading.Event()
    asked = threading.Event()
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host != _NAME:
            return real(host, *args, **kwargs)
        if os.getpid() == parent:  # a nameserver that is slow for the parent only
            asked.set()
            release.wait(30)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", _ADDRESS)]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    looking = threading.Thread(
        target=lambda: _resolve.lookup(_NAME, 6443, timeout=30), name="test/parent-lookup"
    )
    looking.start()
    try:
        assert asked.wait(10)
        assert in_a_child(_child_looks_up) == [_ADDRESS]
    finally:
        release.set()
        looking.join(10)


def _child_exits(conn: Connection) -> None:
    _credentials._kill_running()  # what its exit runs (an atexit hook)
    conn.send("exited")


def test_a_forked_childs_exit_leaves_the_parents_credential_plugins_running() -> None:
    """Before, a child that ended through ``sys.exit`` (a pre-fork server's worker) killed the
    plugins its parent was running (an ``aws eks get-token``, a login waiting in a browser):
    the parent's calls waiting for them failed."""
    plugin: subprocess.Popen[bytes] = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True
    )
    with _credentials._running_lock:
        _credentials._running.add(plugin)
    try:
        assert in_a_child(_child_exits) == "exited"
        with pytest.raises(subprocess.TimeoutExpired):
            plugin.wait(0.5)  # (a kill would have ended it by now)
    finally:
        with _credentials._running_lock:
            _credentials._running.discard(plugin)
        plugin.kill()
        plugin.wait(10)
    wait_for(lambda: plugin.poll() is not None, timeout=5)
