"""The manager's /metrics, /healthz and /readyz endpoints, against a real embedded fleet."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest

import mcruntime
from mcruntime.cluster import Cluster
from mcruntime.envtest import wait_for
from mcruntime.handler import enqueue_requests_from_map_func
from mcruntime.manager import ManagerOptions
from mcruntime.providers.clusters import Provider
from tests.integration.manager._http import get

pytestmark = pytest.mark.timeout(60)


def configmap(name: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default"},
    }


@pytest.fixture
def running(make_envtest_fleet):
    fleet = make_envtest_fleet(2)
    provider = Provider()
    for name in fleet.names:
        provider.add(name, Cluster.from_kubeconfig(fleet[name].kubeconfig(), name=name))
    mgr = mcruntime.Manager(
        provider=provider,
        options=ManagerOptions(
            metrics_bind_address="127.0.0.1:0", health_probe_bind_address="127.0.0.1:0"
        ),
    )
    seen: set[tuple[str, str]] = set()

    def reconcile(req: mcruntime.Request) -> None:
        seen.add((req.cluster_name, req.name))

    mcruntime.controller_managed_by(mgr).named("cms").for_("v1/ConfigMap").complete(reconcile)
    mgr.start()
    wait_for(lambda: len(mgr.engaged_clusters()) == 2, what="both clusters engaged")
    yield fleet, mgr, seen
    mgr.stop()


def test_metrics_carry_controller_runtime_names_and_cluster_labels(running):
    fleet, mgr, seen = running
    for name in fleet.names:
        mgr.get_cluster(name).client.create(configmap("web"))
    wait_for(lambda: {(n, "web") for n in fleet.names} <= seen, what="reconciles in every cluster")
    status, body = get(mgr.metrics_address, "/metrics")
    assert status == 200
    for name in fleet.names:
        assert (
            f'controller_runtime_reconcile_total{{cluster="{name}",controller="cms",result="success"}}'
            in body
        )
        assert f'workqueue_adds_total{{cluster="{name}",controller="cms",name="cms"}}' in body
    for metric in (
        "controller_runtime_reconcile_errors_total",
        "controller_runtime_reconcile_time_seconds_bucket",
        "controller_runtime_max_concurrent_reconciles",
        "controller_runtime_active_workers",
        "workqueue_depth",
        "workqueue_queue_duration_seconds_bucket",
        "workqueue_work_duration_seconds_bucket",
        "workqueue_unfinished_work_seconds",
        "workqueue_longest_running_processor_seconds",
    ):
        assert metric in body, metric
    assert "mcruntime_engaged_clusters 2.0" in body
    assert 'mcruntime_cluster_engagements_total{event="engage"} 2.0' in body


def test_readyz_reports_an_unreachable_cluster_by_name_without_failing(running):
    fleet, mgr, _ = running
    status, body = get(mgr.health_probe_address, "/readyz?verbose")
    assert status == 200, body
    assert "[+]cluster/cluster-0 ok" in body and "[+]cluster/cluster-1 ok" in body
    fleet["cluster-1"].stop()
    fleet["cluster-0"].drop_watches()

    def reported() -> bool:
        _, b = get(mgr.health_probe_address, "/readyz?verbose")
        return "[!]cluster/cluster-1" in b

    wait_for(reported, what="cluster-1 reported unreachable")
    status, body = get(mgr.health_probe_address, "/readyz")
    assert status == 200, body
    fleet["cluster-1"].start()
    wait_for(
        lambda: "[+]cluster/cluster-1 ok" in get(mgr.health_probe_address, "/readyz?verbose")[1],
        what="cluster-1 ready again",
    )


def test_user_checks_fail_their_endpoint(running):
    _, mgr, _ = running
    assert get(mgr.health_probe_address, "/healthz") == (200, "ok")

    def broken() -> None:
        raise RuntimeError("database down")

    mgr.add_readyz_check("database", broken)
    status, body = get(mgr.health_probe_address, "/readyz")
    assert status == 500 and "[-]database failed: database down" in body
    assert get(mgr.health_probe_address, "/readyz/database")[0] == 500
    assert get(mgr.health_probe_address, "/readyz/nope")[0] == 404
    assert get(mgr.health_probe_address, "/healthz/ping") == (200, "ok")
    # a check known to fail for a while can be left out of a probe, as on kube-apiserver
    assert get(mgr.health_probe_address, "/readyz?exclude=database") == (200, "ok")
    status, body = get(mgr.health_probe_address, "/readyz?verbose&exclude=database&exclude=x")
    assert status == 200
    assert "[+]database excluded: ok" in body.splitlines()
    assert body.endswith(
        'warn: some health checks cannot be excluded: no matches for "x"\nreadyz check passed\n'
    )


def test_metrics_are_gzipped_for_a_scraper_that_asks(running):
    import gzip

    _fleet, mgr, _seen = running
    url = f"http://127.0.0.1:{mgr.metrics_address[1]}/metrics"
    req = urllib.request.Request(url, headers={"Accept-Encoding": "gzip"})
    with urllib.request.urlopen(req, timeout=5) as resp:
        assert resp.headers["Content-Encoding"] == "gzip"
        text = gzip.decompress(resp.read()).decode()
    assert "mcruntime_engaged_clusters 2.0" in text
    status, plain = get(mgr.metrics_address, "/metrics")  # no Accept-Encoding: plain text
    assert status == 200 and "mcruntime_engaged_clusters 2.0" in plain


def test_reconcile_counters_start_at_zero_on_an_engaged_cluster(running):
    # controller-runtime's initMetrics: a series born at 1 hides the first error from
    # increase() and rate(); each cluster's start at 0 once the controller engages it
    fleet, mgr, _seen = running
    _status, body = get(mgr.metrics_address, "/metrics")
    for name in fleet.names:
        labels = f'cluster="{name}",controller="cms"'
        for result in ("success", "error", "requeue", "requeue_after"):
            assert f'controller_runtime_reconcile_total{{{labels},result="{result}"}}' in body
        assert f"controller_runtime_reconcile_errors_total{{{labels}}} 0.0" in body
        assert f"controller_runtime_terminal_reconcile_errors_total{{{labels}}} 0.0" in body
        assert f"controller_runtime_reconcile_timeouts_total{{{labels}}} 0.0" in body


def test_series_of_cross_cluster_requests_go_with_their_cluster(make_envtest_fleet):
    # a hub controller that engages no member reconciles requests for each member (and, by
    # a name taken from a spec, for a cluster never there): their series went with nothing,
    # so a churning fleet grew them without bound
    fleet = make_envtest_fleet(3)
    provider = Provider()
    for name in ("cluster-1", "cluster-2"):
        provider.add(name, Cluster.from_kubeconfig(fleet[name].kubeconfig(), name=name))
    mgr = mcruntime.Manager(fleet["cluster-0"].kubeconfig(), provider=provider)
    done: list[mcruntime.Request] = []

    def fan_out(obj: dict) -> list[mcruntime.Request]:
        name = obj["metadata"]["name"]
        return [mcruntime.Request("default", name, c) for c in ("cluster-1", "cluster-2", "ghost")]

    (
        mcruntime.controller_managed_by(mgr)
        .named("hubfan")
        .watches("v1/ConfigMap", enqueue_requests_from_map_func(fan_out, cross_cluster=True))
        .engage_with_local_cluster()
        .engage_with_provider_clusters(False)
        .complete(done.append)
    )

    def series(cluster: str) -> list[str]:
        return [
            s.name
            for family in mgr.metrics.registry.collect()
            for s in family.samples
            if s.labels.get("cluster") == cluster
            and "hubfan" in (s.labels.get("controller"), s.labels.get("name"))
        ]

    with mgr:
        wait_for(lambda: len(mgr.engaged_clusters()) == 2, what="engaged")
        mgr.get_cluster("").client.create(configmap("src"))
        wait_for(lambda: {r.cluster_name for r in done} >= {"cluster-1", "cluster-2", "ghost"})
        wait_for(lambda: series("cluster-1") and series("cluster-2"))
        wait_for(lambda: not series("ghost"), what="the series of a cluster never there gone")
        provider.remove("cluster-1", wait=5)
        wait_for(lambda: not series("cluster-1"), what="the series of the cluster gone")
        assert series("cluster-2")


def requests_served(mgr: mcruntime.Manager) -> dict[tuple[str, str, str, str], float]:
    """``rest_client_requests_total`` as /metrics serves it, by (cluster, method, code, host)."""
    from prometheus_client.parser import text_string_to_metric_families

    _status, body = get(mgr.metrics_address, "/metrics")
    return {
        (s.labels["cluster"], s.labels["method"], s.labels["code"], s.labels["host"]): s.value
        for f in text_string_to_metric_families(body)
        if f.name == "rest_client_requests"
        for s in f.samples
    }


def test_rest_client_requests_are_counted_per_cluster_by_code_and_go_with_it(
    make_envtest_fleet,
):
    # client-go's rest_client_requests_total{code,method,host} (controller-runtime serves it),
    # with the cluster: a member's failing calls are seen by code, "<error>" when unanswered
    fleet = make_envtest_fleet(2)
    provider = Provider()
    for name in fleet.names:
        provider.add(name, Cluster.from_kubeconfig(fleet[name].kubeconfig(), name=name))
    mgr = mcruntime.Manager(
        provider=provider, options=ManagerOptions(metrics_bind_address="127.0.0.1:0")
    )
    mcruntime.controller_managed_by(mgr).named("cms").for_("v1/ConfigMap").complete(lambda r: None)
    with mgr:
        wait_for(lambda: len(mgr.engaged_clusters()) == 2, what="both clusters engaged")
        member = mgr.get_cluster("cluster-0")
        host = member.rest.address
        member.client.create(configmap("web"))
        with pytest.raises(mcruntime.errors.NotFound):  # (the cache's reads send nothing)
            mgr.get_api_reader("cluster-0").get("v1/ConfigMap", "nope", "default")
        counted = requests_served(mgr)
        assert counted[("cluster-0", "POST", "201", host)] == 1
        assert counted[("cluster-0", "GET", "404", host)] >= 1
        assert counted[("cluster-0", "GET", "200", host)] >= 1  # its informer's list, say
        assert any(k[0] == "cluster-1" for k in counted)

        fleet["cluster-1"].stop()  # no answer: counted as "<error>", as client-go does
        with pytest.raises(mcruntime.errors.MCRuntimeError):
            mgr.get_api_reader("cluster-1").get("v1/ConfigMap", "web", "default", timeout=2)
        wait_for(
            lambda: any(k[:3:2] == ("cluster-1", "<error>") for k in requests_served(mgr)),
            what="the unanswered call counted",
        )

        provider.remove("cluster-1", wait=10)
        wait_for(
            lambda: not [k for k in requests_served(mgr) if k[0] == "cluster-1"],
            what="the series of the cluster gone",
        )
        assert requests_served(mgr)[("cluster-0", "POST", "201", host)] == 1


def test_a_provider_cluster_named_local_beside_the_local_cluster_is_said(
    make_envtest_fleet, caplog
):
    # its series are the local cluster's (cluster="local"), and its leaving removed those of
    # the manager's own cluster, never to come back: nothing said so
    fleet = make_envtest_fleet(2)
    provider = Provider()
    provider.add("local", Cluster.from_kubeconfig(fleet["cluster-1"].kubeconfig(), name="local"))
    mgr = mcruntime.Manager(fleet["cluster-0"].kubeconfig(), provider=provider)
    mcruntime.controller_managed_by(mgr).for_("v1/ConfigMap").complete(lambda req: None)
    caplog.set_level("WARNING", logger="mcruntime.manager")
    with mgr:
        wait_for(lambda: "local" in mgr.engaged_clusters(), timeout=30)
    said = [r.getMessage() for r in caplog.records if "named local" in r.getMessage()]
    assert len(said) == 1, said
    assert said[0].startswith("cluster=local: a provider's cluster is named local")
