"""A CRD generated from a pydantic model: installed, established, and enforcing its schema.

The schema's rules (minimum, enum, pattern, required, int-or-string, defaults,
pruning, preserved unknown fields) are checked by the server the way
kube-apiserver does: the same Status, field paths and messages.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from typing import Annotated, Any, ClassVar, Literal

import pytest
from kubernetes import client
from kubernetes.client import ApiClient
from pydantic import Field

from mcruntime.client import Model, Resource
from mcruntime.cluster import Cluster
from mcruntime.crd import CRDOptions, ListType, PrinterColumn, generate_crd, install_crds
from mcruntime.envtest.pytest_plugin import KubeBackend

from ._support import crd_condition, delete_crd, raises_status, raw, unique

pytestmark = pytest.mark.timeout(60)


class Mode(enum.StrEnum):
    """How changes roll out."""

    FAST = "Fast"
    SAFE = "Safe"


class Port(Model):
    name: str
    port: int = Field(ge=1, le=65535)
    target_port: int | str = 80


class GizmoSpec(Model):
    replicas: int = Field(1, ge=0)
    mode: Mode = Mode.SAFE
    image: str = Field(pattern=r"^[a-z0-9./:-]+$")
    ports: Annotated[list[Port], ListType("map", keys=("name",))] = []
    template: dict[str, Any] = {}
    tags: set[str] | None = None
    step: int | None = Field(None, multiple_of=5)


class GizmoStatus(Model):
    phase: Literal["Pending", "Ready"] | None = None


def gizmo_class(group: str) -> type[Resource]:
    class Gizmo(Resource):
        """A gizmo of the conformance suite."""

        api_version: ClassVar[str] = f"{group}/v1"
        kind: ClassVar[str] = "Gizmo"
        crd_options: ClassVar[CRDOptions] = CRDOptions(
            short_names=("gz",),
            categories=("conformance",),
            printer_columns=(
                PrinterColumn(name="Replicas", json_path=".spec.replicas"),
                PrinterColumn(name="Phase", json_path=".status.phase"),
            ),
        )
        spec: GizmoSpec
        status: GizmoStatus | None = None

    return Gizmo


@pytest.fixture(scope="module")
def gizmos(kube_backend: KubeBackend) -> Iterator[dict[str, str]]:
    """The Gizmo CRD of a fresh group, installed with install_crds and deleted afterwards."""
    group = f"{unique('gen')}.conformance.mcruntime.io"
    crd = generate_crd(gizmo_class(group))
    cluster = Cluster.from_kubeconfig(kube_backend.kubeconfig(), context=kube_backend.context)
    try:
        (installed,) = install_crds(cluster, [crd], timeout=30)
        yield {"group": group, "plural": "gizmos", "name": crd["metadata"]["name"], **installed}
    finally:
        with kube_backend.api_client() as api:
            delete_crd(api, crd["metadata"]["name"])
        cluster.stop()


def gizmo(group: str, name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{group}/v1",
        "kind": "Gizmo",
        "metadata": {"name": name},
        "spec": {"image": "busybox", **spec},
    }


def test_generated_crd_is_established_and_served_with_its_names(
    api: ApiClient, gizmos: dict[str, Any]
) -> None:
    assert crd_condition(gizmos, "Established") == "True"
    assert crd_condition(gizmos, "NamesAccepted") == "True"
    group = gizmos["group"]
    resources = {r["name"]: r for r in raw(api, "GET", f"/apis/{group}/v1").json()["resources"]}
    assert resources["gizmos"]["kind"] == "Gizmo"
    assert resources["gizmos"]["shortNames"] == ["gz"]
    assert resources["gizmos"]["categories"] == ["conformance"]
    assert "gizmos/status" in resources
    version = gizmos["spec"]["versions"][0]
    assert [c["name"] for c in version["additionalPrinterColumns"]] == ["Replicas", "Phase"]


def test_server_fills_the_model_defaults_and_prunes_unknown_fields(
    custom: client.CustomObjectsApi, ns: str, gizmos: dict[str, Any]
) -> None:
    g = gizmos["group"]
    body = gizmo(g, "defaults", ports=[{"name": "http", "port": 8080}], unknown="dropped")
    body["spec"]["template"] = {"anything": {"goes": [1, "x"]}}
    created = custom.create_namespaced_custom_object(g, "v1", ns, "gizmos", body)
    assert created["spec"] == {
        "image": "busybox",
        "replicas": 1,
        "mode": "Safe",
        "ports": [{"name": "http", "port": 8080, "targetPort": 80}],
        "template": {"anything": {"goes": [1, "x"]}},
    }


@pytest.mark.parametrize(
    ("spec", "reason", "field", "message"),
    [
        (
            {"replicas": -1},
            "FieldValueInvalid",
            "spec.replicas",
            "Invalid value: -1: spec.replicas in body should be greater than or equal to 0",
        ),
        (
            {"mode": "Turbo"},
            "FieldValueNotSupported",
            "spec.mode",
            'Unsupported value: "Turbo": supported values: "Fast", "Safe"',
        ),
        (
            {"image": "Not An Image"},
            "FieldValueInvalid",
            "spec.image",
            "Invalid value: \"Not An Image\": spec.image in body should match '^[a-z0-9./:-]+$'",
        ),
        (
            {"ports": [{"name": "http", "port": 0}]},
            "FieldValueInvalid",
            "spec.ports[0].port",
            "Invalid value: 0: spec.ports[0].port in body should be greater than or equal to 1",
        ),
        ({"ports": [{"port": 80}]}, "FieldValueRequired", "spec.ports[0].name", "Required value"),
        (
            {"step": 7},
            "FieldValueInvalid",
            "spec.step",
            "Invalid value: 7: spec.step in body should be a multiple of 5",
        ),
        (
            {"tags": ["a", "b", "a"]},
            "FieldValueDuplicate",
            "spec.tags[2]",
            'Duplicate value: "a"',
        ),
    ],
)
def test_objects_violating_the_model_are_invalid_with_field_paths(
    custom: client.CustomObjectsApi,
    ns: str,
    gizmos: dict[str, Any],
    spec: dict[str, Any],
    reason: str,
    field: str,
    message: str,
) -> None:
    g = gizmos["group"]
    with raises_status(422, "Invalid") as status:
        custom.create_namespaced_custom_object(g, "v1", ns, "gizmos", gizmo(g, unique(), **spec))
    causes = status["details"]["causes"]
    assert {"reason": reason, "field": field, "message": message} in causes, causes
    assert f"{field}: {message}" in status["message"]


def test_a_missing_required_field_and_a_wrong_int_or_string_are_invalid(
    custom: client.CustomObjectsApi, ns: str, gizmos: dict[str, Any]
) -> None:
    g = gizmos["group"]
    body = gizmo(g, unique())
    del body["spec"]["image"]
    with raises_status(422, "Invalid") as status:
        custom.create_namespaced_custom_object(g, "v1", ns, "gizmos", body)
    assert {
        "reason": "FieldValueRequired",
        "field": "spec.image",
        "message": "Required value",
    } in status["details"]["causes"]

    bad_port = gizmo(g, unique(), ports=[{"name": "a", "port": 1, "targetPort": 1.5}])
    with raises_status(422, "Invalid") as status:
        custom.create_namespaced_custom_object(g, "v1", ns, "gizmos", bad_port)
    fields = {c["field"] for c in status["details"]["causes"]}
    assert fields == {"spec.ports[0].targetPort"}, status
    for good in (8080, "http"):
        ok = gizmo(g, unique(), ports=[{"name": "a", "port": 1, "targetPort": good}])
        created = custom.create_namespaced_custom_object(g, "v1", ns, "gizmos", ok)
        assert created["spec"]["ports"][0]["targetPort"] == good


def test_a_new_storage_version_joins_the_stored_versions(
    kube_backend: KubeBackend, api: ApiClient
) -> None:
    group = f"{unique('ver')}.conformance.mcruntime.io"

    class ThingV1(Resource):
        api_version: ClassVar[str] = f"{group}/v1"
        kind: ClassVar[str] = "Thing"
        spec: dict[str, Any]

    class ThingV1Served(ThingV1):
        crd_options: ClassVar[CRDOptions] = CRDOptions(storage=False)

    class ThingV2(ThingV1):
        api_version: ClassVar[str] = f"{group}/v2"
        crd_options: ClassVar[CRDOptions] = CRDOptions(storage=True)

    cluster = Cluster.from_kubeconfig(kube_backend.kubeconfig(), context=kube_backend.context)
    name = f"things.{group}"
    try:
        (v1,) = install_crds(cluster, [ThingV1], timeout=30)
        assert v1["status"]["storedVersions"] == ["v1"]
        (both,) = install_crds(cluster, [generate_crd(ThingV1Served, ThingV2)], timeout=30)
        assert [(v["name"], v["storage"]) for v in both["spec"]["versions"]] == [
            ("v1", False),
            ("v2", True),
        ]
        assert both["status"]["storedVersions"] == ["v1", "v2"]
        served = raw(api, "GET", f"/apis/{group}").json()
        assert served["preferredVersion"]["version"] == "v2"
    finally:
        delete_crd(api, name)
        cluster.stop()
