"""Client.apply / apply_status: server-side apply through the embedded server."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, ClassVar

import pytest
from kubernetes.client import V1ConfigMap, V1ObjectMeta

from mcruntime.client import Client, Model, ObjectMeta, Resource
from mcruntime.cluster import Cluster
from mcruntime.envtest import APIServer
from mcruntime.errors import (
    APIError,
    Conflict,
    DeadlineExceeded,
    FieldConflict,
    NotFound,
    ObjectNotTyped,
)

pytestmark = pytest.mark.timeout(30)


def cm(name: str, ns: str, data: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns},
        "data": data,
    }


def owners(obj: dict[str, Any]) -> dict[str, set[str]]:
    """Manager -> the ``data`` keys it owns."""
    return {
        e["manager"]: {k[2:] for k in e["fieldsV1"].get("f:data", {}) if k != "."}
        for e in obj["metadata"]["managedFields"]
    }


def test_apply_creates_then_updates_and_removes_what_it_stops_applying(
    client: Client, ns: str
) -> None:
    created = client.apply(cm("a", ns, {"x": "1", "y": "2"}), field_manager="me")
    assert created["data"] == {"x": "1", "y": "2"}
    updated = client.apply(cm("a", ns, {"x": "3"}), field_manager="me", timeout=5)
    assert updated["data"] == {"x": "3"}
    assert owners(updated) == {"me": {"x"}}


def test_conflict_names_fields_and_managers_and_force_takes_them(client: Client, ns: str) -> None:
    client.apply(cm("b", ns, {"x": "1", "y": "1"}), field_manager="first")
    with pytest.raises(Conflict) as info:
        client.apply(cm("b", ns, {"x": "2", "y": "2"}), field_manager="second")
    err = info.value
    assert err.field_conflicts == [
        FieldConflict(".data.x", "first", 'conflict with "first"'),
        FieldConflict(".data.y", "first", 'conflict with "first"'),
    ]
    assert '"first"' in str(err) and ".data.x" in str(err) and ".data.y" in str(err)
    forced = client.apply(cm("b", ns, {"x": "2"}), field_manager="second", force=True)
    assert forced["data"] == {"x": "2", "y": "1"}
    assert owners(forced) == {"first": {"y"}, "second": {"x"}}


def test_a_conflict_with_an_update_names_the_updater(client: Client, ns: str) -> None:
    client.create(cm("c", ns, {"x": "1"}))
    client.patch("v1/ConfigMap", "c", {"data": {"x": "2"}}, ns)
    with pytest.raises(Conflict) as info:
        client.apply(cm("c", ns, {"x": "3"}), field_manager="applier")
    [conflict] = info.value.field_conflicts
    assert conflict.field == ".data.x"
    assert conflict.manager  # the user agent of the kubernetes client, as the server names it
    assert conflict.message.startswith(f'conflict with "{conflict.manager}" using v1')


def test_apply_accepts_kubernetes_models(client: Client, ns: str) -> None:
    body = V1ConfigMap(
        api_version="v1",
        kind="ConfigMap",
        metadata=V1ObjectMeta(name="typed", namespace=ns),
        data={"k": "v"},
    )
    out = client.apply(body, field_manager="me")
    assert isinstance(out, V1ConfigMap) and out.data == {"k": "v"}
    # what a get returns carries managedFields; applying it again is allowed and a no-op
    again = client.apply(client.get(V1ConfigMap, "typed", ns), field_manager="me")
    assert again.metadata.resource_version == out.metadata.resource_version


class GizmoSpec(Model):
    size: int = 0


class GizmoStatus(Model):
    phase: str = ""


class Widget(Resource):
    api_version: ClassVar[str] = "example.com/v1"
    kind: ClassVar[str] = "Widget"
    spec: GizmoSpec | None = None
    status: GizmoStatus | None = None


def test_apply_and_apply_status_with_a_pydantic_resource(
    client: Client, ns: str, widgets: str
) -> None:
    meta = ObjectMeta(name="w", namespace=ns)
    created = client.apply(Widget(metadata=meta, spec=GizmoSpec(size=2)), field_manager="spec")
    assert isinstance(created, Widget) and created.spec == GizmoSpec(size=2)
    done = client.apply_status(
        Widget(metadata=meta, status=GizmoStatus(phase="Ready")), field_manager="status"
    )
    assert done.status == GizmoStatus(phase="Ready")
    assert done.spec == GizmoSpec(size=2)
    raw = client.get(widgets, "w", ns)
    entries = {(e["manager"], e.get("subresource", "")) for e in raw["metadata"]["managedFields"]}
    assert entries == {("spec", ""), ("status", "status")}


class PaintSpec(Model):
    size: int = 0
    color: str = ""


class Painted(Resource):
    api_version: ClassVar[str] = "example.com/v1"
    kind: ClassVar[str] = "Widget"
    spec: PaintSpec = PaintSpec()


def test_a_resource_applies_only_the_fields_it_set_not_its_model_defaults(
    client: Client, ns: str, widgets: str
) -> None:
    # as Go's apply configurations: a default sent would be owned by the controller, conflict
    # with the value another manager applied, and overwrite it when forced
    body = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}
    client.apply(
        {**body, "metadata": {"name": "w", "namespace": ns}, "spec": {"size": 5}},
        field_manager="user",
    )
    meta = ObjectMeta(name="w", namespace=ns)
    done = client.apply(Painted(metadata=meta, spec=PaintSpec(color="red")), field_manager="ctl")
    assert done.spec == PaintSpec(size=5, color="red")
    raw = client.get(widgets, "w", ns)
    (ctl,) = [e for e in raw["metadata"]["managedFields"] if e["manager"] == "ctl"]
    assert ctl["fieldsV1"]["f:spec"] == {"f:color": {}}
    # a value set to its default is sent: the controller means it
    client.apply(
        Painted(metadata=meta, spec=PaintSpec(color="red", size=0)), field_manager="ctl", force=True
    )
    assert client.get(widgets, "w", ns)["spec"] == {"size": 0, "color": "red"}


def test_apply_needs_a_field_manager_and_a_name(client: Client, ns: str) -> None:
    with pytest.raises(ValueError, match="field_manager"):
        client.apply(cm("d", ns, {}), field_manager="")
    with pytest.raises(ValueError, match="metadata.name"):
        client.apply(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": ns}},
            field_manager="me",
        )


def test_apply_on_a_hung_server_ends_at_its_deadline(
    make_envtest_server: Callable[..., APIServer],
) -> None:
    server = make_envtest_server("hung")
    cluster = Cluster.from_kubeconfig(server.kubeconfig(), name="hung")
    try:
        cluster.client.apply(cm("warm", "default", {}), field_manager="me")  # discovery done
        server.freeze()
        began = time.monotonic()
        with pytest.raises(DeadlineExceeded):
            cluster.client.apply(cm("x", "default", {"a": "1"}), field_manager="me", timeout=0.4)
        assert time.monotonic() - began < 1.5
    finally:
        cluster.stop()


def test_the_async_client_applies(client: Client, ns: str) -> None:
    import asyncio

    from mcruntime.client import AsyncClient

    aclient = AsyncClient(client)
    out = asyncio.run(aclient.apply(cm("async", ns, {"k": "v"}), field_manager="me", timeout=5))
    assert out["data"] == {"k": "v"}


def test_applying_a_misspelt_field_raises_at_once_naming_it(client: Client, ns: str) -> None:
    # as on a real cluster: no retry, no object, the field named (envtest once dropped it)
    bad = cm("typo", ns, {"x": "1"})
    bad["dataa"] = {"y": "2"}
    began = time.monotonic()
    with pytest.raises(APIError) as err:
        client.apply(bad, field_manager="me", timeout=10)
    assert time.monotonic() - began < 2
    assert err.value.status == 500
    assert ".dataa: field not declared in schema" in str(err.value)
    with pytest.raises(NotFound):
        client.api_reader.get("v1/ConfigMap", "typo", ns)


def test_an_object_its_class_does_not_fit_is_named_in_the_error(
    client: Client, ns: str, widgets: str
) -> None:
    # written by another client (or another version of the model): one such object failed
    # every typed list with pydantic's bare ValidationError, naming nothing
    meta = {"name": "odd", "namespace": ns}
    client.create(
        {
            "apiVersion": "example.com/v1",
            "kind": "Widget",
            "metadata": meta,
            "spec": {"size": "big"},
        }
    )
    said = (
        f"[cluster c1] example.com/v1/Widget {ns}/odd does not fit Painted: spec.size: "
        "Input should be a valid integer, unable to parse string as an integer"
    )
    with pytest.raises(ObjectNotTyped) as err:
        client.get(Painted, "odd", ns)
    assert str(err.value) == said and err.value.cluster_name == "c1"
    assert isinstance(err.value, ValueError) and err.value.errors[0]["loc"] == ("spec", "size")
    with pytest.raises(ObjectNotTyped) as err:
        client.list(Painted, ns)
    assert str(err.value) == said
