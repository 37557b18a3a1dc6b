"""The fence watchdog of ``Sharded`` stops a cluster at its deadline without running its teardown.

One watchdog thread serves the deadlines of every fence; a cluster whose teardown waits
(a hung cluster whose webhook configuration cannot be removed, informers being joined)
must not hold the deadlines of the others.
"""

from __future__ import annotations

import threading
import time

import pytest

from mcruntime._threads import mcruntime_threads
from mcruntime.envtest import wait_for
from mcruntime.manager.coordinator import Sharded
from mcruntime.manager.coordinator._sharded import _Run
from mcruntime.multicluster import Lifetime

pytestmark = pytest.mark.timeout(30)


def test_an_expired_fence_stops_its_cluster_without_waiting_for_the_teardown() -> None:
    coordinator = Sharded(peer_id="a", lease_duration=2.0, renew_period=0.5, renew_deadline=1.3)
    release, torn_down = threading.Event(), threading.Event()
    teardown_threads: list[str] = []

    def slow_teardown() -> None:  # what a hung cluster's engagement does when it ends
        teardown_threads.append(threading.current_thread().name)
        release.wait(10)
        torn_down.set()

    run = _Run(Lifetime(), 0)
    run.lifetime.add_callback(slow_teardown)
    began = time.monotonic()
    coordinator._expire("hung", run)  # the watchdog's callback
    took = time.monotonic() - began
    try:
        assert took < 0.5, f"the watchdog waited {took:.1f}s for one cluster's teardown"
        assert run.expired
        run.lifetime.wait(2)
        assert run.lifetime.is_set()
        assert "hung" not in coordinator.owned()
    finally:
        release.set()
    assert torn_down.wait(5)
    assert teardown_threads == ["mcruntime/coordinator/hung/expire"]
    wait_for(
        lambda: not [t for t in mcruntime_threads() if t.name.endswith("/expire")],
        timeout=5,
        what="the teardown thread ended",
    )


def test_a_teardown_the_watchdog_started_is_joined_when_the_coordinator_stops() -> None:
    coordinator = Sharded(peer_id="a", lease_duration=2.0, renew_period=0.5, renew_deadline=1.3)
    torn_down = threading.Event()

    def slow_teardown() -> None:
        time.sleep(0.3)  # the teardown's own work (joining a hung cluster's informers)
        torn_down.set()

    run = _Run(Lifetime(), 0)
    run.lifetime.add_callback(slow_teardown)
    coordinator._expire("hung", run)
    coordinator._join_expiring(5)  # what the coordinator's stop does last
    assert torn_down.is_set(), "the coordinator stopped before the cluster's teardown ended"
    assert not [t for t in mcruntime_threads() if t.name.endswith("/expire")]
