"""Leases under a hung API server path: the old holder stops before anyone else can start.

Replica ``a`` reaches the Lease's API server through a `Proxy` that freezes
(connections open, nothing answered): the classic way to get two leaders.
The watchdog stops ``a``'s leader-only work at its renew deadline, while its
renewal is still blocked; ``b`` takes over only after the lease duration. Each
reconcile is timestamped: the last one of ``a`` ends before the first one of
``b`` starts. Run with client-go's default timings and with short ones.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import mcruntime
from mcruntime.envtest import APIServer, Proxy, wait_for
from mcruntime.manager import Manager, ManagerOptions
from mcruntime.reconcile import Request, Result

pytestmark = pytest.mark.timeout(90)


class Timeline:
    """Start and end times of every reconcile, per replica."""

    def __init__(self) -> None:
        self.spans: dict[str, list[tuple[float, float]]] = {}
        self._lock = threading.Lock()

    def reconciler(self, replica: str) -> Callable[[Request], Result]:
        def reconcile(req: Request) -> Result:
            began = time.monotonic()
            time.sleep(0.01)  # some work
            with self._lock:
                self.spans.setdefault(replica, []).append((began, time.monotonic()))
            return Result(requeue_after=0.05)  # reconcile continuously while leading

        return reconcile

    def first_start(self, replica: str) -> float | None:
        with self._lock:
            spans = self.spans.get(replica)
            return min(s for s, _ in spans) if spans else None

    def last_end(self, replica: str) -> float:
        with self._lock:
            return max(e for _, e in self.spans[replica])


_wait = wait_for


@pytest.fixture
def proxy(server: APIServer) -> Iterator[Proxy]:
    with Proxy(server) as p:
        yield p


@pytest.mark.parametrize(
    ("lease", "renew", "retry"),
    [pytest.param(3.0, 2.0, 0.5, id="short"), pytest.param(15.0, 10.0, 2.0, id="client-go")],
)
def test_the_old_leader_stops_before_the_new_one_starts_when_its_path_freezes(
    server: APIServer, proxy: Proxy, lease: float, renew: float, retry: float
) -> None:
    timeline = Timeline()

    def replica(name: str, kubeconfig: dict[str, Any]) -> Manager:
        opts = ManagerOptions(
            leader_election=True,
            leader_election_id="frozen-path",
            leader_election_namespace="default",
            lease_duration=lease,
            renew_deadline=renew,
            retry_period=retry,
            graceful_shutdown_timeout=5,
        )
        mgr = Manager(kubeconfig, options=opts)
        mcruntime.controller_managed_by(mgr).for_("v1/ConfigMap").complete(
            timeline.reconciler(name)
        )
        return mgr

    a = replica("a", proxy.kubeconfig())
    b = replica("b", server.kubeconfig())
    try:
        a.start()
        _wait(lambda: timeline.first_start("a"), 10, "a leading")
        b.start()
        frozen_at = time.monotonic()
        proxy.freeze()
        _wait(lambda: timeline.first_start("b"), lease * 3, "b taking over")
        b_first = timeline.first_start("b")
        a_last = timeline.last_end("a")
        assert b_first is not None
        overlap = a_last - b_first
        assert overlap < 0, f"a still reconciled {overlap:.3f}s after b started"
        # a stopped at its renew deadline, counted from its last renewal before the freeze
        assert a_last - frozen_at < renew + 0.5
        assert a.leader_lost
    finally:
        proxy.thaw()
        a.stop(5)
        b.stop(5)
