"""CustomResourceDefinitions from Resource classes: names, scope, columns, subresources, versions."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import pytest
from pydantic import Field, create_model

from mcruntime.client import Model, Resource
from mcruntime.crd import (
    CRDError,
    CRDOptions,
    PrinterColumn,
    Scale,
    generate_crd,
    generate_crds,
    load_resource_classes,
    plural_of,
)

pytestmark = pytest.mark.timeout(30)


class BackupSpec(Model):
    schedule: str
    replicas: int = Field(1, ge=0)
    selector: str | None = None


class BackupStatus(Model):
    phase: Literal["Pending", "Running", "Done"] | None = None
    replicas: int = 0
    last_run: str | None = Field(None, json_schema_extra={"format": "date-time"})


class BackupV1(Resource):
    """A scheduled backup."""

    api_version: ClassVar[str] = "ops.example.com/v1"
    kind: ClassVar[str] = "Backup"
    crd_options: ClassVar[CRDOptions] = CRDOptions(
        scope="Cluster",
        short_names=("bk",),
        categories=("all", "ops"),
        printer_columns=(
            PrinterColumn(name="Phase", json_path=".status.phase"),
            PrinterColumn(name="Replicas", json_path=".spec.replicas"),
            PrinterColumn(name="Last run", json_path=".status.lastRun", priority=1),
            PrinterColumn(name="Ready", json_path=".status.conditions[0].status"),
        ),
        scale=Scale(label_selector_path=".spec.selector"),
        storage=True,
    )
    spec: BackupSpec
    status: BackupStatus | None = None


class BackupV1alpha1(Resource):
    api_version: ClassVar[str] = "ops.example.com/v1alpha1"
    kind: ClassVar[str] = "Backup"
    crd_options: ClassVar[CRDOptions] = CRDOptions(
        scope="Cluster",
        short_names=("bk",),
        categories=("all", "ops"),
        deprecation_warning="ops.example.com/v1alpha1 Backup is deprecated; use v1",
        status_subresource=False,
    )
    spec: dict[str, Any]


def test_names_scope_short_names_and_categories() -> None:
    crd = generate_crd(BackupV1)
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    assert crd["kind"] == "CustomResourceDefinition"
    assert crd["metadata"] == {"name": "backups.ops.example.com"}
    spec = crd["spec"]
    assert spec["group"] == "ops.example.com"
    assert spec["scope"] == "Cluster"
    assert spec["names"] == {
        "kind": "Backup",
        "listKind": "BackupList",
        "plural": "backups",
        "singular": "backup",
        "shortNames": ["bk"],
        "categories": ["all", "ops"],
    }


def test_printer_columns_take_their_type_from_the_field() -> None:
    (version,) = generate_crd(BackupV1)["spec"]["versions"]
    assert version["additionalPrinterColumns"] == [
        {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
        {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
        {"name": "Last run", "type": "date", "jsonPath": ".status.lastRun", "priority": 1},
        {"name": "Ready", "type": "string", "jsonPath": ".status.conditions[0].status"},
    ]


def test_printer_columns_of_metadata_take_its_types() -> None:
    # metadata is `type: object` in the schema; its timestamps are dates, so `kubectl get`
    # shows an age (5m) rather than the timestamp, as for kube-apiserver's own Age column
    class Clock(Resource):
        api_version: ClassVar[str] = "ops.example.com/v1"
        kind: ClassVar[str] = "Clock"
        crd_options: ClassVar[CRDOptions] = CRDOptions(
            printer_columns=(
                PrinterColumn(name="Age", json_path=".metadata.creationTimestamp"),
                PrinterColumn(name="Deleted", json_path=".metadata.deletionTimestamp"),
                PrinterColumn(name="Generation", json_path=".metadata.generation"),
                PrinterColumn(name="Owner", json_path=".metadata.labels.owner"),
            )
        )

    (version,) = generate_crd(Clock)["spec"]["versions"]
    assert [(c["name"], c["type"]) for c in version["additionalPrinterColumns"]] == [
        ("Age", "date"),
        ("Deleted", "date"),
        ("Generation", "integer"),
        ("Owner", "string"),
    ]


def test_status_and_scale_subresources() -> None:
    (version,) = generate_crd(BackupV1)["spec"]["versions"]
    assert version["subresources"] == {
        "status": {},
        "scale": {
            "specReplicasPath": ".spec.replicas",
            "statusReplicasPath": ".status.replicas",
            "labelSelectorPath": ".spec.selector",
        },
    }
    assert version["served"] is True and version["storage"] is True


def test_status_subresource_defaults_to_whether_the_class_declares_status() -> None:
    class Plain(Resource):
        api_version: ClassVar[str] = "ops.example.com/v1"
        kind: ClassVar[str] = "Plain"
        spec: dict[str, Any]

    (version,) = generate_crd(Plain)["spec"]["versions"]
    assert "subresources" not in version
    assert generate_crd(Plain)["spec"]["scope"] == "Namespaced"


def test_several_classes_make_the_versions_of_one_crd_with_one_storage_version() -> None:
    crd = generate_crd(BackupV1, BackupV1alpha1)
    v1, v1alpha1 = crd["spec"]["versions"]
    assert (v1["name"], v1["storage"]) == ("v1", True)
    assert (v1alpha1["name"], v1alpha1["storage"], v1alpha1["served"]) == ("v1alpha1", False, True)
    assert v1alpha1["deprecated"] is True
    assert v1alpha1["deprecationWarning"].startswith("ops.example.com/v1alpha1 Backup")
    assert "subresources" not in v1alpha1
    assert v1alpha1["schema"]["openAPIV3Schema"]["properties"]["spec"] == {
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,
    }
    assert generate_crds(BackupV1, BackupV1alpha1) == [crd]


def test_versions_without_exactly_one_storage_version_are_refused() -> None:
    class BackupV2(BackupV1):
        api_version: ClassVar[str] = "ops.example.com/v2"

    with pytest.raises(CRDError, match=r"needs exactly one storage version, got BackupV1, B"):
        generate_crd(BackupV1, BackupV2)

    class Lonely(Resource):
        api_version: ClassVar[str] = "ops.example.com/v1"
        kind: ClassVar[str] = "Lonely"
        crd_options: ClassVar[CRDOptions] = CRDOptions(storage=False)

    with pytest.raises(CRDError, match="Lonely: the only version of Lonely must be its storage"):
        generate_crd(Lonely)

    class LonelyV2(Resource):
        api_version: ClassVar[str] = "ops.example.com/v2"
        kind: ClassVar[str] = "Lonely"

    class LonelyV3(LonelyV2):
        api_version: ClassVar[str] = "ops.example.com/v3"

    # storage=False on all others makes the remaining class the storage version
    v1, v2 = generate_crd(Lonely, LonelyV2)["spec"]["versions"]
    assert (v1["storage"], v2["storage"]) == (False, True)
    with pytest.raises(CRDError, match=r"one storage version, got LonelyV2, LonelyV3: set"):
        generate_crd(Lonely, LonelyV2, LonelyV3)


def test_classes_of_one_crd_must_agree_on_crd_wide_settings() -> None:
    class BackupV2(Resource):
        api_version: ClassVar[str] = "ops.example.com/v2"
        kind: ClassVar[str] = "Backup"
        crd_options: ClassVar[CRDOptions] = CRDOptions(scope="Namespaced")

    with pytest.raises(CRDError, match="disagree on scope"):
        generate_crd(BackupV1, BackupV2)


class BackupStatusless(Resource):
    api_version: ClassVar[str] = "ops.example.com/v1"
    kind: ClassVar[str] = "Restore"


def test_bad_input_is_named() -> None:
    class Core(Resource):
        api_version: ClassVar[str] = "v1"
        kind: ClassVar[str] = "Thing"

    with pytest.raises(CRDError, match="Core: api_version 'v1': a custom resource needs a group"):
        generate_crd(Core)
    with pytest.raises(CRDError, match="one CRD serves one group and kind"):
        generate_crd(BackupV1, BackupStatusless)
    with pytest.raises(CRDError, match="both declare version v1 of Backup"):
        generate_crd(BackupV1, BackupV1)
    with pytest.raises(CRDError, match="is not a mcruntime.client.Resource class"):
        generate_crd(BackupSpec)  # type: ignore[arg-type]

    class NoKind(Resource):
        api_version: ClassVar[str] = "ops.example.com/v1"

    with pytest.raises(CRDError, match="NoKind must set class variables api_version and kind"):
        generate_crd(NoKind)

    class BadColumn(BackupV1alpha1):
        crd_options: ClassVar[CRDOptions] = CRDOptions(
            printer_columns=(PrinterColumn(name="X", json_path="spec.x"),)
        )

    with pytest.raises(CRDError, match="printer column 'X': json_path 'spec.x' must start with"):
        generate_crd(BadColumn)

    class BadNames(BackupV1alpha1):
        crd_options: ClassVar[CRDOptions] = CRDOptions(short_names=("Bk",))

    with pytest.raises(CRDError, match="BadNames: short name 'Bk' must be a lower-case DNS label"):
        generate_crd(BadNames)

    class BadScope(BackupV1alpha1):
        crd_options: ClassVar[CRDOptions] = CRDOptions(scope="namespaced")  # type: ignore[arg-type]

    with pytest.raises(CRDError, match="BadScope: scope 'namespaced' must be 'Namespaced' or"):
        generate_crd(BadScope)

    class BadVersion(Resource):
        api_version: ClassVar[str] = "ops.example.com/V1"
        kind: ClassVar[str] = "Backup"

    with pytest.raises(CRDError, match="BadVersion: version 'V1' of api_version"):
        generate_crd(BadVersion)


@pytest.mark.parametrize(
    ("kind", "plural"),
    [("Widget", "widgets"), ("Policy", "policies"), ("Gateway", "gateways"), ("Box", "boxes")],
)
def test_default_plurals(kind: str, plural: str) -> None:
    assert plural_of(kind) == plural


def test_load_resource_classes_from_module_class_and_module() -> None:
    here = __name__
    assert load_resource_classes([f"{here}:BackupV1"]) == [BackupV1]
    assert load_resource_classes([here]) == [BackupV1, BackupV1alpha1, BackupStatusless]
    with pytest.raises(CRDError, match="cannot import module 'no_such_module_x'"):
        load_resource_classes(["no_such_module_x:Thing"])
    with pytest.raises(CRDError, match="has no 'Missing'"):
        load_resource_classes([f"{here}:Missing"])
    with pytest.raises(CRDError, match="is not a mcruntime.client.Resource class"):
        load_resource_classes([f"{here}:BackupSpec"])


class _Bounded(Model):
    replicas: int = Field(10, le=3)


class _Painted(Model):
    color: Literal["red", "blue"] = "green"  # type: ignore[assignment]


class _Ports(Model):
    ports: list[_Bounded] = []


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        (
            _Bounded,
            "Bad.spec.replicas: its default 10 does not fit its own type "
            "(Input should be less than or equal to 3)",
        ),
        (
            _Painted,
            "Bad.spec.color: its default 'green' does not fit its own type "
            "(Input should be 'red' or 'blue')",
        ),
        (_Ports, "Bad.spec.ports.replicas: its default 10"),
    ],
)
def test_a_default_its_own_field_refuses_is_an_error_naming_the_field(
    spec: type[Model], said: str
) -> None:
    # pydantic does not check defaults; the API server refuses the CRD whose default breaks
    # its schema, so the generator says it first
    bad = create_model("Bad", __base__=Resource, spec=(spec | None, None))
    bad.api_version, bad.kind = "bad.example.com/v1", "Bad"
    with pytest.raises(CRDError) as err:
        generate_crd(bad)
    assert str(err.value).startswith(said)


class _Pool(Model):
    replica_count: int = 1


class _PoolStatus(Model):
    ready_replicas: int = 0


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (
            CRDOptions(
                printer_columns=(PrinterColumn(name="Ready", json_path=".status.ready_replicas"),)
            ),
            "Pool: printer column 'Ready': json_path: '.status.ready_replicas' names the field "
            "'ready_replicas' by its Python name: paths name fields as the API does, "
            "'.status.readyReplicas'",
        ),
        (
            CRDOptions(scale=Scale(spec_replicas_path=".spec.replica_count")),
            "Pool: Scale(spec_replicas_path=...): '.spec.replica_count' names the field",
        ),
        (
            CRDOptions(selectable_fields=(".spec.replica_count",)),
            "Pool: selectable field: '.spec.replica_count' names the field 'replica_count'",
        ),
    ],
)
def test_a_path_naming_a_field_by_its_python_name_is_an_error(
    options: CRDOptions, said: str
) -> None:
    # the API server takes such a path: kubectl get shows an empty column, kubectl scale
    # changes nothing (the field is pruned), a field selector matches nothing
    pool = create_model(
        "Pool", __base__=Resource, spec=(_Pool, _Pool()), status=(_PoolStatus | None, None)
    )
    pool.api_version, pool.kind = "pool.example.com/v1", "Pool"
    pool.crd_options = options  # type: ignore[attr-defined]
    with pytest.raises(CRDError) as err:
        generate_crd(pool)
    assert str(err.value).startswith(said)
