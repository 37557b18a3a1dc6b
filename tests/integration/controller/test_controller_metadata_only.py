"""Controllers that watch metadata only: ``for_``/``owns``/``watches(..., metadata_only=True)``.

A controller that needs labels, annotations, owners or finalizers of Secrets
(or Pods) does not need their data: the cache keeps metadata alone, and the
reconciler reads it with ``client.get(..., metadata_only=True)``.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import pytest

import mcruntime
from mcruntime import Manager, Request, controllerutil
from mcruntime.client import MetadataOnly
from mcruntime.cluster import Cluster
from mcruntime.envtest import wait_for
from mcruntime.errors import NotFound
from mcruntime.handler import enqueue_requests_from_map_func
from tests.integration.controller._controller_helpers import Calls, configmap

pytestmark = pytest.mark.timeout(30)

DATA = base64.b64encode(b"hunter2").decode()


def _secret(name: str, **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": "default", **meta},
        "data": {"password": DATA},
    }


def test_a_controller_for_metadata_only_reads_and_caches_no_data(
    kube: Cluster, make_manager: Callable[..., Manager]
) -> None:
    mgr = make_manager()
    calls = Calls()
    seen: dict[str, dict[str, Any]] = {}

    def reconcile(req: Request) -> None:
        try:
            seen[req.name] = mgr.get_cluster(req.cluster_name).client.get(
                "v1/Secret", req.name, req.namespace, metadata_only=True
            )
        except NotFound:
            seen.pop(req.name, None)
        calls.record(req)

    mcruntime.controller_managed_by(mgr).for_("v1/Secret", metadata_only=True).complete(reconcile)
    mgr.start()
    kube.client.create(_secret("db", labels={"rotate": "weekly"}))
    calls.wait(lambda _: "db" in seen, what="the secret reconciled")
    assert seen["db"]["metadata"]["labels"] == {"rotate": "weekly"}
    assert set(seen["db"]) == {"apiVersion", "kind", "metadata"}

    kube.client.patch("v1/Secret", "db", {"metadata": {"labels": {"rotate": "daily"}}}, "default")
    calls.wait(
        lambda _: seen.get("db", {}).get("metadata", {}).get("labels") == {"rotate": "daily"},
        what="the label change reconciled",
    )
    cache = mgr.get_cluster("").cache
    assert cache.informers() == {}, "a whole-object informer of Secrets was started"
    (inf,) = cache.informers(metadata_only=True).values()
    assert inf.store.list() and all("data" not in o for o in inf.store.list())


def test_owns_metadata_only_re_reconciles_the_owner(
    kube: Cluster, make_manager: Callable[..., Manager]
) -> None:
    mgr = make_manager()
    calls = Calls()
    (
        mcruntime.controller_managed_by(mgr)
        .for_("v1/ConfigMap")
        .owns("v1/Secret", metadata_only=True)
        .complete(calls.record)
    )
    mgr.start()
    cm = kube.client.create(configmap("owner", data={"k": "v"}))
    calls.wait_count(1, "owner")
    ref = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "owner",
        "uid": cm["metadata"]["uid"],
        "controller": True,
    }
    kube.client.create(_secret("owned", ownerReferences=[ref]))
    wait_for(lambda: calls.count("owner") >= 2, what="the owner re-reconciled")
    assert "owned" not in calls.names()
    secrets = mgr.get_cluster("").cache.informers(metadata_only=True)
    assert [str(gvk) for gvk in secrets] == ["v1/Secret"]


def test_watches_metadata_only_with_a_mapping_handler(
    kube: Cluster, make_manager: Callable[..., Manager]
) -> None:
    mgr = make_manager()
    calls = Calls()
    objects: list[dict[str, Any]] = []

    def to_configmap(obj: dict[str, Any]) -> list[Request]:
        objects.append(obj)
        target = obj["metadata"].get("annotations", {}).get("for")
        return [Request("default", target)] if target else []

    (
        mcruntime.controller_managed_by(mgr)
        .for_("v1/ConfigMap")
        .watches(
            "v1/Secret",
            enqueue_requests_from_map_func(to_configmap),
            metadata_only=True,
        )
        .complete(calls.record)
    )
    mgr.start()
    kube.client.create(_secret("tls", annotations={"for": "frontend"}))
    calls.wait_count(1, "frontend")
    assert objects and all(set(o) == {"apiVersion", "kind", "metadata"} for o in objects)
    assert objects[0]["kind"] == "Secret"


def test_a_finalizer_is_added_to_a_metadata_only_read_without_reading_the_data(
    kube: Cluster, make_manager: Callable[..., Manager]
) -> None:
    mgr = make_manager()
    calls = Calls()
    finalizer = "example.com/cleanup"
    results: list[controllerutil.OperationResult] = []

    def reconcile(req: Request) -> None:
        client = mgr.get_cluster(req.cluster_name).client
        secret = client.get("v1/Secret", req.name, req.namespace, metadata_only=True)
        results.append(
            controllerutil.create_or_patch(
                client, secret, lambda s: controllerutil.add_finalizer(s, finalizer)
            )
        )
        assert isinstance(secret, MetadataOnly) and "data" not in secret
        calls.record(req)

    mcruntime.controller_managed_by(mgr).for_("v1/Secret", metadata_only=True).complete(reconcile)
    mgr.start()
    kube.client.create(_secret("guarded"))
    wait_for(
        lambda: (
            finalizer
            in (
                kube.api_reader.get("v1/Secret", "guarded", "default")["metadata"].get("finalizers")
                or ()
            )
        ),
        what="the finalizer added",
    )
    stored = kube.api_reader.get("v1/Secret", "guarded", "default")
    assert stored["data"] == {"password": DATA}
    calls.wait(
        lambda _: controllerutil.OperationResult.UNCHANGED in results,
        what="a reconcile with nothing to do",
    )
    assert controllerutil.OperationResult.UPDATED in results
    assert mgr.get_cluster("").cache.informers() == {}, "a whole-object informer was started"
    patched = kube.client.patch(
        "v1/Secret",
        "guarded",
        {"metadata": {"finalizers": None}},
        "default",
        metadata_only=True,
    )
    assert isinstance(patched, MetadataOnly) and "finalizers" not in patched["metadata"]
