"""Cross-cluster owner records on dependents, and the deletion policy an owner carries.

An owner reference cannot name an object of another cluster, so mcruntime
records the owner on the dependent in labels and an annotation (keys in
docs/concepts/ownership.md) and its
[`CrossClusterGarbageCollector`][mcruntime.controllerutil.CrossClusterGarbageCollector]
acts on them. The helpers change the object in memory only: write it afterwards.
"""

from __future__ import annotations

from typing import Any, Literal

from mcruntime._ownership import (
    ANNOTATION_CLEARED,
    ANNOTATION_OWNER,
    FINALIZER_FOREGROUND,
    FINALIZER_ORPHAN,
    LABEL_OWNER_CLUSTER,
    LABEL_OWNER_UID,
    OwnerRecord,
    cluster_label_value,
    owner_record,
)

__all__ = [
    "ANNOTATION_CLEARED",
    "ANNOTATION_OWNER",
    "FINALIZER_FOREGROUND",
    "FINALIZER_ORPHAN",
    "LABEL_OWNER_CLUSTER",
    "LABEL_OWNER_UID",
    "CrossClusterOwnerConflict",
    "OwnerRecord",
    "Propagation",
    "get_cross_cluster_owner",
    "is_cross_cluster_owned_by",
    "remove_cross_cluster_owner",
    "set_cross_cluster_owner",
    "set_cross_cluster_propagation",
]

Propagation = Literal["Background", "Foreground", "Orphan"]


class CrossClusterOwnerConflict(ValueError):
    """The dependent already records another cross-cluster owner (one owner per dependent)."""


def _metadata(obj: dict[str, Any], what: str) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise TypeError(f"{what} must be a dict object, not {type(obj).__name__}")
    m = obj.setdefault("metadata", {})
    if not isinstance(m, dict):
        raise ValueError(f"{what} has no metadata mapping")
    return m


def set_cross_cluster_owner(
    owner_cluster: str,
    owner: dict[str, Any],
    dependent: dict[str, Any],
    *,
    controller: bool = True,
) -> bool:
    """Record ``owner`` (an object of cluster ``owner_cluster``; ``""`` is the local one) on ``dependent``.

    Sets the labels `mcruntime.io/owner-uid` and `mcruntime.io/owner-cluster`
    and the annotation `mcruntime.io/owner` (the full record as JSON). Works for
    an owner in the dependent's own cluster too. Returns whether ``dependent``
    changed. ``owner`` must have been read from its cluster (it needs its uid).

    Raises [`CrossClusterOwnerConflict`][mcruntime.controllerutil.CrossClusterOwnerConflict]
    when ``dependent`` records another owner, ``ValueError`` when ``owner`` lacks
    apiVersion, kind, name or uid.
    """
    om = owner.get("metadata") or {}
    missing = [
        k
        for k, v in (
            ("apiVersion", owner.get("apiVersion")),
            ("kind", owner.get("kind")),
            ("metadata.name", om.get("name")),
            ("metadata.uid", om.get("uid")),
        )
        if not v
    ]
    if missing:
        raise ValueError(
            f"owner {om.get('name')!r} lacks {', '.join(missing)}: read it from the API first"
        )
    rec = OwnerRecord(
        cluster=owner_cluster,
        api_version=owner["apiVersion"],
        kind=owner["kind"],
        namespace=om.get("namespace") or "",
        name=om["name"],
        uid=om["uid"],
        controller=controller,
    )
    dm = _metadata(dependent, "dependent")
    current = owner_record(dependent)
    if current is not None and current.uid != rec.uid:
        raise CrossClusterOwnerConflict(
            f"{dm.get('name')!r} is owned by {current.kind} {current.namespace}/{current.name}"
            f" of cluster {current.cluster or 'local'!r}; remove that record first"
        )
    labels = dm.setdefault("labels", {})
    annotations = dm.setdefault("annotations", {})
    want = {LABEL_OWNER_UID: rec.uid, LABEL_OWNER_CLUSTER: cluster_label_value(owner_cluster)}
    changed = current != rec or any(labels.get(k) != v for k, v in want.items())
    labels.update(want)
    annotations[ANNOTATION_OWNER] = rec.to_json()
    return changed


def get_cross_cluster_owner(obj: dict[str, Any]) -> OwnerRecord | None:
    """The cross-cluster owner recorded on ``obj``, or None (a malformed record counts as none)."""
    return owner_record(obj)


def is_cross_cluster_owned_by(
    obj: dict[str, Any], owner_cluster: str, owner: dict[str, Any]
) -> bool:
    """Whether ``obj`` records ``owner`` of ``owner_cluster`` (matched on cluster and uid)."""
    rec = owner_record(obj)
    uid = (owner.get("metadata") or {}).get("uid")
    return rec is not None and rec.cluster == owner_cluster and rec.uid == uid


def remove_cross_cluster_owner(obj: dict[str, Any]) -> bool:
    """Drop the cross-cluster owner record of ``obj`` (labels and annotation); whether it changed."""
    m = obj.get("metadata") or {}
    changed = False
    for section, keys in (
        ("labels", (LABEL_OWNER_UID, LABEL_OWNER_CLUSTER)),
        ("annotations", (ANNOTATION_OWNER,)),
    ):
        values = m.get(section) or {}
        for k in keys:
            if k in values:
                del values[k]
                changed = True
    return changed


def set_cross_cluster_propagation(owner: dict[str, Any], policy: Propagation) -> bool:
    """Choose what deleting ``owner`` does to its cross-cluster dependents; whether it changed.

    ``"Background"`` (no finalizer): the owner goes at once and the collector
    deletes its dependents after. ``"Foreground"``: the finalizer
    `mcruntime.io/foreground-deletion` keeps the owner until every cluster
    reported its dependents gone. ``"Orphan"``: the finalizer
    `mcruntime.io/orphan-dependents` keeps it until every cluster removed the
    owner record from its dependents, which stay. Set it before the owner is deleted.
    """
    if policy not in ("Background", "Foreground", "Orphan"):
        raise ValueError(f"propagation must be Background, Foreground or Orphan, not {policy!r}")
    m = _metadata(owner, "owner")
    finalizers = list(m.get("finalizers") or [])
    want = {"Foreground": FINALIZER_FOREGROUND, "Orphan": FINALIZER_ORPHAN}.get(policy)
    kept = [f for f in finalizers if f not in (FINALIZER_FOREGROUND, FINALIZER_ORPHAN)]
    if want is not None:
        kept.append(want)
    if kept == finalizers:
        return False
    m["finalizers"] = kept
    return True
