"""``request_logger``: log lines inside a reconcile name its cluster and request."""

from __future__ import annotations

import logging
import threading

import pytest

from mcruntime.reconcile import (
    Request,
    RequestLogger,
    current_reconcile_id,
    reconciling,
    request_logger,
)

LOGGER = "tests.reconcile.request_logger"


def test_inside_a_reconcile_lines_name_the_cluster_and_request(
    caplog: pytest.LogCaptureFixture,
) -> None:
    log = request_logger(LOGGER)
    assert isinstance(log, RequestLogger) and log.logger is logging.getLogger(LOGGER)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        log.info("outside %d", 1)
        with reconciling(Request("default", "web", "eu-1")):
            log.info("reserved %d", 10, extra={"quota": 10})
        with reconciling(Request("", "node-1")):  # cluster-scoped, in the local cluster
            log.warning("cordoned")
    first, second, third = caplog.records
    assert first.getMessage() == "outside 1" and not hasattr(first, "cluster")
    assert second.getMessage() == "cluster=eu-1 request=default/web: reserved 10"
    assert (second.cluster, second.request, second.quota) == ("eu-1", "default/web", 10)  # type: ignore[attr-defined]
    assert third.getMessage() == "cluster=local request=node-1: cordoned"
    assert (third.cluster, third.request) == ("local", "node-1")  # type: ignore[attr-defined]


def test_one_module_level_logger_serves_concurrent_reconciles(
    caplog: pytest.LogCaptureFixture,
) -> None:
    log = request_logger(logging.getLogger(LOGGER))
    started = threading.Barrier(2)

    def reconcile(cluster: str) -> None:
        with reconciling(Request("default", "web", cluster)):
            started.wait(5)  # both inside their reconcile at once
            log.info("done")

    with caplog.at_level(logging.INFO, logger=LOGGER):
        threads = [threading.Thread(target=reconcile, args=(c,)) for c in ("eu-1", "us-1")]
        for t in threads:
            t.start()
        for t in threads:
            t.join(5)
    assert sorted(r.getMessage() for r in caplog.records) == [
        "cluster=eu-1 request=default/web: done",
        "cluster=us-1 request=default/web: done",
    ]


@pytest.mark.parametrize("cluster", ["team-100%-prod", "ctx%sprod", "a%(x)s"])
def test_a_cluster_name_with_a_percent_sign_keeps_every_line(
    caplog: pytest.LogCaptureFixture, cluster: str
) -> None:
    """The name was pasted into the %-format string: a line with arguments was lost
    (``--- Logging error ---``) or had its arguments shifted. Cluster names come from
    kubeconfig contexts, files and ``ClustersProvider.add``, none of which refuse ``%``."""
    log = request_logger(LOGGER)
    with (
        caplog.at_level(logging.INFO, logger=LOGGER),
        reconciling(Request("default", "web", cluster)),
    ):
        log.info("reserved quota %d of %s", 10, "cpu")
        log.info("100% done")  # no arguments: not formatted, as with any logger
    assert [r.getMessage() for r in caplog.records] == [
        f"cluster={cluster} request=default/web: reserved quota 10 of cpu",
        f"cluster={cluster} request=default/web: 100% done",
    ]
    assert {(r.filename, r.funcName) for r in caplog.records} == {
        ("test_request_logger.py", "test_a_cluster_name_with_a_percent_sign_keeps_every_line")
    }


def test_its_records_carry_the_fields_of_the_controller_s_own_lines(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """As controller-runtime's ``log.FromContext(ctx)``: controller, object and reconcile id."""
    log = request_logger(LOGGER)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        with reconciling(
            Request("default", "web", "eu-1"), controller="configmaps", reconcile_id="r-1"
        ):
            assert current_reconcile_id() == "r-1"
            log.info("reserved")
        with reconciling(Request("", "node-1")):  # a test's own block: no controller
            log.info("cordoned")
    first, second = caplog.records
    fields = ("cluster", "controller", "namespace", "object_name", "request", "reconcile_id")
    assert {f: getattr(first, f) for f in fields} == {
        "cluster": "eu-1",
        "controller": "configmaps",
        "namespace": "default",
        "object_name": "web",
        "request": "default/web",
        "reconcile_id": "r-1",
    }
    assert not hasattr(second, "controller")
    assert (second.namespace, second.object_name, second.request) == ("", "node-1", "node-1")  # type: ignore[attr-defined]
    assert second.reconcile_id not in ("", "r-1")  # type: ignore[attr-defined]


def test_each_reconcile_gets_its_own_id_and_none_outside() -> None:
    assert current_reconcile_id() is None
    req = Request("default", "web")
    seen: list[str | None] = []

    @reconciling(req)
    def reconcile() -> None:
        seen.append(current_reconcile_id())

    reconcile()
    reconcile()
    with reconciling(req):
        seen.append(current_reconcile_id())
    assert None not in seen and len(set(seen)) == 3
    assert current_reconcile_id() is None
