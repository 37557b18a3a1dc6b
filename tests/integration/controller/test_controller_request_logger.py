"""A reconciler's ``request_logger`` lines name the cluster and request the controller runs it for."""

from __future__ import annotations

import logging
from typing import Any

import pytest

import mcruntime
from mcruntime import Request
from mcruntime.envtest import wait_for
from mcruntime.providers import clusters
from mcruntime.reconcile import request_logger

pytestmark = pytest.mark.timeout(60)

LOGGER = "tests.controller.request_logger"
log = request_logger(LOGGER)


def test_sync_and_async_reconcilers_log_their_cluster_and_request(
    make_envtest_fleet: Any, caplog: pytest.LogCaptureFixture
) -> None:
    fleet = make_envtest_fleet(1, names=["eu-1"])
    provider = clusters.Provider()
    provider.add("eu-1", mcruntime.Cluster.from_kubeconfig(fleet["eu-1"].kubeconfig(), name="eu-1"))
    mgr = mcruntime.Manager(provider=provider)

    def sync_reconcile(req: Request) -> None:
        log.info("sync saw %s", req.name)

    async def async_reconcile(req: Request) -> None:
        log.info("async saw %s", req.name)

    mcruntime.controller_managed_by(mgr).named("sync").for_("v1/ConfigMap").complete(sync_reconcile)
    mcruntime.controller_managed_by(mgr).named("async").for_("v1/ConfigMap").complete(
        async_reconcile
    )
    writer = mcruntime.Cluster.from_kubeconfig(fleet["eu-1"].kubeconfig(), name="writer")
    try:
        with caplog.at_level(logging.INFO, logger=LOGGER), mgr:
            writer.uncached_client.create(
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": "web", "namespace": "default"},
                }
            )

            def lines() -> list[str]:
                return sorted(
                    r.getMessage()
                    for r in caplog.records
                    if r.name == LOGGER and "web" in r.getMessage()
                )

            wait_for(lambda: len(lines()) >= 2, timeout=20, what="both reconcilers logged web")
    finally:
        writer.stop()
    assert lines()[:2] == [
        "cluster=eu-1 request=default/web: async saw web",
        "cluster=eu-1 request=default/web: sync saw web",
    ]
    assert {getattr(r, "cluster", None) for r in caplog.records if r.name == LOGGER} == {"eu-1"}
