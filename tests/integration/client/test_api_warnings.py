"""The API server's warnings reach the controller's log: each distinct one once per cluster,
named, as kubectl prints them. A field the CRD does not know is dropped with a warning; a
deprecated version is warned on every request, lists and watches included."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from mcruntime import Cluster
from mcruntime.envtest import APIServer, wait_for

pytestmark = pytest.mark.timeout(60)

GROUP = "warned.mcruntime.io"
SCHEMA = {
    "openAPIV3Schema": {
        "type": "object",
        "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer"}}}},
    }
}


def sprocket(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/v2",
        "kind": "Sprocket",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }


def test_each_warning_is_logged_once_per_cluster(
    envtest_server: APIServer, caplog: pytest.LogCaptureFixture
) -> None:
    cluster = Cluster.from_kubeconfig(envtest_server.kubeconfig(), name="warned")
    cluster.client.create(
        {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": f"sprockets.{GROUP}"},
            "spec": {
                "group": GROUP,
                "names": {"plural": "sprockets", "singular": "sprocket", "kind": "Sprocket"},
                "scope": "Namespaced",
                "versions": [
                    {"name": "v2", "served": True, "storage": True, "schema": SCHEMA},
                    {"name": "v1", "served": True, "storage": False, "deprecated": True,
                     "schema": SCHEMA},
                ],
            },
        }
    )  # fmt: skip
    wait_for(lambda: cluster.rest_mapper.reset() or _served(cluster), 10, "the CRD served")
    caplog.set_level(logging.WARNING, logger="mcruntime.client")
    for i in range(3):
        created = cluster.client.create(sprocket(f"s{i}", size=i, colour="red"))
        assert created["spec"] == {"size": i}  # dropped by the server
    for _ in range(2):
        cluster.rest.request("GET", f"/apis/{GROUP}/v1/namespaces/default/sprockets")
    stream = cluster.rest.watch(
        f"/apis/{GROUP}/v1/namespaces/default/sprockets", query={"timeoutSeconds": 1}
    )
    stream.close()
    said = [r.getMessage() for r in caplog.records if r.name == "mcruntime.client"]
    assert said == [
        'cluster=warned the API server warns: unknown field "spec.colour"',
        f"cluster=warned the API server warns: {GROUP}/v1 Sprocket is deprecated; "
        f"use {GROUP}/v2 Sprocket",
    ]
    cluster.stop()


def _served(cluster: Cluster) -> bool:
    try:
        cluster.rest.request("GET", f"/apis/{GROUP}/v2/namespaces/default/sprockets")
    except Exception:
        return False
    return True
