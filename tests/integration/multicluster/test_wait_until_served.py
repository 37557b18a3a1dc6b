"""``wait_until_served``: a provider waits for the CRD of its clusters' kind on the management cluster."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest

from mcruntime.cluster import Cluster
from mcruntime.envtest import wait_for
from mcruntime.multicluster import wait_until_served

pytestmark = pytest.mark.timeout(60)

log = logging.getLogger("tests.wait_until_served")


def crd(*versions: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "fleets.example.com"},
        "spec": {
            "group": "example.com",
            "names": {"kind": "Fleet", "plural": "fleets"},
            "scope": "Namespaced",
            "versions": [
                {
                    "name": v,
                    "served": True,
                    "storage": i == 0,
                    "schema": {"openAPIV3Schema": {"type": "object"}},
                }
                for i, v in enumerate(versions)
            ],
        },
    }


def test_the_first_kind_served_is_found_without_calling_it_missing(
    make_envtest_server: Any,
) -> None:
    # the newer version is not served, the older one is: the kind is there, nothing is missing
    server = make_envtest_server("mgmt")
    cluster = Cluster.from_kubeconfig(server.kubeconfig(), name="management")
    missing: list[int] = []
    try:
        cluster.uncached_client.create(crd("v1"))
        mapping = wait_until_served(
            cluster,
            ["example.com/v2/Fleet", "example.com/v1/Fleet"],
            threading.Event(),
            missing="no Fleet",
            log=log,
            provider="test",
            on_missing=lambda: missing.append(1),
        )
    finally:
        cluster.stop()
    assert mapping is not None and mapping.gvk.version == "v1"
    assert missing == []


def test_a_kind_not_served_is_said_once_and_found_when_its_crd_arrives(
    make_envtest_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=log.name)
    server = make_envtest_server("mgmt")
    cluster = Cluster.from_kubeconfig(server.kubeconfig(), name="management")
    missing = threading.Event()
    found: list[Any] = []
    stop = threading.Event()
    waiter = threading.Thread(
        target=lambda: found.append(
            wait_until_served(
                cluster,
                ["example.com/v1/Fleet"],
                stop,
                missing="no Fleet; install it",
                log=log,
                provider="test",
                on_missing=missing.set,
            )
        ),
        name="test/wait-until-served",
    )
    waiter.start()
    try:
        assert missing.wait(10)
        wait_for(lambda: "provider=test no Fleet; install it; waiting" in caplog.text)
        cluster.uncached_client.create(crd("v1"))
        waiter.join(30)
        assert found and found[0] is not None and found[0].gvk.kind == "Fleet"
    finally:
        stop.set()
        waiter.join(10)
        cluster.stop()
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "provider=test the management cluster serves example.com/v1/Fleet now" in caplog.text
