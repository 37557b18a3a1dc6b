"""The namespace controller: a deleted namespace is Terminating, emptied, then gone."""

from __future__ import annotations

from typing import Any

from mcruntime.envtest._gc import DeleteFn, RemoveFn
from mcruntime.envtest._names import now
from mcruntime.envtest._storage import ObjectStore, ResKey

__all__ = ["NamespaceController", "NAMESPACES", "PROTECTED_NAMESPACES"]

NAMESPACES: ResKey = ("", "namespaces")
PROTECTED_NAMESPACES = ("default", "kube-system", "kube-public")


class NamespaceController:
    """Deletes namespaces of one server the way kube-controller-manager does."""

    def __init__(self, store: ObjectStore, delete_object: DeleteFn, remove: RemoveFn) -> None:
        self.store = store
        self.delete_object = delete_object
        self.remove = remove

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
        return self.finish(name)

    def finish(self, name: str) -> dict[str, Any] | None:
        """Remove a Terminating namespace once it is empty and has no finalizers left."""
        obj = self.store.get(NAMESPACES, "", name)
        if obj is None:
            return None
        if "deletionTimestamp" not in obj["metadata"]:
            return obj
        for key, by_ns in self.store.objects.items():
            if key != NAMESPACES and by_ns.get(name):
                return obj
        spec = obj.get("spec") or {}
        if spec.get("finalizers"):
            # an emptied list is dropped, as kube-apiserver stores it (omitempty)
            rest = {k: v for k, v in spec.items() if k != "finalizers"}
            new = {**obj, "spec": rest, "metadata": dict(obj["metadata"])}
            self.store.commit(NAMESPACES, "MODIFIED", new, obj)
            obj = new
        if obj["metadata"].get("finalizers"):
            return obj
        self.remove(NAMESPACES, dict(obj), obj)
        return None
