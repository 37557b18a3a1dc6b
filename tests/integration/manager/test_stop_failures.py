"""``Manager.stop()`` stops every component even when one's stop raises (a controller whose
event loop a reconcile closed raised "Event loop is closed"), then raises naming each
failure: before, it gave up at the first, leaving the provider, the informers, the health
checks and the servers running in the process."""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

import pytest

import mcruntime
from mcruntime._threads import mcruntime_threads
from mcruntime.cluster import Cluster
from mcruntime.envtest import APIServer, wait_for
from mcruntime.manager import ManagerOptions
from mcruntime.providers.clusters import Provider

pytestmark = pytest.mark.timeout(30)


def _member_manager(
    make_envtest_server: Callable[..., APIServer], name: str, **options: Any
) -> tuple[mcruntime.Manager, Any]:
    """A manager with a probe server, one member cluster and two controllers: ``name``'s
    (returned, for its stop to be replaced) on ConfigMaps and a fine one on Secrets."""
    srv = make_envtest_server("member")
    provider = Provider()
    provider.add("member", Cluster.from_kubeconfig(srv.kubeconfig(), name="member"))
    mgr = mcruntime.Manager(
        provider=provider,
        options=ManagerOptions(health_probe_bind_address="127.0.0.1:0", **options),
    )
    builder = mcruntime.controller_managed_by(mgr).named(name).for_("v1/ConfigMap")
    controller = builder.complete(lambda req: None)
    mcruntime.controller_managed_by(mgr).named("fine").for_("v1/Secret").complete(lambda r: None)
    return mgr, controller


def test_one_failing_stop_does_not_leave_the_rest_running(
    make_envtest_server: Callable[..., APIServer],
) -> None:
    mgr, broken_controller = _member_manager(make_envtest_server, "broken")

    def stop_fails(timeout: float | None = None) -> None:
        raise RuntimeError("Event loop is closed")

    broken_controller.stop = stop_fails  # type: ignore[method-assign]
    mgr.start()
    wait_for(lambda: mgr.engaged_clusters() == ["member"], what="member engaged")
    assert mgr.health_probe_address is not None
    port = mgr.health_probe_address[1]

    try:
        with pytest.raises(RuntimeError) as err:
            mgr.stop()
    finally:
        del broken_controller.stop  # its own stop, for this test's clean-up
        broken_controller.stop(5)

    assert mgr.wait(0)
    left = [
        t.name
        for t in mcruntime_threads()
        if "member" in t.name
        or "/provider/" in t.name
        or "/health/" in t.name
        or "/controller/fine" in t.name
        or "probes" in t.name
    ]
    assert left == []
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))  # the probe server's port is free again
    assert str(err.value) == (
        "manager stopped, but stopping failed for controller broken: RuntimeError: "
        "Event loop is closed"
    )


class _Interrupted(BaseException):
    """What pytest-timeout's ``Failed`` or a KeyboardInterrupt is to stop(): not an Exception."""


def test_a_stop_cut_by_a_base_exception_is_finished_by_the_next_stop(
    make_envtest_server: Callable[..., APIServer],
) -> None:
    # pytest-timeout fired in a controller's join: the steps after it (clusters, provider,
    # health checks, servers) did not run, and a later stop() returned at once, reporting
    # the manager stopped while its informers, probes and provider kept running
    mgr, cut_controller = _member_manager(make_envtest_server, "cut", graceful_shutdown_timeout=5)
    own_stop = cut_controller.stop

    def interrupted_once(timeout: float | None = None) -> None:
        cut_controller.stop = own_stop  # type: ignore[method-assign]
        raise _Interrupted("Timeout (0:00:03)!")

    cut_controller.stop = interrupted_once  # type: ignore[method-assign]
    mgr.start()
    wait_for(lambda: mgr.engaged_clusters() == ["member"], what="member engaged")

    def left() -> list[str]:
        return [
            t.name
            for t in mcruntime_threads()
            if "member" in t.name
            or "/provider/" in t.name
            or "/health/" in t.name
            or "/controller/" in t.name
            or "probes" in t.name
        ]

    with pytest.raises(_Interrupted):
        mgr.stop()
    assert not mgr.wait(0)  # not reported stopped: the stop did not end
    assert left() != []  # what the cut stop had not reached yet

    mgr.stop()  # resumes where it was cut

    assert mgr.wait(0)
    assert left() == []
