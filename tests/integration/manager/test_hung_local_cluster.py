"""A manager whose local cluster hangs (accepts connections, never answers) stops at once."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

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
