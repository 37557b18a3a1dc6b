"""Objects, the resourceVersion counter, the event history and the fan-out to watchers.

Stored objects are never mutated: every write stores a new dict (nested
containers may be shared with the previous version but are never changed),
so events and history entries can hold them without copies. All methods run
on the event loop thread.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

from mcruntime import _json

if TYPE_CHECKING:
    from mcruntime.envtest._watch import Watcher

__all__ = ["StoredEvent", "ObjectStore", "ObjKey", "ResKey", "StoreState", "owner_uids"]

ResKey = tuple[str, str]
ObjKey = tuple[ResKey, str, str]


class StoredEvent:
    """One change: the object after it (``obj``) and before it (``old``, None on ADDED)."""

    __slots__ = ("rv", "key", "namespace", "type", "obj", "old", "_json")

    def __init__(
        self,
        rv: int,
        key: ResKey,
        namespace: str,
        type: str,
        obj: dict[str, Any],
        old: dict[str, Any] | None,
    ) -> None:
        self.rv = rv
        self.key = key
        self.namespace = namespace
        self.type = type
        self.obj = obj
        self.old = old
        self._json: bytes | None = None

    def object_json(self) -> bytes:
        """The object encoded once, shared by every watcher that receives it."""
        if self._json is None:
            self._json = _json.dumps(self.obj)
        return self._json


def owner_uids(obj: dict[str, Any] | None) -> set[str]:
    if not obj:
        return set()
    refs = obj.get("metadata", {}).get("ownerReferences") or ()
    return {r["uid"] for r in refs if isinstance(r, dict) and isinstance(r.get("uid"), str)}


class StoreState(NamedTuple):
    """An `ObjectStore`'s objects and resourceVersion at one moment (`ObjectStore.state`)."""

    rv: int
    objects: dict[ResKey, dict[str, dict[str, dict[str, Any]]]]
    uids: dict[str, ObjKey]
    dependents: dict[str, set[ObjKey]]


class ObjectStore:
    """All objects of one server, keyed by resource, then namespace ("" if cluster-scoped), then name."""

    def __init__(self, history: int) -> None:
        if history < 1:
            raise ValueError("history must be at least 1")
        self.rv = 1
        self.compacted_rv = 0
        self.history: deque[StoredEvent] = deque(maxlen=history)
        self.objects: dict[ResKey, dict[str, dict[str, dict[str, Any]]]] = {}
        self.watchers: dict[ResKey, set[Watcher]] = {}
        self.dependents: dict[str, set[ObjKey]] = {}
        self.uids: dict[str, ObjKey] = {}
        #: reads waiting for the resourceVersion to reach theirs (`wait_for`)
        self._fresh: list[tuple[int, asyncio.Future[None]]] = []

    def get(self, key: ResKey, namespace: str, name: str) -> dict[str, Any] | None:
        by_ns = self.objects.get(key)
        if by_ns is None:
            return None
        names = by_ns.get(namespace)
        return names.get(name) if names else None

    def by_uid(self, uid: str) -> dict[str, Any] | None:
        ref = self.uids.get(uid)
        return self.get(*ref) if ref else None

    def iter(self, key: ResKey, namespace: str | None) -> Iterator[dict[str, Any]]:
        """Objects of a resource sorted by namespace then name (``namespace`` None = all)."""
        by_ns = self.objects.get(key)
        if not by_ns:
            return
        spaces = sorted(by_ns) if namespace is None else [namespace]
        for ns in spaces:
            names = by_ns.get(ns)
            if names:
                for name in sorted(names):
                    yield names[name]

    def count(self, key: ResKey, namespace: str | None = None) -> int:
        by_ns = self.objects.get(key)
        if not by_ns:
            return 0
        if namespace is None:
            return sum(len(v) for v in by_ns.values())
        return len(by_ns.get(namespace, ()))

    def commit(
        self, key: ResKey, type: str, obj: dict[str, Any], old: dict[str, Any] | None
    ) -> dict[str, Any]:
        """Record a change (ADDED/MODIFIED store ``obj``; DELETED removes it) under a new resourceVersion.

        ``obj["metadata"]`` must be a dict owned by ``obj``: its resourceVersion is set here.
        """
        self.rv += 1
        if self._fresh:
            self._wake()
        meta = obj["metadata"]
        meta["resourceVersion"] = str(self.rv)
        ns = meta.get("namespace", "")
        name = meta["name"]
        objkey: ObjKey = (key, ns, name)
        by_ns = self.objects.setdefault(key, {})
        if type == "DELETED":
            names = by_ns.get(ns)
            if names is not None:
                names.pop(name, None)
                if not names:
                    del by_ns[ns]
            self.uids.pop(meta.get("uid", ""), None)
            new_owners: set[str] = set()
        else:
            by_ns.setdefault(ns, {})[name] = obj
            if old is None:
                self.uids[meta["uid"]] = objkey
            new_owners = owner_uids(obj)
        old_owners = owner_uids(old)
        if new_owners != old_owners:
            for uid in old_owners - new_owners:
                deps = self.dependents.get(uid)
                if deps is not None:
                    deps.discard(objkey)
                    if not deps:
                        del self.dependents[uid]
            for uid in new_owners - old_owners:
                self.dependents.setdefault(uid, set()).add(objkey)
        ev = StoredEvent(self.rv, key, ns, type, obj, old)
        if len(self.history) == self.history.maxlen:
            self.compacted_rv = self.history[0].rv
        self.history.append(ev)
        watchers = self.watchers.get(key)
        if watchers:
            for w in tuple(watchers):
                w.offer(ev)
        return obj

    def dependents_of(self, uid: str) -> list[ObjKey]:
        return sorted(self.dependents.get(uid, ()))

    def events_since(self, rv: int) -> list[StoredEvent] | None:
        """Events after ``rv`` in order, or None when some of them are no longer retained."""
        if rv < self.compacted_rv:
            return None
        out: list[StoredEvent] = []
        for ev in reversed(self.history):
            if ev.rv <= rv:
                break
            out.append(ev)
        out.reverse()
        return out

    def compact(self) -> None:
        """Forget the history: any resourceVersion handed out so far becomes too old to resume from."""
        self.history.clear()
        self.rv += 1
        self.compacted_rv = self.rv
        if self._fresh:
            self._wake()

    async def wait_for(self, rv: int, seconds: float) -> bool:
        """Wait until the resourceVersion reaches ``rv`` (True) or ``seconds`` pass (False).

        As kube-apiserver's watch cache blocks a read asking for a resourceVersion it has
        not seen yet (``waitUntilFreshAndBlock``). `cut_waiting` ends the wait.
        """
        if self.rv >= rv:
            return True
        waiting = (rv, asyncio.get_running_loop().create_future())
        self._fresh.append(waiting)
        try:
            await asyncio.wait_for(waiting[1], seconds)
        except TimeoutError:
            return False
        finally:
            with contextlib.suppress(ValueError):
                self._fresh.remove(waiting)
        return True

    def _wake(self) -> None:
        for rv, fut in self._fresh:
            if rv <= self.rv and not fut.done():
                fut.set_result(None)

    def cut_waiting(self) -> None:
        """The server stops: the reads `wait_for` holds end (their connections are cut)."""
        for _rv, fut in self._fresh:
            fut.cancel()

    def add_watcher(self, w: Watcher) -> None:
        self.watchers.setdefault(w.key, set()).add(w)

    def remove_watcher(self, w: Watcher) -> None:
        ws = self.watchers.get(w.key)
        if ws is not None:
            ws.discard(w)
            if not ws:
                del self.watchers[w.key]

    def all_watchers(self) -> list[Watcher]:
        return [w for ws in self.watchers.values() for w in ws]

    def state(self) -> StoreState:
        """What the store holds now (objects, resourceVersion), for `restore`: copies of its
        indexes, sharing the stored objects, which are never changed."""
        return StoreState(
            self.rv,
            {
                key: {ns: dict(names) for ns, names in by_ns.items()}
                for key, by_ns in self.objects.items()
            },
            dict(self.uids),
            {uid: set(deps) for uid, deps in self.dependents.items()},
        )

    def restore(self, state: StoreState, bump: int = 0) -> None:
        """Hold ``state`` again, its resourceVersion raised by ``bump``, as etcd restored from a
        snapshot (``etcdutl snapshot restore --bump-revision``) under a kube-apiserver started
        again: its watch cache has no history, so resuming from any resourceVersion older than
        the restored one gets 410, and one at or past it waits for newer events."""
        self.rv = state.rv + bump
        self.compacted_rv = self.rv
        self.history.clear()
        self.objects = {
            key: {ns: dict(names) for ns, names in by_ns.items()}
            for key, by_ns in state.objects.items()
        }
        self.uids = dict(state.uids)
        self.dependents = {uid: set(deps) for uid, deps in state.dependents.items()}

    def drop_resource(self, key: ResKey) -> None:
        """Forget every object of a resource without events (after they were deleted one by one)."""
        self.objects.pop(key, None)
