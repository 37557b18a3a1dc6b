"""The garbage collector: ownerReferences, foreground deletion, orphaning.

What kube-controller-manager's garbage collector does, done synchronously on
each delete: dependents of a deleted owner go too (or lose the reference when
another owner remains), an owner deleted in the foreground waits for its
dependents, orphaning drops the references, and an object whose owners never
existed is collected shortly after it is written.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from mcruntime.envtest._storage import ObjectStore, ObjKey, ResKey, owner_uids

__all__ = ["GarbageCollector", "FOREGROUND", "ORPHAN", "DANGLING_GC_DELAY"]

FOREGROUND = "foregroundDeletion"
#: the finalizer that orphans an object's dependents (the garbage collector's other one)
ORPHAN = "orphan"
DANGLING_GC_DELAY = 0.05

DeleteFn = Callable[[ResKey, dict[str, Any], str], "dict[str, Any] | None"]
RemoveFn = Callable[[ResKey, dict[str, Any], dict[str, Any]], None]


class GarbageCollector:
    """Collects the dependents of one server's objects.

    ``delete`` deletes one object honouring finalizers (what a DELETE does);
    ``remove`` removes one for good and lets the controllers react. ``frozen`` says the
    server is frozen: kube-controller-manager's collector cannot reach it then.
    """

    def __init__(
        self,
        store: ObjectStore,
        delete: DeleteFn,
        remove: RemoveFn,
        frozen: Callable[[], bool] = lambda: False,
    ) -> None:
        self.store = store
        self.delete = delete
        self.remove = remove
        self.frozen = frozen

    def collect(self, uid: str, policy: str) -> None:
        """Garbage-collect the dependents of the deleted owner ``uid``."""
        for dep_key in self.store.dependents_of(uid):
            dep = self.store.get(*dep_key)
            if dep is None:
                continue
            refs = dep["metadata"].get("ownerReferences") or []
            others = [r for r in refs if r.get("uid") != uid]
            if any(self.store.by_uid(r.get("uid", "")) is not None for r in others):
                self._set_owner_refs(dep_key, dep, others)
            else:
                self.delete(dep_key[0], dep, policy)

    def watch_for_dangling(self, key: ResKey, obj: dict[str, Any]) -> None:
        """Schedule the garbage collector's look at an object whose owners may all be absent."""
        uids = owner_uids(obj)
        if not uids or any(u in self.store.uids for u in uids):
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        meta = obj["metadata"]
        loop.call_later(
            DANGLING_GC_DELAY,
            self._collect_dangling,
            key,
            meta.get("namespace", ""),
            meta["name"],
            meta["uid"],
        )

    def _collect_dangling(self, key: ResKey, ns: str, name: str, uid: str) -> None:
        if self.frozen():  # the garbage collector cannot reach a frozen server: look again
            asyncio.get_running_loop().call_later(
                DANGLING_GC_DELAY, self._collect_dangling, key, ns, name, uid
            )
            return
        obj = self.store.get(key, ns, name)
        if obj is None or obj["metadata"]["uid"] != uid:
            return
        uids = owner_uids(obj)
        if uids and not any(u in self.store.uids for u in uids):
            self.delete(key, obj, "Background")

    def check_foreground(self, uid: str) -> None:
        """Finish a foreground deletion once the owner has no dependents left."""
        ref = self.store.uids.get(uid)
        owner = self.store.get(*ref) if ref else None
        if ref is None or owner is None:
            return
        meta = owner["metadata"]
        finalizers = meta.get("finalizers") or ()
        if FOREGROUND not in finalizers or self.store.dependents.get(uid):
            return
        rest = [f for f in finalizers if f != FOREGROUND]
        new = dict(owner)
        new["metadata"] = {**meta, "finalizers": rest}
        if not rest:
            del new["metadata"]["finalizers"]
            self.remove(ref[0], new, owner)
        else:
            self.store.commit(ref[0], "MODIFIED", new, owner)

    def orphan(self, uid: str) -> None:
        for dep_key in self.store.dependents_of(uid):
            dep = self.store.get(*dep_key)
            if dep is not None:
                refs = dep["metadata"].get("ownerReferences") or []
                self._set_owner_refs(dep_key, dep, [r for r in refs if r.get("uid") != uid])

    def _set_owner_refs(self, dep_key: ObjKey, dep: dict[str, Any], refs: list[Any]) -> None:
        new = dict(dep)
        meta = dict(dep["metadata"])
        if refs:
            meta["ownerReferences"] = refs
        else:
            meta.pop("ownerReferences", None)
        new["metadata"] = meta
        self.store.commit(dep_key[0], "MODIFIED", new, dep)
