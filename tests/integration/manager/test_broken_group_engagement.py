"""A cluster one of whose API groups hangs (an aggregated API with a dead backend): the
controllers whose kinds are fine engage it at once; the one waiting is logged, naming the
group-version it waits for."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest

import mcruntime
from mcruntime.cluster import Cluster
from mcruntime.envtest import wait_for
from mcruntime.manager import ManagerOptions, _manager
from mcruntime.providers.clusters import Provider
from tests._brokengroup import GROUP, BrokenGroupProxy

pytestmark = pytest.mark.timeout(60)


def test_a_controller_engages_without_waiting_for_one_stuck_on_a_hung_group(
    make_envtest_server: Any, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.INFO, logger="mcruntime")
    monkeypatch.setattr(_manager, "_SYNC_SLOW", 0.5)  # (5 s by default)
    server = make_envtest_server("eu-1", tls=False)
    proxy = BrokenGroupProxy((server.host, server.port), mode="hang")
    try:
        cluster = Cluster.from_kubeconfig(proxy.kubeconfig(server), name="eu-1")
        cluster.uncached_client.create(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": {"name": "r1", "namespace": "default"},
                "rules": [],
            }
        )
        provider = Provider()
        provider.add("eu-1", cluster)
        mgr = mcruntime.Manager(provider=provider, options=ManagerOptions(engage_sync_timeout=20))
        reconciled = threading.Event()
        mcruntime.controller_managed_by(mgr).named("podmetrics").for_(
            f"{GROUP}/v1beta1/PodMetrics"
        ).complete(lambda r: None)
        mcruntime.controller_managed_by(mgr).named("roles").for_(
            "rbac.authorization.k8s.io/v1/Role"
        ).complete(lambda r: reconciled.set())
        with mgr:
            # before: 20 s (the engage_sync_timeout), after the podmetrics sync gave up
            assert reconciled.wait(10), "roles did not reconcile while podmetrics waited"
            assert mgr.engaged_clusters() == ["eu-1"]
            wait_for(lambda: "still syncing" in caplog.text, timeout=10, what="the slow log")
            slow = [r for r in caplog.records if "still syncing" in r.getMessage()]
            assert len(slow) == 1 and slow[0].levelno == logging.WARNING
            assert slow[0].getMessage().startswith("cluster=eu-1 controller=podmetrics:")
            assert f"discovery of {GROUP}/v1beta1 has had no answer" in slow[0].getMessage()
            proxy.close()  # (the hung request ends: the manager stops at once)
    finally:
        proxy.close()


def test_a_controller_whose_informers_failed_is_not_warned_again_as_still_syncing(
    make_envtest_server: Any, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cluster that refuses the controllers' credentials (a wrong token: 401): each informer
    says so in one warning, with the reason. The slow-sync line of each controller only
    repeats it: at debug level, naming that reason, not a warning per controller saying
    `its informers have not listed`."""
    caplog.set_level(logging.DEBUG, logger="mcruntime")
    monkeypatch.setattr(_manager, "_SYNC_SLOW", 0.5)  # (5 s by default)
    server = make_envtest_server("eu-2")
    config = server.kubeconfig()
    config["users"][0]["user"]["token"] = "not-the-token"
    provider = Provider()
    provider.add("eu-2", Cluster.from_kubeconfig(config, name="eu-2"))
    mgr = mcruntime.Manager(provider=provider)
    for kind in ("v1/ConfigMap", "v1/Secret"):
        mcruntime.controller_managed_by(mgr).named(kind.split("/")[1].lower()).for_(kind).complete(
            lambda r: None
        )

    def slow() -> list[logging.LogRecord]:
        return [r for r in caplog.records if "still syncing" in r.getMessage()]

    with mgr:
        wait_for(lambda: len(slow()) >= 2, timeout=10, what="the slow-sync lines")
    informer_warnings = [
        r.getMessage()
        for r in caplog.records
        if r.name == "mcruntime.cache" and r.levelno == logging.WARNING
    ]
    assert len(informer_warnings) == 2, informer_warnings
    assert all("[cluster eu-2] Unauthorized" in m for m in informer_warnings)
    assert [r.levelno for r in slow()[:2]] == [logging.DEBUG, logging.DEBUG]
    assert all(
        "its informers' list fails: [cluster eu-2] Unauthorized" in r.getMessage()
        for r in slow()[:2]
    )
