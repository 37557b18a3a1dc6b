"""The namespace controller: a deleted namespace is Terminating, emptied, then gone."""

from __future__ import annotations

from typing import Any

from mcruntime.envtest._gc import DeleteFn, RemoveFn
from mcruntime.envtest._names import now
from mcruntime.envtest._storage import ObjectStore, ResKey

__all__ = [
    "NamespaceController",
    "NAMESPACES",
    "PROTECTED_NAMESPACES",
    "FINALIZE",
    "NAMESPACE_FINALIZER",
]

NAMESPACES: ResKey = ("", "namespaces")
PROTECTED_NAMESPACES = ("default", "kube-system", "kube-public")
#: the subresource that writes a namespace's ``spec.finalizers`` (PUT only)
FINALIZE = "finalize"
#: the namespace controller's own entry of ``spec.finalizers``: it removes it once the
#: namespace is empty; any other entry holds the namespace until a PUT to `FINALIZE` drops it
NAMESPACE_FINALIZER = "kubernetes"


class NamespaceController:
    """Deletes namespaces of one server the way kube-controller-manager does."""

    def __init__(self, store: ObjectStore, delete_object: DeleteFn, remove: RemoveFn) -> None:
        self.store = store
        self.delete_object = delete_object
        self.remove = remove
        #: namespaces whose content `delete` is deleting now: each removal's `finish` waits
        #: for the end of it (one report, not one per object removed)
        self._emptying: set[str] = set()

    def delete(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        """Mark a namespace Terminating, delete its contents, then remove it once empty."""
        name = obj["metadata"]["name"]
        if "deletionTimestamp" not in obj["metadata"]:
            new = dict(obj)
            new["metadata"] = {
                **obj["metadata"],
                "deletionTimestamp": now(),
                "deletionGracePeriodSeconds": 0,
            }
            new["status"] = {**(obj.get("status") or {}), "phase": "Terminating"}
            self.store.commit(NAMESPACES, "MODIFIED", new, obj)
        self._emptying.add(name)
        try:
            for key in list(self.store.objects):
                if key == NAMESPACES:
                    continue
                names = self.store.objects.get(key, {}).get(name)
                if not names:
                    continue
                for child in list(names.values()):
                    current = self.store.get(key, name, child["metadata"]["name"])
                    if current is not None:
                        self.delete_object(key, current, "Background")
        finally:
            self._emptying.discard(name)
        return self.finish(name)

    def finish(self, name: str) -> dict[str, Any] | None:
        """Remove a Terminating namespace once it is empty and has no finalizers left."""
        obj = self.store.get(NAMESPACES, "", name)
        if obj is None:
            return None
        if "deletionTimestamp" not in obj["metadata"] or name in self._emptying:
            return obj
        remaining = {
            key: list(by_ns[name].values())
            for key, by_ns in self.store.objects.items()
            if key != NAMESPACES and by_ns.get(name)
        }
        if remaining:
            return self._report(obj, remaining)
        obj = self._report(obj, {})
        spec = obj.get("spec") or {}
        finalizers = spec.get("finalizers") or []
        if NAMESPACE_FINALIZER in finalizers:
            # an emptied list is dropped, as kube-apiserver stores it (omitempty)
            left = [f for f in finalizers if f != NAMESPACE_FINALIZER]
            rest = {k: v for k, v in spec.items() if k != "finalizers"}
            new = {
                **obj,
                "spec": {**rest, "finalizers": left} if left else rest,
                "metadata": dict(obj["metadata"]),
            }
            self.store.commit(NAMESPACES, "MODIFIED", new, obj)
            obj = new
        if obj["metadata"].get("finalizers") or (obj.get("spec") or {}).get("finalizers"):
            return obj
        self.remove(NAMESPACES, dict(obj), obj)
        return None

    def _report(
        self, obj: dict[str, Any], remaining: dict[ResKey, list[dict[str, Any]]]
    ) -> dict[str, Any]:
        """The namespace with the deleter's conditions: what content remains, and which
        finalizers hold it (what ``kubectl get ns -o yaml`` shows of a stuck namespace)."""
        wanted = _conditions(remaining)
        status = obj.get("status") or {}
        old = {c.get("type"): c for c in status.get("conditions") or ()}
        conditions = []
        for c in wanted:
            before = old.get(c["type"])
            same = before is not None and all(before.get(k) == c[k] for k in _COMPARED)
            if same:
                conditions.append(before)
                continue
            kept = before is not None and before.get("status") == c["status"]
            stamp = before.get("lastTransitionTime") if before is not None and kept else now()
            conditions.append({**c, "lastTransitionTime": stamp})
        if conditions == status.get("conditions"):
            return obj
        new = {**obj, "status": {**status, "conditions": conditions}}
        self.store.commit(NAMESPACES, "MODIFIED", new, obj)
        return new


#: the conditions kube-controller-manager's namespace deleter keeps, in its order, and
#: their reason and message while nothing is wrong (status False)
_OK: tuple[tuple[str, str, str], ...] = (
    (
        "NamespaceDeletionDiscoveryFailure",
        "ResourcesDiscovered",
        "All resources successfully discovered",
    ),
    (
        "NamespaceDeletionGroupVersionParsingFailure",
        "ParsedGroupVersions",
        "All legacy kube types successfully parsed",
    ),
    (
        "NamespaceDeletionContentFailure",
        "ContentDeleted",
        "All content successfully deleted, may be waiting on finalization",
    ),
    ("NamespaceContentRemaining", "ContentRemoved", "All content successfully removed"),
    (
        "NamespaceFinalizersRemaining",
        "ContentHasNoFinalizers",
        "All content-preserving finalizers finished",
    ),
)
_COMPARED = ("type", "status", "reason", "message")


def _conditions(remaining: dict[ResKey, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    resources = sorted(
        f"{plural}.{group} has {len(objs)} resource instances"
        for (group, plural), objs in remaining.items()
    )
    finalizers: dict[str, int] = {}
    for objs in remaining.values():
        for o in objs:
            for f in o["metadata"].get("finalizers") or ():
                finalizers[f] = finalizers.get(f, 0) + 1
    held = sorted(f"{f} in {n} resource instances" for f, n in finalizers.items())
    failing = {
        "NamespaceContentRemaining": (
            "SomeResourcesRemain",
            f"Some resources are remaining: {', '.join(resources)}",
        ),
        "NamespaceFinalizersRemaining": (
            "SomeFinalizersRemain",
            f"Some content in the namespace has finalizers remaining: {', '.join(held)}",
        ),
    }
    out = []
    for kind, reason, message in _OK:
        if kind in failing and (resources if kind == "NamespaceContentRemaining" else held):
            reason, message = failing[kind]
            out.append({"type": kind, "status": "True", "reason": reason, "message": message})
        else:
            out.append({"type": kind, "status": "False", "reason": reason, "message": message})
    return out
