"""A controller for a CRD named by a pydantic Resource class: typed reads and typed writes."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

import pytest
from kubernetes.client import V1ConfigMap

import mcruntime
from mcruntime import Manager, Request, Resource
from mcruntime.client import Model
from mcruntime.cluster import Cluster
from mcruntime.envtest import wait_for
from mcruntime.errors import NotFound
from tests.integration.controller._controller_helpers import (
    WIDGET_KIND,
    Calls,
    serves,
    widget,
    widget_crd,
)

pytestmark = pytest.mark.timeout(30)


class WidgetSpec(Model):
    size: int = 0
    color: str = ""


class WidgetStatus(Model):
    observed_size: int | None = None


class MyWidget(Resource):
    api_version: ClassVar[str] = "example.com/v1"
    kind: ClassVar[str] = "Widget"
    spec: WidgetSpec = WidgetSpec()
    status: WidgetStatus | None = None


def test_typed_resource_controller_for_a_crd(
    kube: Cluster, make_manager: Callable[..., Manager]
) -> None:
    kube.client.create(widget_crd())
    wait_for(lambda: serves(kube, WIDGET_KIND), what="Widget served")
    mgr = make_manager()
    calls = Calls()
    seen: list[MyWidget] = []

    def reconcile(req: Request) -> None:
        client = mgr.get_cluster(req.cluster_name).client
        try:
            w = client.get(MyWidget, req.name, req.namespace)
        except NotFound:
            return
        assert isinstance(w, MyWidget)
        seen.append(w)
        if w.status is None or w.status.observed_size != w.spec.size:
            w.status = WidgetStatus(observed_size=w.spec.size)
            updated = client.update_status(w)
            assert isinstance(updated, MyWidget)
        calls.record(req)

    mcruntime.controller_managed_by(mgr).for_(MyWidget).complete(reconcile)
    mgr.start()
    assert [c.name for c in mgr.controllers] == ["widget"], "named after the kind by default"

    kube.client.create(
        MyWidget(metadata={"name": "w1", "namespace": "default"}, spec=WidgetSpec(size=3))
    )
    kube.client.create(widget("w2", size=5))

    def observed(name: str) -> int | None:
        obj = kube.api_reader.get(WIDGET_KIND, name, "default")
        return (obj.get("status") or {}).get("observedSize")

    wait_for(
        lambda: observed("w1") == 3 and observed("w2") == 5,
        what="status written from typed objects",
    )
    kube.client.patch(WIDGET_KIND, "w1", {"spec": {"size": 4}}, "default")
    wait_for(lambda: observed("w1") == 4, what="status follows a spec change")
    typed = [w for w in seen if w.metadata.name == "w2"]
    assert typed and typed[0].spec.color == "red" and typed[0].metadata.namespace == "default"


def test_model_class_kind_reconciles_configmaps(
    kube: Cluster, make_manager: Callable[..., Manager]
) -> None:
    mgr = make_manager()
    calls = Calls()
    got: list[V1ConfigMap] = []

    def reconcile(req: Request) -> None:
        got.append(mgr.get_cluster("").client.get(V1ConfigMap, req.name, req.namespace))
        calls.record(req)

    mcruntime.controller_managed_by(mgr).for_(V1ConfigMap).complete(reconcile)
    mgr.start()
    kube.client.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "modelled", "namespace": "default"},
            "data": {"a": "b"},
        }
    )
    calls.wait_count(1, "modelled")
    (cm,) = [c for c in got if c.metadata.name == "modelled"]
    assert isinstance(cm, V1ConfigMap) and cm.data == {"a": "b"}
