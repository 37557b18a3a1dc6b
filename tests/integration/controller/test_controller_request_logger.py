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


def test_one_reconcile_s_lines_and_the_controller_s_share_its_fields_and_reconcile_id(
    make_envtest_fleet: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """As controller-runtime's ``reconcileID``: the reconciler's lines and the controller's
    error about that reconcile carry one id, a retry a new one; every record names its
    cluster, controller and object as attributes, for a pipeline that ships JSON."""
    fleet = make_envtest_fleet(1, names=["eu-1"])
    provider = clusters.Provider()
    provider.add("eu-1", mcruntime.Cluster.from_kubeconfig(fleet["eu-1"].kubeconfig(), name="eu-1"))
    mgr = mcruntime.Manager(provider=provider)
    attempts: list[int] = []

    def reconcile(req: Request) -> None:
        attempts.append(1)
        log.info("attempt %d", len(attempts))
        if len(attempts) == 1:
            raise RuntimeError("the quota service did not answer")

    mcruntime.controller_managed_by(mgr).named("quotas").for_("v1/ConfigMap").complete(reconcile)
    writer = mcruntime.Cluster.from_kubeconfig(fleet["eu-1"].kubeconfig(), name="writer")
    caplog.set_level(logging.INFO, logger=LOGGER)
    caplog.set_level(logging.DEBUG, logger="mcruntime.controller")  # (last: the handler's level)
    try:
        with mgr:
            writer.uncached_client.create(
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": "web", "namespace": "default"},
                }
            )

            def about_web() -> list[logging.LogRecord]:
                return [r for r in caplog.records if getattr(r, "request", None) == "default/web"]

            wait_for(
                lambda: any("reconciled (success)" in r.getMessage() for r in about_web()),
                timeout=20,
                what="web reconciled after its failure",
            )
    finally:
        writer.stop()
    lines = [(r.name, r.levelno, r.getMessage().split(": ", 1)[1]) for r in about_web()]
    assert lines == [
        (LOGGER, logging.INFO, "attempt 1"),
        (
            "mcruntime.controller",
            logging.ERROR,
            "reconcile failed (retry 1): RuntimeError: the quota service did not answer",
        ),
        (LOGGER, logging.INFO, "attempt 2"),
        ("mcruntime.controller", logging.DEBUG, "reconciled (success)"),
    ]
    fields = [
        {f: getattr(r, f) for f in ("cluster", "controller", "namespace", "object_name")}
        for r in about_web()
    ]
    want = {"cluster": "eu-1", "controller": "quotas", "namespace": "default", "object_name": "web"}
    assert fields == [want] * 4
    first, failed, second, done = (r.reconcile_id for r in about_web())  # type: ignore[attr-defined]
    assert first == failed and second == done and first != second
    engaged = [
        r for r in caplog.records if r.getMessage() == "controller=quotas cluster=eu-1 engaged"
    ]
    assert [(r.cluster, r.controller) for r in engaged] == [("eu-1", "quotas")]  # type: ignore[attr-defined]
