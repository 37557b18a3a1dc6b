"""Engagement order and resilience: caches sync before a cluster is visible, the initial list reaches
every handler, an unreachable cluster holds nobody up and is caught up when it returns."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import pytest
from _mc_helpers import (
    CM,
    Recorder,
    cluster_of,
    configmap,
    configmap_controller,
    create_cms,
    running,
    wait_until,
)

import mcruntime
from mcruntime.errors import ClusterNotFound
from mcruntime.handler import Funcs, enqueue_requests_from_map_func
from mcruntime.manager import ManagerOptions
from mcruntime.providers import clusters
from mcruntime.reconcile import Request

pytestmark = pytest.mark.timeout(60)

INITIAL = [f"initial-{i}" for i in range(20)]


def test_get_cluster_resolves_for_every_initial_object_and_every_handler_gets_the_initial_list(
    make_envtest_fleet: Any,
) -> None:
    fleet = make_envtest_fleet(3)
    for srv in fleet:
        create_cms(srv, INITIAL)
    provider = clusters.Provider()
    for srv in fleet:
        provider.add(srv.name, cluster_of(srv, srv.name))
    mgr = mcruntime.Manager(provider=provider)
    not_found: list[str] = []
    lock = threading.Lock()

    def reconcile(req: Request) -> None:
        try:
            cluster = mgr.get_cluster(req.cluster_name)
        except ClusterNotFound as exc:
            with lock:
                not_found.append(f"{req}: {exc}")
            raise
        cluster.client.get(CM, req.name, req.namespace)

    first, second = Recorder(reconcile), Recorder(reconcile)
    configmap_controller(mgr, first, "first", max_concurrent_reconciles=4)
    configmap_controller(mgr, second, "second", max_concurrent_reconciles=4)
    created: list[tuple[str, str]] = []

    def on_create(event: Any, queue: Any) -> None:
        with lock:
            created.append((event.cluster_name, event.object["metadata"]["name"]))

    third = Recorder()
    (
        mcruntime.controller_managed_by(mgr)
        .named("third")
        .watches(CM, Funcs(create=on_create))
        .complete(third)
    )
    want = {(srv.name, f"default/{n}") for srv in fleet for n in INITIAL}
    with running(mgr):
        wait_until(lambda: first.seen() >= want, what="first controller saw every initial object")
        wait_until(lambda: second.seen() >= want, what="second controller saw every initial object")
        with lock:
            assert {(c, f"default/{n}") for c, n in created} >= want
        # a controller added while running gets the initial list of the clusters engaged already
        late = Recorder(reconcile)
        configmap_controller(mgr, late, "late")
        wait_until(lambda: late.seen() >= want, what="a late controller saw every initial object")
    assert not_found == []


def test_an_unreachable_cluster_does_not_hold_up_the_others_and_is_engaged_when_it_returns(
    make_envtest_fleet: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="mcruntime.manager")
    fleet = make_envtest_fleet(3)
    for srv in fleet:
        create_cms(srv, [f"cm-{srv.name}"])
    down = fleet["cluster-2"]
    down.stop()
    provider = clusters.Provider()
    for srv in fleet:
        provider.add(srv.name, cluster_of(srv, srv.name))
    mgr = mcruntime.Manager(provider=provider, options=ManagerOptions(engage_sync_timeout=1.0))
    rec = Recorder()
    configmap_controller(mgr, rec)
    started = time.monotonic()
    with running(mgr):
        wait_until(lambda: rec.saw("cluster-0", "default/cm-cluster-0") and rec.saw("cluster-1", "default/cm-cluster-1"))
        assert time.monotonic() - started < 5, "the reachable clusters reconcile promptly"
        state, error = wait_until(lambda: (s := mgr.cluster_states().get("cluster-2")) and s[1] and s)
        assert state == "syncing" and error, (state, error)
        assert "cluster-2" not in mgr.engaged_clusters()
        with pytest.raises(ClusterNotFound, match="not ready"):
            mgr.get_cluster("cluster-2")
        assert any("cluster=cluster-2" in r.getMessage() for r in caplog.records), "the failure is logged"
        down.start()
        wait_until(lambda: "cluster-2" in mgr.engaged_clusters(), timeout=20, what="engaged after it came back")
        wait_until(lambda: rec.saw("cluster-2", "default/cm-cluster-2"), what="initial objects caught up")
        assert mgr.cluster_states()["cluster-2"] == ("engaged", None)


def test_a_cluster_going_away_does_not_slow_the_others_and_is_caught_up_when_it_returns(
    make_envtest_fleet: Any,
) -> None:
    fleet = make_envtest_fleet(3)
    provider = clusters.Provider()
    for srv in fleet:
        provider.add(srv.name, cluster_of(srv, srv.name))
    mgr = mcruntime.Manager(provider=provider)

    rec = Recorder(lambda req: mgr.get_cluster(req.cluster_name).client.get(CM, req.name, req.namespace))
    configmap_controller(mgr, rec, max_concurrent_reconciles=2)
    with running(mgr):
        wait_until(lambda: len(mgr.engaged_clusters()) == 3)
        flaky = fleet["cluster-1"]
        mgr.get_cluster("cluster-1").client.create(configmap("before"))
        wait_until(lambda: rec.saw("cluster-1", "default/before"))
        flaky.stop()
        latencies = []
        for i in range(10):
            began = time.monotonic()
            mgr.get_cluster("cluster-0").client.create(configmap(f"while-down-{i}"))
            wait_until(lambda i=i: rec.saw("cluster-0", f"default/while-down-{i}"))
            latencies.append(time.monotonic() - began)
        assert max(latencies) < 1.0, latencies
        flaky.start()
        client = fleet_writer = cluster_of(flaky, "writer")
        try:
            wait_until(lambda: _try_create(client, configmap("after")), what="server back")
        finally:
            fleet_writer.stop()
        wait_until(lambda: rec.saw("cluster-1", "default/after"), timeout=20, what="events caught up")
        assert mgr.get_cluster("cluster-1").client.get(CM, "after", "default")


def _try_create(cluster: Any, obj: dict[str, Any]) -> bool:
    try:
        cluster.client.create(obj)
    except Exception:
        return False
    return True


def test_requests_for_a_gone_cluster_end_quietly(make_envtest_fleet: Any, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="mcruntime.controller")
    fleet = make_envtest_fleet(1)
    provider = clusters.Provider()
    provider.add("cluster-0", cluster_of(fleet["cluster-0"], "cluster-0"))
    mgr = mcruntime.Manager(provider=provider)

    def to_ghost(obj: dict[str, Any]) -> list[Request]:
        return [Request("default", obj["metadata"]["name"], "ghost")]

    rec = Recorder(lambda req: mgr.get_cluster(req.cluster_name))
    (
        mcruntime.controller_managed_by(mgr)
        .named("ghostly")
        .watches(CM, enqueue_requests_from_map_func(to_ghost, cross_cluster=True))
        .complete(rec)
    )
    with running(mgr):
        wait_until(lambda: mgr.engaged_clusters() == ["cluster-0"])
        mgr.get_cluster("cluster-0").client.create(configmap("haunt"))
        wait_until(lambda: any("cluster is gone" in r.getMessage() for r in caplog.records), timeout=10)
        tries = rec.count("ghost")
        assert 1 <= tries <= 10, tries
        ctrl = mgr.controllers[0]
        wait_until(lambda: len(ctrl.queue) == 0, timeout=5)
        assert rec.count("ghost") == tries, "a dropped request is not retried again"
        assert not any(r.levelno >= logging.ERROR for r in caplog.records), "ending quietly: no error logs"
