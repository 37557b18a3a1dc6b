"""A Manager started before a fork (a pre-fork server that starts it at import, ``--preload``):
in the child, none of its threads exist. ``start()`` there says so and what to do instead, and
``stop()`` returns at once. Before, ``start()`` returned it as running (nothing reconciled, its
cache answered stale data for ever), and ``stop()`` waited for ever on its probe server's
serve loop, a thread of the parent's."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from multiprocessing.connection import Connection

import pytest

import mcruntime
from mcruntime.envtest import APIServer
from mcruntime.manager import ManagerOptions
from tests._forked import in_a_child
from tests.integration.manager._http import get

pytestmark = [
    pytest.mark.timeout(60),
    # forking a process with threads is what this test is about: Python 3.12+ warns of it
    pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning"),
]


def _child_starts_and_stops(conn: Connection, mgr: mcruntime.Manager) -> None:
    try:
        mgr.start()
        said = "started"
    except RuntimeError as exc:
        said = str(exc)
    began = time.monotonic()
    mgr.stop()
    conn.send((said, time.monotonic() - began, mgr.wait(0)))


def test_a_manager_started_before_the_fork_says_so_in_the_child_and_stops_at_once(
    make_envtest_server: Callable[..., APIServer],
) -> None:
    server = make_envtest_server("local", tls=False)
    mgr = mcruntime.Manager(
        server.kubeconfig(),
        options=ManagerOptions(
            health_probe_bind_address="127.0.0.1:0", graceful_shutdown_timeout=5
        ),
    )
    mcruntime.controller_managed_by(mgr).for_("v1/ConfigMap").complete(lambda req: None)
    with mgr:
        said, stop_took, stopped = in_a_child(_child_starts_and_stops, mgr)
        assert said.startswith(f"this Manager was started in process {os.getpid()}, "), said
        assert "make and start a Manager in each process after the fork" in said, said
        assert stop_took < 2.0 and stopped, (stop_took, stopped)
        # the parent's manager goes on: its probe server still answers, ready
        assert get(mgr.health_probe_address, "/readyz")[0] == 200
