"""A manager whose local cluster hangs (accepts connections, never answers) stops at once."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import mcruntime
from mcruntime._threads import mcruntime_threads
from mcruntime.envtest import wait_for
from tests._silent import SilentServer, silent_server

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def hung() -> Iterator[SilentServer]:
    with silent_server() as server:
        yield server


def test_stop_while_start_waits_for_a_hung_local_cluster_ends_both_at_once(
    hung: SilentServer,
) -> None:
    before = set(mcruntime_threads())
    mgr = mcruntime.Manager(
        hung.kubeconfig(), options=mcruntime.ManagerOptions(engage_sync_timeout=20.0)
    )
    mcruntime.controller_managed_by(mgr).for_("v1/ConfigMap").complete(lambda req: None)
    starting = threading.Thread(target=mgr.start, name="test/start", daemon=True)
    starting.start()
    wait_for(lambda: hung.accepted, what="the local cluster's first request")
    began = time.monotonic()
    mgr.stop()
    took = time.monotonic() - began
    starting.join(2)
    assert not starting.is_alive(), "start() went on waiting for the local cluster after stop()"
    assert took < 2.0, f"stop() took {took:.1f}s: it waited for the local cluster's first list"
    assert sorted(t.name for t in set(mcruntime_threads()) - before if t.is_alive()) == []


def test_a_local_cluster_not_synced_by_engage_sync_timeout_is_a_warning_that_says_why(
    hung: SilentServer, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # its engagement's attempt ends at the same deadline, and may not have said why yet
    # when start() stops waiting (here it surely has not): the warning said "(None)"
    from mcruntime.manager._manager import Manager

    real_sync = Manager._sync

    def late_sync(self: Manager, *args: Any) -> Any:
        time.sleep(0.6)
        return real_sync(self, *args)

    monkeypatch.setattr(Manager, "_sync", late_sync)
    mgr = mcruntime.Manager(
        hung.kubeconfig(), options=mcruntime.ManagerOptions(engage_sync_timeout=0.3)
    )
    mcruntime.controller_managed_by(mgr).for_("v1/ConfigMap").complete(lambda req: None)
    with caplog.at_level(logging.WARNING, logger="mcruntime.manager"):
        mgr.start()
        try:
            [warning] = [
                r.getMessage()
                for r in caplog.records
                if r.getMessage().startswith("local cluster caches not synced yet")
            ]
        finally:
            mgr.stop()
    assert "(None)" not in warning, warning
    assert warning.endswith("; continuing"), warning
