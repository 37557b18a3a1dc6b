"""Engagement order and resilience: caches sync before a cluster is visible, the initial list reaches
every handler, an unreachable cluster holds nobody up and is caught up when it returns."""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from typing import Any

import pytest

import mcruntime
from mcruntime.envtest import wait_for
from mcruntime.errors import ClusterNotFound
from mcruntime.handler import Funcs, enqueue_requests_from_map_func
from mcruntime.manager import ManagerOptions
from mcruntime.providers import clusters
from mcruntime.reconcile import Request
from tests._connections import established_to
from tests._logs import logged
from tests._rbac import grant_cluster_role
from tests.integration.multicluster._mc_helpers import (
    CM,
    Recorder,
    cluster_of,
    configmap,
    configmap_controller,
    create_cms,
    running,
    threads_for,
)

pytestmark = pytest.mark.timeout(60)

INITIAL = [f"initial-{i}" for i in range(20)]
_CRD_KIND = "apiextensions.k8s.io/v1/CustomResourceDefinition"


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
        wait_for(lambda: first.seen() >= want, what="first controller saw every initial object")
        wait_for(lambda: second.seen() >= want, what="second controller saw every initial object")
        with lock:
            assert {(c, f"default/{n}") for c, n in created} >= want
        # a controller added while running gets the initial list of the clusters engaged already
        late = Recorder(reconcile)
        configmap_controller(mgr, late, "late")
        wait_for(lambda: late.seen() >= want, what="a late controller saw every initial object")
    assert not_found == []


def test_an_unreachable_cluster_does_not_hold_up_the_others_and_is_engaged_when_it_returns(
    make_envtest_fleet: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="mcruntime.manager")
    engaging = "cluster=cluster-2 manager: engaging every controller "

    def lines(level: int) -> list[str]:
        return logged(caplog, level, starting=engaging)

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
        wait_for(
            lambda: (
                rec.saw("cluster-0", "default/cm-cluster-0")
                and rec.saw("cluster-1", "default/cm-cluster-1")
            )
        )
        assert time.monotonic() - started < 5, "the reachable clusters reconcile promptly"
        state, error = wait_for(lambda: (s := mgr.cluster_states().get("cluster-2")) and s[1] and s)
        assert state == "syncing" and error, (state, error)
        assert "cluster-2" not in mgr.engaged_clusters()
        with pytest.raises(ClusterNotFound, match="not ready"):
            mgr.get_cluster("cluster-2")
        assert any("cluster=cluster-2" in r.getMessage() for r in caplog.records), (
            "the failure is logged"
        )
        wait_for(lambda: lines(logging.WARNING), what="the engagement's failure logged")
        down.start()
        wait_for(
            lambda: "cluster-2" in mgr.engaged_clusters(),
            timeout=20,
            what="engaged after it came back",
        )
        wait_for(
            lambda: rec.saw("cluster-2", "default/cm-cluster-2"), what="initial objects caught up"
        )
        assert mgr.cluster_states()["cluster-2"] == ("engaged", None)
        (warning,) = lines(logging.WARNING)  # one per failure streak
        assert warning.startswith(f"{engaging}failed: ") and "retrying in" in warning
        wait_for(lambda: lines(logging.INFO), what="the engagement's recovery logged")
        (recovery,) = lines(logging.INFO)
        assert recovery.startswith(f"{engaging}works again after ")


def test_a_cluster_hung_while_it_engages_says_it_is_not_answering_not_only_not_synced(
    make_envtest_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="mcruntime.manager")
    hung = make_envtest_server("hung")
    provider = clusters.Provider()
    provider.add("hung", cluster_of(hung, "hung"))
    hung.freeze()  # its first list waits for an answer that does not come
    mgr = mcruntime.Manager(
        provider=provider,
        options=ManagerOptions(
            engage_sync_timeout=3.0,
            cluster_health_interval=0.5,
            cluster_health_timeout=0.5,
            cluster_health_retry_interval=0.2,
        ),
    )
    configmap_controller(mgr, Recorder())
    try:
        with running(mgr):
            engaging = "cluster=hung manager: engaging every controller failed: "
            wait_for(lambda: logged(caplog, logging.WARNING, starting=engaging), timeout=15)
            (warning,) = logged(caplog, logging.WARNING, starting=engaging)
            # the reason says the cluster hangs, not only that the informer did not sync: its
            # list, within its deadline, was cut when the health probe got no answer, and the
            # lists it tried again meanwhile failed at once, unsent
            assert re.search(
                r"not synced: \[cluster hung\] GET /api/v1/configmaps: (cut after |not sent "
                r"\(calls to it fail at once until it answers again\): )",
                warning,
            ), warning
            assert "the cluster is not answering (its health probe, GET /readyz, got no " in (
                warning
            )
            assert "not answering" in (mgr.cluster_states()["hung"][1] or "")
    finally:
        hung.thaw()


def test_a_cluster_going_away_does_not_slow_the_others_and_is_caught_up_when_it_returns(
    make_envtest_fleet: Any,
) -> None:
    fleet = make_envtest_fleet(3)
    provider = clusters.Provider()
    for srv in fleet:
        provider.add(srv.name, cluster_of(srv, srv.name))
    mgr = mcruntime.Manager(provider=provider)

    rec = Recorder(
        lambda req: mgr.get_cluster(req.cluster_name).client.get(CM, req.name, req.namespace)
    )
    configmap_controller(mgr, rec, max_concurrent_reconciles=2)
    with running(mgr):
        wait_for(lambda: len(mgr.engaged_clusters()) == 3)
        flaky = fleet["cluster-1"]
        mgr.get_cluster("cluster-1").client.create(configmap("before"))
        wait_for(lambda: rec.saw("cluster-1", "default/before"))
        flaky.stop()
        latencies = []
        for i in range(10):
            began = time.monotonic()
            mgr.get_cluster("cluster-0").client.create(configmap(f"while-down-{i}"))
            wait_for(lambda i=i: rec.saw("cluster-0", f"default/while-down-{i}"))
            latencies.append(time.monotonic() - began)
        assert max(latencies) < 2.0, latencies
        flaky.start()
        client = fleet_writer = cluster_of(flaky, "writer")
        try:
            wait_for(lambda: _try_create(client, configmap("after")), what="server back")
        finally:
            fleet_writer.stop()
        wait_for(lambda: rec.saw("cluster-1", "default/after"), timeout=20, what="events caught up")
        assert mgr.get_cluster("cluster-1").client.get(CM, "after", "default")


def _try_create(cluster: Any, obj: dict[str, Any]) -> bool:
    try:
        cluster.client.create(obj)
    except Exception:
        return False
    return True


def test_requests_for_a_gone_cluster_end_quietly(
    make_envtest_fleet: Any, caplog: pytest.LogCaptureFixture
) -> None:
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
        wait_for(lambda: mgr.engaged_clusters() == ["cluster-0"])
        mgr.get_cluster("cluster-0").client.create(configmap("haunt"))
        wait_for(
            lambda: any("cluster is gone" in r.getMessage() for r in caplog.records), timeout=10
        )
        tries = rec.count("ghost")
        assert 1 <= tries <= 10, tries
        ctrl = mgr.controllers[0]
        wait_for(lambda: len(ctrl.queue) == 0, timeout=5)
        assert rec.count("ghost") == tries, "a dropped request is not retried again"
        assert not any(r.levelno >= logging.ERROR for r in caplog.records), (
            "ending quietly: no error logs"
        )


def test_an_unreachable_cluster_removed_while_syncing_leaves_nothing_and_stop_is_prompt(
    make_envtest_fleet: Any,
) -> None:
    fleet = make_envtest_fleet(2)
    fleet["cluster-1"].stop()
    provider = clusters.Provider()
    for srv in fleet:
        provider.add(srv.name, cluster_of(srv, srv.name))
    mgr = mcruntime.Manager(provider=provider, options=ManagerOptions(engage_sync_timeout=0.5))
    rec = Recorder()
    configmap_controller(mgr, rec)
    with running(mgr):
        wait_for(lambda: mgr.engaged_clusters() == ["cluster-0"])
        wait_for(lambda: (mgr.cluster_states().get("cluster-1") or ("", None))[1])
        provider.remove("cluster-1")
        wait_for(lambda: "cluster-1" not in mgr.cluster_states())
        wait_for(
            lambda: threads_for("cluster-1") == [],
            timeout=10,
            what="the syncing cluster's threads gone",
        )
        # the other cluster is unaffected
        mgr.get_cluster("cluster-0").client.create(configmap("still-here"))
        wait_for(lambda: rec.saw("cluster-0", "default/still-here"))
        fleet["cluster-1"].start()
        create_cms(fleet["cluster-1"], ["ignored"])
        mgr.get_cluster("cluster-0").client.create(configmap("marker"))
        wait_for(lambda: rec.saw("cluster-0", "default/marker"))
        assert "cluster-1" not in rec.clusters()
        fleet["cluster-1"].stop()
        provider.add("cluster-1", cluster_of(fleet["cluster-1"], "cluster-1"))
        wait_for(lambda: (mgr.cluster_states().get("cluster-1") or ("", None))[1])
        began = time.monotonic()
    # running() has stopped the manager with a cluster still trying to sync
    assert time.monotonic() - began < 5, "stop does not wait for an unreachable cluster"


def test_a_slow_cluster_does_not_hold_up_the_others(make_envtest_server: Any) -> None:
    fast = [make_envtest_server(f"fast-{i}") for i in range(2)]
    slow = make_envtest_server("slow")
    for srv in (*fast, slow):
        create_cms(srv, [f"cm-{srv.name}"])
    slow.latency = 1.0  # every request: discovery and the initial list take seconds
    provider = clusters.Provider()
    for srv in (slow, *fast):
        provider.add(srv.name, cluster_of(srv, srv.name))
    mgr = mcruntime.Manager(provider=provider)
    rec = Recorder()
    configmap_controller(mgr, rec)
    began = time.monotonic()
    with running(mgr):  # start() waits for the initial clusters; reconciles run meanwhile
        wait_for(
            lambda: (
                rec.saw("fast-0", "default/cm-fast-0") and rec.saw("fast-1", "default/cm-fast-1")
            )
        )
        wait_for(lambda: rec.saw("slow", "default/cm-slow"), timeout=30)
        first = {r.cluster_name: t - began for r, t in rec.times.items()}
        fast_done = max(first["fast-0"], first["fast-1"])
        assert fast_done < 2.5, fast_done
        assert fast_done < first["slow"], first


def test_removing_a_cluster_closes_its_connections(make_envtest_fleet: Any) -> None:
    if not os.path.exists("/proc/net/tcp"):
        pytest.skip("needs /proc/net/tcp")
    fleet = make_envtest_fleet(2)
    provider = clusters.Provider()
    for srv in fleet:
        provider.add(srv.name, cluster_of(srv, srv.name))
    mgr = mcruntime.Manager(provider=provider)
    configmap_controller(mgr, Recorder(lambda req: mgr.get_cluster(req.cluster_name)))
    with running(mgr):
        wait_for(lambda: len(mgr.engaged_clusters()) == 2)
        port = fleet["cluster-1"].port
        assert established_to(port) > 0, "an engaged cluster holds a watch connection"
        provider.remove("cluster-1")
        wait_for(
            lambda: established_to(port) == 0,
            timeout=10,
            what="connections to the removed cluster closed",
        )
        assert established_to(fleet["cluster-0"].port) > 0


def test_a_removed_cluster_added_again_is_refused_and_its_clone_engages(
    make_envtest_fleet: Any,
) -> None:
    # a stopped Cluster cannot start again: adding it back was accepted, then its engagement
    # failed with an error line only
    fleet = make_envtest_fleet(1)
    provider = clusters.Provider()
    cluster = cluster_of(fleet["cluster-0"], "cluster-0")
    provider.add("cluster-0", cluster)
    mgr = mcruntime.Manager(provider=provider)
    configmap_controller(mgr, Recorder())
    with running(mgr):
        wait_for(lambda: mgr.engaged_clusters() == ["cluster-0"])
        provider.remove("cluster-0", wait=5)
        wait_for(lambda: cluster.stopped, what="the removed cluster stopped")
        with pytest.raises(ValueError, match=r"its Cluster was stopped .* add cluster\.clone\(\)"):
            provider.add("cluster-0", cluster)
        provider.add("cluster-0", cluster.clone())
        wait_for(lambda: mgr.engaged_clusters() == ["cluster-0"], what="the clone engaged")


def _bare_cluster_and_gadget_controller(
    make_envtest_server: Any, service_account: str | None = None
) -> tuple[Any, mcruntime.Manager, Recorder]:
    """A cluster "bare" without the Gadget CRD, and a manager whose one controller is of
    Gadgets (and records its requests); it reaches the cluster as ``service_account``
    (``namespace/name``) when given."""
    from tests.integration.crd.test_crd_install import Gadget

    srv = make_envtest_server("bare")
    provider = clusters.Provider()
    kubeconfig = srv.kubeconfig(service_account=service_account)
    provider.add("bare", mcruntime.Cluster.from_kubeconfig(kubeconfig, name="bare"))
    mgr = mcruntime.Manager(provider=provider)
    rec = Recorder()
    mcruntime.controller_managed_by(mgr).named("gadgets").for_(Gadget).complete(rec)
    return srv, mgr, rec


def _reconciled_within(rec: Recorder, name: str, bound: float, since: float) -> None:
    """Wait for cluster bare's default/``name`` reconciled, and that within ``bound`` seconds
    of ``since`` (monotonic: when its CRD was installed)."""
    wait_for(lambda: ("bare", f"default/{name}") in rec.seen(), timeout=20, what=f"{name} seen")
    took = rec.times[Request("default", name, cluster_name="bare")] - since
    assert took < bound, f"reconciled {took:.1f}s after its CRD was installed"


def _third_failed_attempt(caplog: pytest.LogCaptureFixture) -> None:
    """Wait for the engagement's third failed attempt: its next retry is 4 s or more away."""
    wait_for(
        lambda: logged(caplog, logging.DEBUG, containing="still failing (3)"),
        timeout=15,
        what="the third failed attempt",
    )


def test_a_cluster_serving_none_of_the_controllers_kinds_yet_is_engaged_to_install_them_through(
    make_envtest_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # its discovery answered: it is reachable, so `get_cluster` returns it (an operator
    # installs its CRD through it) while the controller of the kind it lacks is retried;
    # `install_crds` through it retries that controller at once, not at its backoff's end
    from mcruntime.crd import install_crds
    from tests.integration.crd.test_crd_install import Gadget

    srv, mgr, rec = _bare_cluster_and_gadget_controller(make_envtest_server)
    with caplog.at_level(logging.DEBUG, logger="mcruntime.manager"), running(mgr):
        wait_for(lambda: "bare" in mgr.engaged_clusters(), timeout=10, what="bare engaged")
        _third_failed_attempt(caplog)  # its next retry is 4 s or more away
        install_crds(mgr.get_cluster("bare"), [Gadget], timeout=10)
        installed = time.monotonic()
        mgr.get_cluster("bare").client.create(
            Gadget.model_validate(
                {"metadata": {"name": "g1", "namespace": "default"}, "spec": {"color": "red"}}
            )
        )
        _reconciled_within(rec, "g1", 2.0, installed)
    (warning,) = logged(caplog, logging.WARNING, starting="cluster=bare manager: ")
    assert "controller gadgets: NoKindMatch: no kind 'install.example.com/v1/Gadget'" in warning
    assert logged(caplog, logging.INFO, starting="cluster=bare manager: ", containing="again")


def test_a_crd_created_by_other_means_starts_the_controller_waiting_for_its_kind_at_once(
    make_envtest_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # `kubectl apply -f crd.yaml` while the controller's retry is 4 s or more away: the
    # engagement watches the cluster's CRDs meanwhile, and the change retries it now
    from mcruntime.crd import generate_crd
    from tests.integration.crd.test_crd_install import Gadget

    srv, mgr, rec = _bare_cluster_and_gadget_controller(make_envtest_server)
    outside = cluster_of(srv, "outside")  # as kubectl would: not the manager's client
    try:
        with caplog.at_level(logging.DEBUG, logger="mcruntime.manager"), running(mgr):
            _third_failed_attempt(caplog)
            outside.uncached_client.create(generate_crd(Gadget))
            created = time.monotonic()
            wait_for(
                lambda: (
                    "gadgets" in [c.name for c in mgr.controllers if "bare" in c.engaged_clusters()]
                ),
                timeout=20,
                what="the gadgets controller engaged",
            )
            took = time.monotonic() - created
            assert took < 1.0, f"engaged {took:.1f}s after the CRD was created"
    finally:
        outside.stop()


def test_without_the_right_to_watch_crds_install_crds_through_the_cluster_still_retries_at_once(
    make_envtest_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # credentials that may install CRDs but not list or watch them: no watch of them (said
    # at debug level), and `install_crds` through the cluster wakes the retry itself
    from mcruntime.crd import install_crds
    from tests.integration.crd.test_crd_install import Gadget

    srv, mgr, rec = _bare_cluster_and_gadget_controller(make_envtest_server, "default/operator")
    admin = cluster_of(srv, "admin")
    grant_cluster_role(
        admin.uncached_client,
        "operator",
        [
            {
                "apiGroups": ["apiextensions.k8s.io"],
                "resources": ["customresourcedefinitions"],
                "verbs": ["get", "create", "update"],
            },
            {
                "apiGroups": ["install.example.com"],
                "resources": ["gadgets"],
                "verbs": ["get", "list", "watch"],
            },
        ],
        "default/operator",
    )
    try:
        with (
            caplog.at_level(logging.DEBUG, logger="mcruntime.manager"),
            caplog.at_level(logging.DEBUG, logger="mcruntime.client"),  # (the RESTMapper's)
            running(mgr),
        ):
            _third_failed_attempt(caplog)
            assert logged(
                caplog,
                logging.DEBUG,
                starting="cluster=bare: CRDs not watched while a kind is not served (",
                containing="forbidden",
            )
            install_crds(mgr.get_cluster("bare"), [Gadget], timeout=10)
            installed = time.monotonic()
            admin.uncached_client.create(
                Gadget.model_validate(
                    {"metadata": {"name": "g1", "namespace": "default"}, "spec": {"color": "red"}}
                )
            )
            _reconciled_within(rec, "g1", 2.0, installed)
    finally:
        admin.stop()


def test_a_cluster_that_leaves_while_its_crds_are_watched_leaves_no_thread_or_watch(
    make_envtest_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # the watch of its CRDs is the only watch of the process: once the cluster is gone,
    # the thread that reads every watch has nothing left and ends too
    from mcruntime._threads import mcruntime_threads

    _srv, mgr, _rec = _bare_cluster_and_gadget_controller(make_envtest_server)

    def reader() -> list[str]:
        return [t.name for t in mcruntime_threads() if t.name == "mcruntime/watches"]

    provider = mgr.provider
    assert isinstance(provider, clusters.Provider)
    with caplog.at_level(logging.DEBUG, logger="mcruntime.manager"), running(mgr):
        wait_for(lambda: "bare" in mgr.engaged_clusters(), timeout=10, what="bare engaged")
        wait_for(reader, timeout=10, what="its CRDs watched")
        provider.remove("bare", wait=30)
        wait_for(lambda: not threads_for("bare"), timeout=10, what="bare's threads gone")
        wait_for(lambda: not reader(), timeout=10, what="the watch of its CRDs gone")


def test_a_crd_deleted_and_created_again_resumes_its_engaged_controller_at_once(
    make_envtest_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # a Helm upgrade that replaces the CRD, in one member: the informer of the engaged
    # controller fails NoKindMatch with a growing backoff meanwhile, and lists again as soon
    # as the CRD is back (the cluster's CRDs are watched while it waits), not at its end
    from mcruntime.crd import generate_crd, install_crds
    from tests.integration.crd.test_crd_install import Gadget

    srv, mgr, rec = _bare_cluster_and_gadget_controller(make_envtest_server)
    outside = cluster_of(srv, "outside")  # as kubectl would: not the manager's client
    crd = generate_crd(Gadget)

    def gadget(name: str) -> Any:
        spec = {"metadata": {"name": name, "namespace": "default"}, "spec": {"color": "red"}}
        return Gadget.model_validate(spec)

    try:
        install_crds(outside, [Gadget], timeout=10)
        with caplog.at_level(logging.DEBUG, logger="mcruntime.cache"), running(mgr):
            outside.client.create(gadget("g1"))
            wait_for(lambda: ("bare", "default/g1") in rec.seen(), timeout=20, what="g1")
            outside.uncached_client.delete(_CRD_KIND, crd["metadata"]["name"])
            # the sixth failed list: its next attempt is 6 s or more away
            wait_for(
                lambda: logged(caplog, logging.DEBUG, containing="still failing (6)"),
                timeout=20,
                what="the informer's sixth failed list",
            )
            install_crds(outside, [Gadget], timeout=10)
            created = time.monotonic()
            outside.client.create(gadget("g2"))
            _reconciled_within(rec, "g2", 3.0, created)
        (warning,) = logged(caplog, logging.WARNING, starting="cluster=bare informer ")
        assert "no kind 'install.example.com/v1/Gadget' is served by cluster bare" in warning
        assert logged(caplog, logging.INFO, starting="cluster=bare informer ", containing="again")
    finally:
        outside.stop()
