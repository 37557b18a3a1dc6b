"""Clusters that share one API server (the ``namespace`` provider's namespaces, virtual clusters
behind one gateway) are probed and reported once for the server, not once each."""

from __future__ import annotations

import copy
import logging
import time
from pathlib import Path
from typing import Any

import pytest

import mcruntime
from mcruntime.cluster import Cluster
from mcruntime.envtest import APIServer, wait_for
from mcruntime.manager._health import ClusterHealth
from mcruntime.providers import namespace
from tests.integration.multicluster._mc_helpers import (
    Recorder,
    cluster_of,
    configmap_controller,
    running,
)

pytestmark = pytest.mark.timeout(120)

#: short health timings so the test runs in seconds
INTERVAL, TIMEOUT, RETRY = 1.0, 0.5, 0.2
NAMESPACES = [f"team-{i:02d}" for i in range(30)]


def _health_lines(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == level and r.name == "mcruntime.manager" and " health: " in r.getMessage()
    ]


def _probes_answered_500(mgr: mcruntime.Manager) -> int:
    """Requests answered 500 by the clusters' server: while its storage is down, only
    ``GET /readyz`` is (other reads wait for storage until their deadline, then get 504)."""
    return sum(
        mgr.get_cluster(name).rest.request_counts().get(("GET", "500"), 0)
        for name in mgr.engaged_clusters()
    )


def test_the_namespaces_of_a_server_whose_storage_is_down_are_probed_and_said_once(
    envtest_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # with 30 namespaces, each was probed on its own: 30 warnings, one per namespace, and
    # 30 probes every retry interval against the one server already in trouble
    caplog.set_level(logging.INFO, logger="mcruntime.manager")
    admin = cluster_of(envtest_server, "admin")
    try:
        for ns in NAMESPACES:
            admin.uncached_client.create(
                {
                    "apiVersion": "v1",
                    "kind": "Namespace",
                    "metadata": {"name": ns, "labels": {"tenant": "yes"}},
                }
            )
        provider = namespace.Provider(
            cluster_of(envtest_server, "tenants-host"), label_selector="tenant=yes"
        )
        url = provider.host.rest.host
        mgr = mcruntime.Manager(
            provider=provider,
            options=mcruntime.ManagerOptions(
                cluster_health_interval=INTERVAL,
                cluster_health_timeout=TIMEOUT,
                cluster_health_retry_interval=RETRY,
            ),
        )
        configmap_controller(mgr, Recorder())
        with running(mgr):
            wait_for(lambda: sorted(mgr.engaged_clusters()) == NAMESPACES, timeout=60)
            envtest_server.storage_outage()
            try:
                wait_for(
                    lambda: not any(mgr.cluster_answering(ns) for ns in NAMESPACES),
                    timeout=INTERVAL + TIMEOUT + 5,
                    what="every namespace marked not answering",
                )
                for ns in NAMESPACES:  # each namespace's own state and gauge
                    assert mgr.metrics.sample("mcruntime_cluster_healthy", {"cluster": ns}) == 0.0
                before = _probes_answered_500(mgr)
                began = time.monotonic()
                time.sleep(2.0)  # the probes sent in a window of time: no event to wait for
                probes = _probes_answered_500(mgr) - before
                window = time.monotonic() - began
                # one server, re-probed every RETRY: about window / RETRY probes (not 30 times that)
                assert probes <= window / RETRY + 3, probes
                [warning] = _health_lines(caplog, logging.WARNING)
                first = mgr.health.state(NAMESPACES[0])
                assert (
                    first is not None and first.reason == "not ready: etcd, etcd-readiness failed"
                )
                assert warning.startswith(
                    f"cluster={NAMESPACES[0]} and 29 other clusters on {url} health: probing "
                    "GET /readyz failed: not ready: etcd, etcd-readiness failed"
                ), warning
            finally:
                envtest_server.storage_restored()
            wait_for(
                lambda: all(mgr.cluster_answering(ns) for ns in NAMESPACES),
                timeout=10,
                what="every namespace answering again",
            )
            wait_for(
                lambda: any("works again" in line for line in _health_lines(caplog, logging.INFO)),
                timeout=5,
                what="the server's recovery said",
            )
            recovered = [
                line for line in _health_lines(caplog, logging.INFO) if "works again" in line
            ]
            assert len(recovered) == 1, recovered
            assert recovered[0].startswith(
                f"cluster={NAMESPACES[0]} and 29 other clusters on {url} health: probing GET "
                "/readyz works again after "
            ), recovered
            assert recovered[0].endswith("; re-watching")
            assert len(_health_lines(caplog, logging.WARNING)) == 1
    finally:
        admin.stop()


def test_a_hung_server_marks_every_cluster_on_it_at_once_and_a_cluster_leaving_drops_its_share(
    envtest_server: APIServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="mcruntime.manager")
    clusters = {n: cluster_of(envtest_server, n) for n in ("a", "b", "c")}
    health = ClusterHealth(interval=INTERVAL, timeout=TIMEOUT, retry_interval=RETRY)
    try:
        for name, cluster in clusters.items():
            health.track(name, cluster)
        assert len(health._servers) == 1  # one server: one share each
        # the cluster probed through is closed (it is leaving, not untracked yet): the
        # others are probed through another
        clusters["a"].stop()
        health.start()
        envtest_server.freeze()
        try:
            wait_for(
                lambda: all(not s.healthy for s in health.states().values()),
                timeout=INTERVAL + TIMEOUT + 5,
                what="a, b and c marked not answering",
            )
            c = health.state("c")
            assert c is not None and c.reason.startswith("[cluster c] GET /readyz: no answer")
            assert c.stuck
            [warning] = _health_lines(caplog, logging.WARNING)
            assert warning.startswith(
                f"cluster=b and 2 other clusters on {clusters['b'].rest.host} health: probing "
                "GET /readyz failed: [cluster b] GET /readyz: no answer"
            ), warning
            health.untrack("a", clusters["a"])
            assert sorted(health.states()) == ["b", "c"]
        finally:
            envtest_server.thaw()
        wait_for(
            lambda: all(s.healthy for s in health.states().values()),
            timeout=10,
            what="b and c answering again",
        )
        [recovered] = [r for r in _health_lines(caplog, logging.INFO) if "works again" in r]
        assert recovered.startswith("cluster=b and 1 other cluster on "), recovered
        health.untrack("b", clusters["b"])
        health.untrack("c")
        assert health._servers == {}  # nothing of them left
        assert health._streaks.failing() == []
    finally:
        health.stop()
        for cluster in clusters.values():
            cluster.stop()


def test_clusters_reaching_one_server_differently_are_probed_apart(
    envtest_server: APIServer, tmp_path: Path
) -> None:
    # through a proxy is another path to it: not shared; nor is a credential that can fail
    # before the probe is sent (a token file, an exec plugin): its failure is not the server's
    config = envtest_server.kubeconfig()
    proxied = copy.deepcopy(config)
    for entry in proxied["clusters"]:
        entry["cluster"]["proxy-url"] = "http://127.0.0.1:1"
    other = Cluster.from_kubeconfig(proxied, name="other")
    token = tmp_path / "token"
    token.write_text("not-a-real-token")
    with_file = copy.deepcopy(config)
    for user in with_file["users"]:
        user["user"] = {"tokenFile": str(token)}
    filed = Cluster.from_kubeconfig(with_file, name="filed")
    same = Cluster.from_kubeconfig(config, name="same")
    also = Cluster.from_kubeconfig(config, name="also")
    health = ClusterHealth(interval=INTERVAL, timeout=TIMEOUT, retry_interval=RETRY)
    try:
        for name, cluster in (("same", same), ("other", other), ("also", also), ("filed", filed)):
            health.track(name, cluster)
        assert sorted(sorted(s.members) for s in health._servers.values()) == [
            ["also", "same"],
            ["filed"],
            ["other"],
        ]
    finally:
        for cluster in (other, same, also, filed):
            cluster.stop()
