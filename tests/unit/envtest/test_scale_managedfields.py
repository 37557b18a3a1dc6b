"""Ownership of a write through /scale, converted as kube-apiserver's ``ScaleHandler`` does
(``k8s.io/apimachinery/pkg/util/managedfields/scalehandler.go``)."""

from __future__ import annotations

from typing import Any

import pytest

from mcruntime.envtest import _managedfields as mf
from mcruntime.envtest._registry import Registry, ServedResource
from mcruntime.envtest._scale import apply_scale, replicas_paths, scale_managed_fields
from mcruntime.envtest._status import StatusError

T1 = "2024-01-01T00:00:01Z"
REPLICAS: dict[str, Any] = {"f:replicas": {}}
SELECTOR: dict[str, Any] = {"f:selector": {}}


def deployments() -> ServedResource:
    res = Registry().get("apps", "v1", "deployments")
    assert res is not None
    return res


def entry(manager: str, op: str, fields: dict[str, Any], **extra: Any) -> dict[str, Any]:
    out = {"manager": manager, "operation": op, "apiVersion": "apps/v1"}
    if op == "Update" or "time" in extra:
        out["time"] = extra.pop("time", T1)
    return {**out, "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": fields}, **extra}


def write(entries: list[dict[str, Any]], replicas: int, new: int, manager: str = "scaler") -> Any:
    res = deployments()
    parent = {"metadata": {"managedFields": entries}, "spec": {"replicas": replicas}}
    return scale_managed_fields(res, replicas_paths(res, None), parent, new, manager)


def scaler(fields: dict[str, Any] = REPLICAS, manager: str = "scaler") -> dict[str, Any]:
    """An entry converted back from the Scale: no time (``ToParent`` finds none)."""
    return {
        "manager": manager,
        "operation": "Update",
        "apiVersion": "apps/v1",
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:spec": fields},
        "subresource": "scale",
    }


def test_the_writer_takes_the_replicas_from_an_updater() -> None:
    got = write([entry("maker", "Update", {**REPLICAS, **SELECTOR})], 1, 3)
    assert got == [scaler(), entry("maker", "Update", SELECTOR)]


def test_the_writer_takes_the_replicas_from_an_applier() -> None:
    got = write([entry("applier", "Apply", {**REPLICAS, **SELECTOR})], 1, 3)
    assert got == [entry("applier", "Apply", SELECTOR), scaler()]


def test_an_applier_keeps_the_replicas_a_write_leaves_alone() -> None:
    applied = entry("applier", "Apply", {**REPLICAS, **SELECTOR})
    assert write([applied], 2, 2) == [applied]


def test_an_updater_whose_replicas_a_write_leaves_alone_is_split_in_two() -> None:
    # ToParent looks the Scale's entries up under their autoscaling/v1 identity, which an
    # Update entry of the parent (apps/v1) never has: its replicas go to an entry of their
    # own, without a time
    got = write([entry("maker", "Update", {**REPLICAS, **SELECTOR})], 2, 2)
    split = {**scaler(), "manager": "maker"}
    del split["subresource"]
    assert got == [split, entry("maker", "Update", SELECTOR)]


def test_replicas_scaled_to_zero_are_owned_by_nobody() -> None:
    # ScaleSpec.replicas is omitempty: 0 is no value in the Scale, so the write removes it
    assert write([entry("maker", "Update", {**REPLICAS, **SELECTOR})], 2, 0) == [
        entry("maker", "Update", SELECTOR)
    ]


def test_a_write_nobody_owned_the_replicas_before_is_not_recorded() -> None:
    # the Scale has no entries, and the field manager does not start tracking an object
    # without any (skipnonapplied.go; kubernetes/kubernetes#131892)
    entries = [entry("applier", "Apply", SELECTOR)]
    assert write(entries, 1, 5) == entries


def test_entries_of_a_version_the_kind_does_not_have_are_dropped() -> None:
    stray = {**entry("old", "Update", SELECTOR), "apiVersion": "apps/v10"}
    got = write([entry("maker", "Update", {**REPLICAS, **SELECTOR}), stray], 1, 3)
    assert [e["manager"] for e in got] == ["scaler", "maker"]


def test_a_custom_resource_maps_each_version_to_its_replicas_path() -> None:
    crd = {
        "spec": {
            "versions": [
                {"name": "v1", "subresources": {"scale": {"specReplicasPath": ".spec.size"}}},
                {"name": "v2"},
            ]
        }
    }
    custom = ServedResource(
        group="example.com",
        version="v1",
        plural="pools",
        singular="pool",
        kind="Pool",
        namespaced=True,
        custom=True,
        scale={"specReplicasPath": ".spec.size"},
    )
    assert replicas_paths(custom, crd) == {
        "example.com/v1": ("f:spec", "f:size"),
        "example.com/v2": None,
    }
    v2 = {**entry("other", "Update", {"f:size": {}}), "apiVersion": "example.com/v2"}
    maker = {**entry("maker", "Update", {"f:size": {}}), "apiVersion": "example.com/v1"}
    parent = {"metadata": {"managedFields": [maker, v2]}, "spec": {"size": 1}}
    got = scale_managed_fields(custom, replicas_paths(custom, crd), parent, 4, "scaler")
    assert mf.sort_entries(got) == got
    owned = {(e["manager"], e.get("subresource", "")): e["fieldsV1"] for e in got}
    assert owned == {
        ("scaler", "scale"): {"f:spec": {"f:size": {}}},
        ("other", ""): {"f:spec": {"f:size": {}}},  # v2 has no scale: left alone
    }


# ------------------------------------------------------------------ server-side apply


def apply(entries: list[dict[str, Any]], replicas: int, cfg: dict[str, Any], force: bool) -> Any:
    """The replicas and entries once "hpa" applied the Scale configuration ``cfg``."""
    res = deployments()
    parent = {
        "metadata": {"name": "web", "managedFields": entries},
        "spec": {"replicas": replicas},
    }
    scale = {"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "web"}, **cfg}
    return apply_scale(res, replicas_paths(res, None), parent, scale, "hpa", force)


def applier(fields: dict[str, Any] = REPLICAS) -> dict[str, Any]:
    return {**scaler(fields, "hpa"), "operation": "Apply"}


def test_an_apply_names_an_updater_of_the_replicas_as_the_scale_does() -> None:
    with pytest.raises(StatusError) as e:
        apply(
            [entry("maker", "Update", {**REPLICAS, **SELECTOR})],
            1,
            {"spec": {"replicas": 3}},
            False,
        )
    assert str(e.value) == (
        'Apply failed with 1 conflict: conflict with "maker" using autoscaling/v1: .spec.replicas'
    )


def test_replicas_nobody_owns_belong_to_before_first_apply() -> None:
    # the Scale has no entries: the field manager records what it holds first
    # (skipnonapplied.go), an Update of the Scale whose replicas go back to the parent
    with pytest.raises(StatusError) as e:
        apply([], 2, {"spec": {"replicas": 3}}, False)
    assert str(e.value).endswith(
        'conflict with "before-first-apply" with subresource "scale" using autoscaling/v1: '
        ".spec.replicas"
    )
    replicas, got = apply([], 2, {"spec": {"replicas": 2}}, False)
    first = {**scaler(manager="before-first-apply")}
    assert (replicas, got) == (2, [applier(), first])


def test_replicas_no_longer_applied_and_owned_by_nobody_else_go() -> None:
    # the Scale without .spec.replicas holds 0 (ScaleSpec.replicas is omitempty)
    replicas, got = apply([applier(), entry("maker", "Update", SELECTOR)], 4, {}, False)
    assert (replicas, got) == (0, [entry("maker", "Update", SELECTOR)])
