"""What a user's type checker sees of the owner-reference and finalizer helpers: checked by
``mypy`` and ``pyright`` (strict; see pyproject.toml), never run.

They take an object of any flavour (a dict, a ``Resource`` view, a ``kubernetes`` model object,
a metadata-only read); each ``# type: ignore[...]`` marks a mistake that must be reported (a
kind's name where the object belongs), and fails as unused when the helpers take ``Any`` again.
"""

from __future__ import annotations

from typing import Any

from kubernetes.client import V1ConfigMap, V1ObjectMeta

import mcruntime
from mcruntime import Request
from mcruntime.client import Client, ObjectLike, gvk_of_object, to_dict
from mcruntime.controllerutil import (
    CrossClusterGarbageCollector,
    add_finalizer,
    contains_finalizer,
    get_controller_of,
    has_controller_reference,
    is_being_deleted,
    remove_finalizer,
    set_controller_reference,
    set_owner_reference,
)
from mcruntime.finalizer import Finalizers
from mcruntime.recorder import EventRecorder
from tests.typing.client_returns import Widget

FINALIZER = "example.com/cleanup"


def every_flavour(client: Client, owner: Widget, child: dict[str, Any]) -> None:
    model = V1ConfigMap(metadata=V1ObjectMeta(name="a", namespace="default"))
    meta_only = client.get(Widget, "a", "default", metadata_only=True)
    set_controller_reference(owner, child)
    set_owner_reference(owner, model)
    print(has_controller_reference(meta_only), get_controller_of(child))
    for obj in (owner, child, meta_only):
        add_finalizer(obj, FINALIZER)
        remove_finalizer(obj, FINALIZER)
        print(contains_finalizer(obj, FINALIZER), is_being_deleted(obj))
    add_finalizer(model, FINALIZER)


def mistakes(owner: Widget, child: dict[str, Any]) -> None:
    set_controller_reference("example.com/v1/Widget", child)  # type: ignore[arg-type]
    set_owner_reference(owner, "v1/ConfigMap")  # type: ignore[arg-type]
    add_finalizer(FINALIZER, "x")  # type: ignore[arg-type]
    is_being_deleted(owner.metadata.name)  # type: ignore[arg-type]


def name_of(obj: ObjectLike) -> str:
    # a user's own helper over every flavour, as mcruntime's take them
    return str(to_dict(obj)["metadata"]["name"]) + str(gvk_of_object(obj))


def events_and_finalizers(
    mgr: mcruntime.Manager, events: EventRecorder, owner: Widget, req: Request
) -> None:
    events.eventf(owner, "Warning", "SyncFailed", "cannot sync %s", req)
    events.event({"metadata": {"name": "a"}}, "Normal", "Synced", "ok", cluster_name="")
    print(name_of(owner), Finalizers().finalize(owner, req))
    CrossClusterGarbageCollector(mgr, owner_kinds=[Widget], dependent_kinds=["v1/ConfigMap"])
    # the object forgotten: the event's type taken for the object
    events.eventf("Warning", "SyncFailed", "cannot sync %s", "x")  # type: ignore[arg-type]
    Finalizers().finalize(req)  # type: ignore[arg-type]
    CrossClusterGarbageCollector(mgr, owner_kinds=[owner], dependent_kinds=[])  # type: ignore[list-item]
