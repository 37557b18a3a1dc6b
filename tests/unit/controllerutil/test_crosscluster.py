"""Cross-cluster owner records on dependents, and the handler that follows them back to the owner."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mcruntime.controllerutil import (
    ANNOTATION_OWNER,
    FINALIZER_FOREGROUND,
    FINALIZER_ORPHAN,
    LABEL_OWNER_CLUSTER,
    LABEL_OWNER_UID,
    CrossClusterOwnerConflict,
    get_cross_cluster_owner,
    is_cross_cluster_owned_by,
    remove_cross_cluster_owner,
    set_cross_cluster_owner,
    set_cross_cluster_propagation,
)
from mcruntime.event import DeleteEvent, UpdateEvent
from mcruntime.handler import enqueue_request_for_cross_cluster_owner
from mcruntime.reconcile import Request

LABEL_VALUE_MAX = 63


def owner(uid: str = "11111111-2222-3333-4444-555555555555", **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "example.mcruntime.io/v1alpha1",
        "kind": "FleetJob",
        "metadata": {"name": "build", "namespace": "ci", "uid": uid, **meta},
    }


def dependent(name: str = "build") -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": "ci"}}


class Queue:
    def __init__(self) -> None:
        self.items: list[Request] = []

    def add(self, item: Request, *, priority: int | None = None) -> None:
        self.items.append(item)

    def add_after(self, item: Request, seconds: float, *, priority: int | None = None) -> None:
        self.items.append(item)

    def add_rate_limited(self, item: Request, *, priority: int | None = None) -> None:
        self.items.append(item)


def test_the_owner_is_recorded_in_labels_and_an_annotation_with_its_cluster() -> None:
    dep = dependent()
    assert set_cross_cluster_owner("hub-a-very-long-cluster-name:" + "x" * 80, owner(), dep)
    m = dep["metadata"]
    assert m["labels"][LABEL_OWNER_UID] == "11111111-2222-3333-4444-555555555555"
    assert len(m["labels"][LABEL_OWNER_CLUSTER]) <= LABEL_VALUE_MAX
    assert m["labels"][LABEL_OWNER_CLUSTER].isascii()
    record = json.loads(m["annotations"][ANNOTATION_OWNER])
    assert record == {
        "cluster": "hub-a-very-long-cluster-name:" + "x" * 80,
        "apiVersion": "example.mcruntime.io/v1alpha1",
        "kind": "FleetJob",
        "namespace": "ci",
        "name": "build",
        "uid": "11111111-2222-3333-4444-555555555555",
        "controller": True,
    }
    rec = get_cross_cluster_owner(dep)
    assert rec is not None and rec.group == "example.mcruntime.io"


def test_setting_the_same_owner_again_changes_nothing_and_another_owner_is_refused() -> None:
    dep = dependent()
    set_cross_cluster_owner("", owner(), dep)
    assert not set_cross_cluster_owner("", owner(), dep)
    with pytest.raises(CrossClusterOwnerConflict, match="FleetJob ci/build"):
        set_cross_cluster_owner("", owner(uid="another"), dep)


def test_an_owner_without_uid_is_refused_with_what_is_missing() -> None:
    o = owner()
    del o["metadata"]["uid"]
    with pytest.raises(ValueError, match=r"metadata\.uid"):
        set_cross_cluster_owner("hub", o, dependent())


def test_removal_drops_every_key_and_ownership_checks_cluster_and_uid() -> None:
    dep = dependent()
    set_cross_cluster_owner("hub", owner(), dep)
    assert is_cross_cluster_owned_by(dep, "hub", owner())
    assert not is_cross_cluster_owned_by(dep, "other", owner())
    assert not is_cross_cluster_owned_by(dep, "hub", owner(uid="new"))
    assert remove_cross_cluster_owner(dep)
    assert dep["metadata"]["labels"] == {} and dep["metadata"]["annotations"] == {}
    assert get_cross_cluster_owner(dep) is None
    assert not remove_cross_cluster_owner(dep)


def test_a_record_whose_label_was_removed_is_not_in_force() -> None:
    dep = dependent()
    set_cross_cluster_owner("hub", owner(), dep)
    del dep["metadata"]["labels"][LABEL_OWNER_UID]
    assert get_cross_cluster_owner(dep) is None
    dep["metadata"]["labels"][LABEL_OWNER_UID] = "11111111-2222-3333-4444-555555555555"
    dep["metadata"]["annotations"][ANNOTATION_OWNER] = "{not json"
    assert get_cross_cluster_owner(dep) is None


def test_propagation_is_a_finalizer_on_the_owner() -> None:
    o = owner(finalizers=["keep/me"])
    assert set_cross_cluster_propagation(o, "Foreground")
    assert o["metadata"]["finalizers"] == ["keep/me", FINALIZER_FOREGROUND]
    assert set_cross_cluster_propagation(o, "Orphan")
    assert o["metadata"]["finalizers"] == ["keep/me", FINALIZER_ORPHAN]
    assert set_cross_cluster_propagation(o, "Background")
    assert o["metadata"]["finalizers"] == ["keep/me"]
    assert not set_cross_cluster_propagation(o, "Background")
    with pytest.raises(ValueError, match="Foreground"):
        set_cross_cluster_propagation(o, "foreground")  # type: ignore[arg-type]


def test_the_handler_enqueues_the_owner_in_the_owners_cluster() -> None:
    dep = dependent()
    dep["metadata"]["uid"] = "dep-uid"
    set_cross_cluster_owner("hub", owner(), dep)
    q = Queue()
    h = enqueue_request_for_cross_cluster_owner("example.mcruntime.io/v1alpha1/FleetJob")
    h.delete(DeleteEvent(dep, "spoke-1"), q)
    h.update(UpdateEvent(dep, dep, "spoke-2"), q)
    assert set(q.items) == {Request("ci", "build", "hub")}


def test_the_handler_ignores_other_kinds_non_controllers_and_unowned_objects() -> None:
    q = Queue()
    h = enqueue_request_for_cross_cluster_owner("example.mcruntime.io/v1alpha1/FleetJob")
    other = dependent()
    set_cross_cluster_owner("hub", {**owner(), "kind": "Other"}, other)
    h.delete(DeleteEvent(other, "spoke"), q)
    h.delete(DeleteEvent(dependent(), "spoke"), q)
    weak = dependent()
    set_cross_cluster_owner("hub", owner(), weak, controller=False)
    h.delete(DeleteEvent(weak, "spoke"), q)
    assert q.items == []
    any_owner = enqueue_request_for_cross_cluster_owner(
        "example.mcruntime.io/v1alpha1/FleetJob", only_controller=False
    )
    any_owner.delete(DeleteEvent(weak, "spoke"), q)
    assert q.items == [Request("ci", "build", "hub")]
