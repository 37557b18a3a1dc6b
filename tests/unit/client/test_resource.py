"""Typed views: pydantic Resources and kubernetes models convert to and from plain dicts."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Any, ClassVar

from kubernetes.client import V1ConfigMap, V1ObjectMeta
from pydantic import ConfigDict, PlainSerializer, SecretStr

from mcruntime.client import Model, ObjectMeta, Resource
from mcruntime.client._resource import gvk_of_object, to_dict, to_typed


class WidgetSpec(Model):
    replicas: int = 1
    display_name: str | None = None


class Widget(Resource):
    api_version: ClassVar[str] = "example.com/v1"
    kind: ClassVar[str] = "Widget"
    spec: WidgetSpec = WidgetSpec()
    status: dict[str, Any] | None = None


def test_resource_round_trip_uses_camel_case_and_keeps_unknown_fields() -> None:
    data = {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w", "namespace": "ns", "resourceVersion": "7", "managedFields": []},
        "spec": {"replicas": 3, "displayName": "W", "future": True},
    }
    w = Widget.from_dict(data)
    assert w.metadata.name == "w" and w.metadata.resource_version == "7"
    assert w.spec.replicas == 3 and w.spec.display_name == "W"
    out = w.to_dict()
    assert out["apiVersion"] == "example.com/v1" and out["kind"] == "Widget"
    assert out["spec"] == {"replicas": 3, "displayName": "W", "future": True}
    assert out["metadata"]["managedFields"] == []
    assert "status" not in out


def test_resource_built_in_python_serializes_for_the_api() -> None:
    w = Widget(metadata=ObjectMeta(name="w", labels={"a": "b"}), spec=WidgetSpec(display_name="x"))
    assert to_dict(w) == {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w", "labels": {"a": "b"}},
        "spec": {"replicas": 1, "displayName": "x"},
    }
    assert str(gvk_of_object(w)) == "example.com/v1/Widget"


def test_model_objects_convert_both_ways() -> None:
    cm = V1ConfigMap(metadata=V1ObjectMeta(name="c", namespace="n"), data={"k": "v"})
    d = to_dict(cm)
    assert d["metadata"] == {"name": "c", "namespace": "n"} and d["data"] == {"k": "v"}
    assert str(gvk_of_object(cm)) == "v1/ConfigMap"
    back = to_typed({"apiVersion": "v1", "kind": "ConfigMap", **d}, V1ConfigMap)
    assert isinstance(back, V1ConfigMap) and back.metadata is not None
    assert back.metadata.name == "c" and back.data == {"k": "v"}


def test_dicts_pass_through() -> None:
    obj = {"apiVersion": "apps/v1", "kind": "Deployment"}
    assert to_dict(obj) is obj
    assert to_typed(obj, None) is obj
    assert str(gvk_of_object(obj)) == "apps/v1/Deployment"


class LabelledSpec(Model):
    replicas: int = 1
    target_labels: dict[str, str] = {}
    parts: list[WidgetSpec] = []


class Labelled(Resource):
    api_version: ClassVar[str] = "example.com/v1"
    kind: ClassVar[str] = "Labelled"
    spec: LabelledSpec = LabelledSpec()


def test_resource_read_from_the_api_writes_back_only_what_it_was_read_with() -> None:
    data = {
        "apiVersion": "example.com/v1",
        "kind": "Labelled",
        "metadata": {"name": "w", "resourceVersion": "7"},
        "spec": {"replicas": 2, "parts": [{"displayName": "p"}]},
    }
    w = Labelled.from_dict(data)
    assert w.spec.target_labels == {} and w.spec.parts[0].replicas == 1  # defaults still readable
    assert w.to_dict() == data


def test_resource_read_from_the_api_writes_fields_assigned_or_changed_in_place() -> None:
    w = Labelled.from_dict({"apiVersion": "example.com/v1", "kind": "Labelled", "metadata": {}})
    assert w.to_dict() == {"apiVersion": "example.com/v1", "kind": "Labelled", "metadata": {}}
    w.metadata.finalizers = ["example.com/f"]
    w.spec.target_labels["a"] = "b"  # a default filled in place
    out = w.to_dict()
    assert out["metadata"] == {"finalizers": ["example.com/f"]}
    assert out["spec"] == {"targetLabels": {"a": "b"}}
    w.spec.replicas = 1  # assigned, even if equal to the default
    assert w.to_dict()["spec"] == {"replicas": 1, "targetLabels": {"a": "b"}}


class Color:
    def __init__(self, name: str) -> None:
        self.name = name


class PaletteSpec(Model):
    model_config = ConfigDict(arbitrary_types_allowed=True, ser_json_timedelta="float")

    color: Annotated[Color, PlainSerializer(lambda c: f"#{c.name}", when_used="json")]
    every: timedelta = timedelta(seconds=3)
    keys: list[SecretStr] = []
    zones: set[str] = set()


class Palette(Resource):
    api_version: ClassVar[str] = "example.com/v1"
    kind: ClassVar[str] = "Palette"
    spec: PaletteSpec


def test_a_resource_is_written_as_its_json_with_secret_values_and_sorted_sets() -> None:
    spec = PaletteSpec(color=Color("red"), keys=[SecretStr("k")], zones={"b", "c", "a"})
    assert Palette(spec=spec).to_dict()["spec"] == {
        "color": "#red",  # the model's JSON serialisers and settings apply
        "every": 3.0,
        "keys": ["k"],
        "zones": ["a", "b", "c"],
    }


def test_metadata_is_written_without_nulls_even_assigned_ones() -> None:
    w = Widget.from_dict({"metadata": {"name": "w", "labels": {"a": "b"}}, "spec": {}})
    w.metadata.labels = None
    w.metadata.managed_fields = None  # not declared: an extra
    assert w.to_dict()["metadata"] == {"name": "w"}
