"""A thread-safe object store keyed by ``namespace/name``, with secondary indexes."""

from __future__ import annotations

import builtins
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from mcruntime._threads import interrupted

log = logging.getLogger("mcruntime.cache")

IndexFunc = Callable[[dict[str, Any]], "Iterable[str] | str | None"]
"""Maps an object to the index values it is found under: several, one (a str), or None."""

NAMESPACE_INDEX = "namespace"


def object_key(obj: Mapping[str, Any]) -> str:
    """The store key of ``obj``: ``"namespace/name"``, or ``"name"`` when cluster-scoped."""
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    name = meta.get("name", "")
    return f"{ns}/{name}" if ns else name


def strip_managed_fields(obj: dict[str, Any]) -> dict[str, Any]:
    """Default informer transform: drop ``metadata.managedFields`` (in place) to save memory.

    Managed fields are often the bulk of an object and controllers rarely read
    them; across a fleet they are what makes caches too big.
    """
    meta = obj.get("metadata")
    if meta:
        meta.pop("managedFields", None)
    return obj


def namespace_index(obj: dict[str, Any]) -> list[str]:
    """Index function of the built-in ``"namespace"`` index ("" for cluster-scoped objects)."""
    return [(obj.get("metadata") or {}).get("namespace") or ""]


def _values(fn: IndexFunc, name: str, obj: dict[str, Any], owner: str) -> tuple[str, ...]:
    try:
        out: Any = fn(obj)
    except BaseException as exc:  # sys.exit() in it leaves this object out, not ends the watches
        if interrupted(exc):
            raise
        log.exception(
            "%sindex %r failed for %s; object not indexed there", owner, name, object_key(obj)
        )
        return ()
    if out is None:
        return ()
    if isinstance(out, str):
        return (out,)
    if out.__class__ is list and len(out) == 1 and out[0].__class__ is str:
        return (out[0],)  # the common one-value index (e.g. namespace), without the dedup dict
    return tuple(dict.fromkeys(out))


class Store:
    """Objects (plain dicts) by key, plus named indexes; safe to use from many threads.

    Reads return the stored dicts themselves, never copies: callers must treat
    them as read-only (copy before changing one). Writes come from the informer.
    The ``"namespace"`` index (by ``metadata.namespace``) is always present.
    """

    def __init__(self, indexers: Mapping[str, IndexFunc] | None = None) -> None:
        self._lock = threading.Lock()
        self._items: dict[str, dict[str, Any]] = {}
        self._indexers: dict[str, IndexFunc] = {NAMESPACE_INDEX: namespace_index}
        self._indices: dict[str, dict[str, set[str]]] = {NAMESPACE_INDEX: {}}
        self.resource_version = ""
        #: what the store holds, starting its log lines (its informer's "cluster=c1 kind=v1/Pod: ")
        self._owner = ""
        if indexers:
            self.add_indexers(indexers)

    # -- reads ------------------------------------------------------------------

    def get(self, key: str) -> dict[str, Any] | None:
        """The object stored under ``key`` (see [`object_key()`][mcruntime.cache.object_key]), or None."""
        with self._lock:
            return self._items.get(key)

    def list(self) -> builtins.list[dict[str, Any]]:
        """A snapshot list of every stored object."""
        with self._lock:
            return list(self._items.values())

    def keys(self) -> builtins.list[str]:
        """A snapshot list of every key."""
        with self._lock:
            return list(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.list())

    def indexers(self) -> dict[str, IndexFunc]:
        """The registered index functions by name."""
        with self._lock:
            return dict(self._indexers)

    def by_index(self, index_name: str, value: str) -> builtins.list[dict[str, Any]]:
        """Objects whose index ``index_name`` contains ``value``.

        Raises KeyError when no index of that name exists.
        """
        with self._lock:
            index = self._indices.get(index_name)
            if index is None:
                raise KeyError(f"no index named {index_name!r}")
            keys = index.get(value)
            if not keys:
                return []
            items = self._items
            return [items[k] for k in keys]

    def index_keys(self, index_name: str, value: str) -> builtins.list[str]:
        """Keys of the objects whose index ``index_name`` contains ``value``."""
        with self._lock:
            index = self._indices.get(index_name)
            if index is None:
                raise KeyError(f"no index named {index_name!r}")
            return list(index.get(value, ()))

    # -- indexers ---------------------------------------------------------------

    def add_indexers(self, indexers: Mapping[str, IndexFunc]) -> None:
        """Register indexes; objects already stored are indexed at once.

        Raises ValueError if a name is already registered.
        """
        with self._lock:
            clash = [n for n in indexers if n in self._indexers]
            if clash:
                raise ValueError(f"index {clash[0]!r} already exists")
            for name, fn in indexers.items():
                index: dict[str, set[str]] = {}
                for key, obj in self._items.items():
                    for v in _values(fn, name, obj, self._owner):
                        index.setdefault(v, set()).add(key)
                self._indexers[name] = fn
                self._indices[name] = index

    # -- writes (used by the informer) ------------------------------------------

    def add(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        """Store ``obj`` (inserting or replacing); returns the object it replaced, if any."""
        key = object_key(obj)
        with self._lock:
            old = self._items.get(key)
            self._items[key] = obj
            self._reindex(key, old, obj)
            return old

    update = add

    def _put(self, key: str, obj: dict[str, Any]) -> dict[str, Any] | None:
        """[`add()`][mcruntime.cache.Store.add] with ``object_key(obj)`` already known (the informer's list has it)."""
        with self._lock:
            old = self._items.get(key)
            self._items[key] = obj
            self._reindex(key, old, obj)
            return old

    def delete(self, obj: dict[str, Any] | str) -> dict[str, Any] | None:
        """Remove the object (or key); returns the stored object that was removed, if any."""
        key = obj if isinstance(obj, str) else object_key(obj)
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._reindex(key, old, None)
            return old

    def replace(self, objects: Iterable[dict[str, Any]], resource_version: str) -> None:
        """Replace the whole content with ``objects`` (as of ``resource_version``)."""
        items = {object_key(o): o for o in objects}
        with self._lock:
            self._items = items
            for name, fn in self._indexers.items():
                index: dict[str, set[str]] = {}
                if fn is namespace_index:  # the key's first part, as in _reindex
                    for key in items:
                        index.setdefault(key.rpartition("/")[0], set()).add(key)
                else:
                    for key, obj in items.items():
                        for v in _values(fn, name, obj, self._owner):
                            index.setdefault(v, set()).add(key)
                self._indices[name] = index
            self.resource_version = resource_version

    def _reindex(self, key: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        for name, fn in self._indexers.items():
            index = self._indices[name]
            if fn is namespace_index:
                # the namespace is the key's first part (a name has no "/"): an object
                # stored again under its key keeps its namespace, and a new or removed
                # one needs no look into the object
                if (old is None) == (new is None):
                    continue
                ns: tuple[str, ...] = (key.rpartition("/")[0],)
                old_vals, new_vals = ((), ns) if old is None else (ns, ())
            else:
                old_vals = _values(fn, name, old, self._owner) if old is not None else ()
                new_vals = _values(fn, name, new, self._owner) if new is not None else ()
                if old_vals == new_vals:
                    continue
            for v in old_vals:
                if v in new_vals:
                    continue
                keys = index.get(v)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del index[v]
            for v in new_vals:
                index.setdefault(v, set()).add(key)
