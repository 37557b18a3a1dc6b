"""Field ownership: ``metadata.managedFields`` as kube-apiserver records it.

A field set is a set of paths; a path is a tuple of FieldsV1 elements
(``f:name`` for a field, ``k:{"name":"web"}`` for an item of a keyed list,
``v:"x"`` for a value of a set, ``i:0`` for a position), so converting to and
from the ``fieldsV1`` wire form is a walk over nested dicts. The members of a
set are the leaves of an object (scalars, atomic lists and maps, empty
containers) plus the items of keyed lists.

Every write records who changed what: create, update and non-apply patches add
the fields they changed to an ``Update`` entry of their field manager and take
them from every other manager (as structured-merge-diff's ``Updater.Update``
does); server-side apply (see `_apply.py`) replaces its manager's ``Apply``
entry with the fields of the applied configuration.

What an update changed is [`compare`][]: structured-merge-diff's
``TypedValue.Compare`` (``typed/compare.go``). An empty map or list is a leaf
only while it is empty (or absent) on both sides, so filling ``data: {}`` with
a key changes ``data.x`` alone and whoever owns the empty ``data`` keeps it,
and emptying ``data`` removes its keys but gives nobody ``data``.
structured-merge-diff also records a map or list an update creates as a member
of its own (the ``"."`` of ``fieldsV1``); envtest records that only for the
items of keyed lists, since for built-in kinds it depends on which Go fields are
structs that the empty object already holds.

How lists and maps merge comes from a [`Shape`][]: a CRD version's structural
schema (``x-kubernetes-list-type``, ``x-kubernetes-list-map-keys``,
``x-kubernetes-map-type``), or for built-in kinds the merge keys of
[`mcruntime._patch.DEFAULT_MERGE_KEYS`][] (the same table strategic merge
patches and the OpenAPI documents use) except where Kubernetes' types declare
other ``+listMapKey``s (`SSA_LIST_MAP_KEYS`). A key field the item leaves out
that has a default (a port's ``protocol``, a CRD schema's ``default``) counts
with its default, as structured-merge-diff builds the key from the schema
default (``merge/default_keys_test.go``).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any, Final

import orjson

from mcruntime._patch import DEFAULT_MERGE_KEYS
from mcruntime.envtest._names import now

__all__ = [
    "Path",
    "Shape",
    "shape_for",
    "fieldset",
    "members",
    "changed_members",
    "compare",
    "to_fields_v1",
    "from_fields_v1",
    "get_at",
    "remove_paths",
    "path_string",
    "track_update",
    "sort_entries",
    "MISSING",
    "SERVER_META",
    "SSA_LIST_MAP_KEYS",
    "duplicate_keys",
]

Path = tuple[str, ...]
MISSING: Final[Any] = object()
SERVER_META: Final = frozenset(
    {
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "managedFields",
        "selfLink",
    }
)


#: The list-map keys of built-in list fields (the ``+listType=map`` ``+listMapKey``s of
#: k8s.io/api, which kube-apiserver's OpenAPI publishes as ``x-kubernetes-list-map-keys``)
#: where they differ from the strategic merge key, each with the defaults of its key fields
#: (``+default``): a container's ports by ``containerPort`` and ``protocol``, a Service's by
#: ``port`` and ``protocol`` (both ``TCP`` by default), topology spread constraints by
#: ``topologyKey`` and ``whenUnsatisfiable``; keyed lists strategic merge patch does not
#: merge (a container's resource ``claims``, ``matchConditions`` and ``variables`` of
#: webhooks and admission policies, by ``name``); no keys for a list Kubernetes declares
#: ``atomic`` though strategic merge patch merges it (a Pod's ``hostIPs``). Scoped as in
#: ``DEFAULT_MERGE_KEYS``.
SSA_LIST_MAP_KEYS: Final[dict[str, tuple[tuple[str, ...], dict[str, Any]]]] = {
    "containers.ports": (("containerPort", "protocol"), {"protocol": "TCP"}),
    "initContainers.ports": (("containerPort", "protocol"), {"protocol": "TCP"}),
    "ephemeralContainers.ports": (("containerPort", "protocol"), {"protocol": "TCP"}),
    "spec.ports": (("port", "protocol"), {"protocol": "TCP"}),
    "topologySpreadConstraints": (("topologyKey", "whenUnsatisfiable"), {}),
    "resources.claims": (("name",), {}),
    "matchConditions": (("name",), {}),
    "variables": (("name",), {}),
    "hostIPs": ((), {}),
}


#: List types one built-in kind declares unlike the others (``SSA_LIST_MAP_KEYS``' form):
#: batch/v1 ``JobStatus.Conditions`` is ``+listType=atomic``.
_KIND_LIST_TYPES: Final[dict[tuple[str, str], tuple[tuple[str, ...], dict[str, Any]]]] = {
    ("Job", "status.conditions"): ((), {}),
}


def _dumps(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


class Shape:
    """How the lists and maps at one place of an object merge and are owned."""

    __slots__ = ("schema", "field", "builtin", "kind")

    def __init__(
        self,
        schema: dict[str, Any] | None,
        field: str = "",
        builtin: bool = False,
        kind: str = "",
    ):
        self.schema = schema
        self.field = field  # the field whose value this is (built-in merge key scope)
        self.builtin = builtin
        self.kind = kind  # the built-in kind (list types declared for one kind only)

    def child(self, name: str) -> Shape:
        if self.builtin:
            return Shape(None, name, True, self.kind)
        if self.field == "" and name == "metadata":
            return Shape(None, "metadata", True)  # ObjectMeta, whatever a CRD schema says
        s = self.schema or {}
        props = s.get("properties")
        if isinstance(props, dict) and name in props:
            return Shape(props[name], name)
        additional = s.get("additionalProperties")
        return Shape(additional if isinstance(additional, dict) else None, name)

    def item(self) -> Shape:
        if self.builtin:
            return self
        items = (self.schema or {}).get("items")
        return Shape(items if isinstance(items, dict) else None, self.field)

    def list_type(self, parent: str) -> tuple[str, tuple[str, ...]]:
        """("atomic" | "set" | "map", map keys) of the list held by this field."""
        if self.builtin:
            ssa = _KIND_LIST_TYPES.get((self.kind, f"{parent}.{self.field}"))
            if ssa is None:
                ssa = self._ssa_keys(parent)
            if ssa is not None:
                return ("map", ssa[0]) if ssa[0] else ("atomic", ())
            key = DEFAULT_MERGE_KEYS.get(f"{parent}.{self.field}") if parent else None
            if key is None:
                key = DEFAULT_MERGE_KEYS.get(self.field)
            if key is None:
                return ("atomic", ())
            return ("set", ()) if key == "" else ("map", (key,))
        s = self.schema or {}
        kind = s.get("x-kubernetes-list-type", "atomic")
        if kind == "map":
            keys = s.get("x-kubernetes-list-map-keys") or ()
            return ("map", tuple(keys)) if keys else ("atomic", ())
        return ("set", ()) if kind == "set" else ("atomic", ())

    def _ssa_keys(self, parent: str) -> tuple[tuple[str, ...], dict[str, Any]] | None:
        found = SSA_LIST_MAP_KEYS.get(f"{parent}.{self.field}") if parent else None
        return found if found is not None else SSA_LIST_MAP_KEYS.get(self.field)

    def key_defaults(self, parent: str) -> dict[str, Any]:
        """The defaults of the map keys of the list held by this field (none when none)."""
        if self.builtin:
            ssa = self._ssa_keys(parent)
            return ssa[1] if ssa is not None else {}
        s = self.schema or {}
        items = s.get("items")
        props = items.get("properties") if isinstance(items, dict) else None
        if s.get("x-kubernetes-list-type") != "map" or not isinstance(props, dict):
            return {}
        return {
            k: props[k]["default"]
            for k in s.get("x-kubernetes-list-map-keys") or ()
            if isinstance(props.get(k), dict) and props[k].get("default") is not None
        }

    @property
    def atomic_map(self) -> bool:
        return not self.builtin and (self.schema or {}).get("x-kubernetes-map-type") == "atomic"


def shape_for(schema: dict[str, Any] | None, builtin: bool, kind: str = "") -> Shape:
    """The root shape of an object: built-in merge keys (of ``kind``), or a CRD version's
    schema."""
    return Shape(None, "", True, kind) if builtin else Shape(schema or {}, "")


def item_key(
    item: Any, keys: tuple[str, ...], defaults: dict[str, Any] | None = None
) -> str | None:
    """The ``k:`` element of a keyed list item (None when it is not an object); a key field
    it leaves out counts with its default in ``defaults``, if any."""
    if not isinstance(item, dict):
        return None
    d = defaults or {}
    return "k:" + _dumps({k: item[k] if k in item else d[k] for k in keys if k in item or k in d})


_MEMBER: Final[Any] = object()  # the value recorded for list items and set values


def _walk(value: Any, shape: Shape, parent: str, prefix: Path, out: dict[Path, Any]) -> None:
    if isinstance(value, dict) and value and not shape.atomic_map:
        for k, v in value.items():
            _walk(v, shape.child(k), shape.field, (*prefix, "f:" + k), out)
        return
    if isinstance(value, list) and value:
        kind, keys = shape.list_type(parent)
        if kind == "map" and all(isinstance(i, dict) for i in value):
            item_shape = shape.item()
            defaults = shape.key_defaults(parent)
            for it in value:
                p = (*prefix, item_key(it, keys, defaults) or "")
                out[p] = _MEMBER
                for k, v in it.items():
                    _walk(v, item_shape.child(k), item_shape.field, (*p, "f:" + k), out)
            return
        if kind == "set":
            for v in value:
                out[(*prefix, "v:" + _dumps(v))] = _MEMBER
            return
    if prefix:
        out[prefix] = value


def duplicate_keys(value: Any, shape: Shape, parent: str = "", prefix: Path = ()) -> list[str]:
    """The items of keyed lists in ``value`` whose key an earlier item of the list has, each
    as structured-merge-diff's typed conversion refuses it without ``AllowDuplicates``
    (``typed/validate.go``): ``.spec.containers[name="c"].env: duplicate entries for key
    [name="A"]``."""
    out: list[str] = []
    if isinstance(value, dict) and not shape.atomic_map:
        for k, v in value.items():
            out += duplicate_keys(v, shape.child(k), shape.field, (*prefix, "f:" + k))
    elif isinstance(value, list):
        kind, keys = shape.list_type(parent)
        if kind == "map" and all(isinstance(i, dict) for i in value):
            item_shape = shape.item()
            defaults = shape.key_defaults(parent)
            seen: set[str] = set()
            for it in value:
                key = item_key(it, keys, defaults) or ""
                if key in seen:
                    where = path_string(prefix)
                    out.append(f"{where}: duplicate entries for key {path_string((key,))}")
                seen.add(key)
                for k, v in it.items():
                    out += duplicate_keys(
                        v, item_shape.child(k), item_shape.field, (*prefix, key, "f:" + k)
                    )
    return out


def trim(obj: dict[str, Any], status: str) -> dict[str, Any]:
    """The part of an object whose fields are owned.

    ``status``: "main" drops ``.status`` (a kind with a status subresource), "only"
    keeps only ``.status`` (a write to that subresource), "" keeps it.
    """
    if status == "only":
        return {"status": obj["status"]} if "status" in obj else {}
    out = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
    if status == "main":
        out.pop("status", None)
    meta = out.get("metadata")
    if isinstance(meta, dict):
        meta = {k: v for k, v in meta.items() if k not in SERVER_META}
        if meta:
            out["metadata"] = meta
        else:
            del out["metadata"]
    return out


def members(obj: dict[str, Any], shape: Shape) -> dict[Path, Any]:
    """The owned paths of an (already trimmed) object, each with its value (leaves)."""
    out: dict[Path, Any] = {}
    _walk(obj, shape, "", (), out)
    return out


def fieldset(obj: dict[str, Any], shape: Shape) -> set[Path]:
    """The owned paths of an (already trimmed) object."""
    return set(members(obj, shape))


def changed_members(old: dict[Path, Any], new: dict[Path, Any]) -> set[Path]:
    """Paths of ``new`` that ``old`` lacks or holds with another value."""
    return {p for p, v in new.items() if p not in old or (v is not _MEMBER and old[p] != v)}


def _container(value: Any, shape: Shape, parent: str) -> str:
    """How `compare` walks a value: "map", "keyed" or "set" (by its members), or "leaf"."""
    if isinstance(value, dict) and not shape.atomic_map:
        return "map"
    if isinstance(value, list):
        kind = shape.list_type(parent)[0]
        if kind == "map" and all(isinstance(i, dict) for i in value):
            return "keyed"
        if kind == "set":
            return "set"
    return "leaf"


def compare(old: Any, new: Any, shape: Shape) -> tuple[set[Path], set[Path]]:
    """(changed, removed): the members an update from ``old`` to ``new`` (trimmed objects,
    ``old`` `MISSING` for a create) added or modified, and those it removed.

    As structured-merge-diff's ``TypedValue.Compare``: a map or list is compared member
    by member unless it is empty (or absent) on both sides, then it is a leaf; so an empty
    ``data: {}`` that gains a key is neither modified nor removed (only ``data.x`` is
    added), and ``data`` emptied of its keys loses them without being added.
    """
    changed: set[Path] = set()
    removed: set[Path] = set()
    _compare(old, new, shape, "", (), changed, removed)
    return changed, removed


def _compare(
    old: Any,
    new: Any,
    shape: Shape,
    parent: str,
    prefix: Path,
    changed: set[Path],
    removed: set[Path],
) -> None:
    """One value of `compare` at ``prefix`` (either side may be `MISSING`). A map or list
    that one side lacks is not recorded itself (the ``"."`` envtest leaves out), except an
    item of a keyed list, which is a member with its fields."""
    kinds = {_container(v, shape, parent) for v in (old, new) if v is not MISSING}
    item = bool(prefix) and prefix[-1].startswith("k:")
    if len(kinds) > 1:
        # a value of another type: the path is modified, the members of the old value
        # removed and those of the new one added
        inner_changed: set[Path] = set()
        inner_removed: set[Path] = set()
        _compare(old, MISSING, shape, parent, prefix, inner_changed, inner_removed)
        _compare(MISSING, new, shape, parent, prefix, inner_changed, inner_removed)
        changed.update(inner_changed - {prefix})
        removed.update(inner_removed - {prefix})
        if prefix:
            changed.add(prefix)
        return
    kind = kinds.pop()
    if kind == "leaf" or all(v is MISSING or v in ({}, []) for v in (old, new)):
        if not prefix:
            return
        if old is MISSING:
            changed.add(prefix)
        elif new is MISSING:
            removed.add(prefix)
        elif old != new or isinstance(old, bool) is not isinstance(new, bool):
            changed.add(prefix)
        return
    if item and old is MISSING:
        changed.add(prefix)
    elif item and new is MISSING:
        removed.add(prefix)
    if kind == "map":
        olds = old if isinstance(old, dict) else {}
        news = new if isinstance(new, dict) else {}
        for k in olds.keys() | news.keys():
            _compare(
                olds.get(k, MISSING),
                news.get(k, MISSING),
                shape.child(k),
                shape.field,
                (*prefix, "f:" + k),
                changed,
                removed,
            )
    elif kind == "keyed":
        keys = shape.list_type(parent)[1]
        d = shape.key_defaults(parent)
        item_shape = shape.item()
        olds = {item_key(i, keys, d): i for i in reversed(old)} if isinstance(old, list) else {}
        news = {item_key(i, keys, d): i for i in reversed(new)} if isinstance(new, list) else {}
        for k in olds.keys() | news.keys():
            _compare(
                olds.get(k, MISSING),
                news.get(k, MISSING),
                item_shape,
                parent,
                (*prefix, k or ""),
                changed,
                removed,
            )
    else:  # a set: its values are leaves
        before = {_dumps(v) for v in old} if isinstance(old, list) else set()
        after = {_dumps(v) for v in new} if isinstance(new, list) else set()
        changed.update((*prefix, "v:" + v) for v in after - before)
        removed.update((*prefix, "v:" + v) for v in before - after)


def get_at(obj: Any, path: Path) -> Any:
    """The value at ``path``, or `MISSING`."""
    node = obj
    for el in path:
        if el.startswith("f:"):
            if not isinstance(node, dict) or el[2:] not in node:
                return MISSING
            node = node[el[2:]]
        elif el.startswith("k:"):
            if not isinstance(node, list):
                return MISSING
            keys = tuple(orjson.loads(el[2:]))
            found = next((i for i in node if item_key(i, keys) == el), MISSING)
            if found is MISSING:
                return MISSING
            node = found
        elif el.startswith("v:"):
            value = orjson.loads(el[2:])
            if not isinstance(node, list) or value not in node:
                return MISSING
            node = value
        elif el.startswith("i:"):
            i = int(el[2:])
            if not isinstance(node, list) or i >= len(node):
                return MISSING
            node = node[i]
        else:
            return MISSING
    return node


def _remove_one(obj: Any, path: Path) -> None:
    *head, last = path
    node = obj
    for el in head:
        if el.startswith("f:") and isinstance(node, dict):
            node = node.get(el[2:], MISSING)
        elif el.startswith("k:") and isinstance(node, list):
            keys = tuple(orjson.loads(el[2:]))
            node = next((i for i in node if item_key(i, keys) == el), MISSING)
        else:
            return
        if node is MISSING:
            return
    if last.startswith("f:") and isinstance(node, dict):
        node.pop(last[2:], None)
    elif last.startswith("k:") and isinstance(node, list):
        keys = tuple(orjson.loads(last[2:]))
        node[:] = [i for i in node if item_key(i, keys) != last]
    elif last.startswith("v:") and isinstance(node, list):
        value = orjson.loads(last[2:])
        node[:] = [i for i in node if i != value]


def _copy_path(obj: Any, path: Path) -> Any:
    """Copy the containers along ``path`` so removing below it does not touch shared values."""
    if isinstance(obj, dict):
        out: Any = dict(obj)
    elif isinstance(obj, list):
        out = list(obj)
    else:
        return obj
    if not path:
        return out
    el, rest = path[0], path[1:]
    if el.startswith("f:") and isinstance(out, dict) and el[2:] in out:
        out[el[2:]] = _copy_path(out[el[2:]], rest)
    elif el.startswith("k:") and isinstance(out, list):
        keys = tuple(orjson.loads(el[2:]))
        out[:] = [_copy_path(i, rest) if item_key(i, keys) == el else i for i in out]
    return out


def remove_paths(obj: dict[str, Any], paths: Iterable[Path], keep: set[Path]) -> dict[str, Any]:
    """A copy of ``obj`` without ``paths``; containers left empty go too unless in ``keep``."""
    out = obj
    paths = set(paths)
    tops = [p for p in paths if not any(p[:n] in paths for n in range(1, len(p)))]
    for path in sorted(tops, key=len, reverse=True):
        out = _copy_path(out, path)
        _remove_one(out, path)
        parent = path[:-1]
        while parent and parent not in keep:
            value = get_at(out, parent)
            if value is MISSING or value not in ({}, []):
                break
            _remove_one(out, parent)
            parent = parent[:-1]
    return out


# --------------------------------------------------------------------- wire form


def to_fields_v1(paths: Iterable[Path]) -> dict[str, Any]:
    """The ``fieldsV1`` tree of a set of paths ("." marks a member that has children)."""
    root: dict[str, Any] = {}
    members = set(paths)
    for path in members:
        node = root
        for el in path:
            node = node.setdefault(el, {})
    for path in members:
        node = root
        for el in path:
            node = node[el]
        if node and "." not in node:
            node["."] = {}
    return _sorted(root)


def _sorted(node: dict[str, Any]) -> dict[str, Any]:
    return {k: _sorted(node[k]) for k in sorted(node, key=lambda k: (k != ".", k))}


def from_fields_v1(tree: Any, prefix: Path = ()) -> set[Path]:
    """The paths of a ``fieldsV1`` tree."""
    out: set[Path] = set()
    if not isinstance(tree, dict):
        return out
    for k, v in tree.items():
        if k == ".":
            if prefix:
                out.add(prefix)
            continue
        p = (*prefix, k)
        if isinstance(v, dict) and v:
            out |= from_fields_v1(v, p)
        else:
            out.add(p)
    return out


def path_string(path: Path) -> str:
    """A path as structured-merge-diff prints it: ``.spec.containers[name="web"].image``."""
    parts = []
    for el in path:
        tag, body = el[:2], el[2:]
        if tag == "f:":
            parts.append("." + body)
        elif tag == "k:":
            keys = orjson.loads(body)
            parts.append("[" + ",".join(f"{k}={_dumps(v)}" for k, v in keys.items()) + "]")
        elif tag == "v:":
            parts.append(f"[={body}]")
        else:
            parts.append(f"[{body}]")
    return "".join(parts)


# --------------------------------------------------------------------- entries


def entry_id(entry: dict[str, Any]) -> tuple[str, str, str, str]:
    """What makes two entries the same manager: name, operation, version (Update), subresource."""
    op = entry.get("operation", "")
    return (
        entry.get("manager", ""),
        op,
        entry.get("apiVersion", "") if op == "Update" else "",
        entry.get("subresource", ""),
    )


def manager_label(entry: dict[str, Any]) -> str:
    """How kube-apiserver names a manager in conflict messages."""
    label = _dumps(entry.get("manager", ""))
    if entry.get("subresource"):
        label += f" with subresource {_dumps(entry['subresource'])}"
    if entry.get("operation") == "Update":
        label += f" using {entry.get('apiVersion', '')}"
    return label


def make_entry(
    manager: str,
    operation: str,
    api_version: str,
    subresource: str,
    paths: set[Path],
    *,
    timed: bool = True,
) -> dict[str, Any]:
    """A new entry owning ``paths``; with the current time unless not ``timed``."""
    entry: dict[str, Any] = {"manager": manager, "operation": operation, "apiVersion": api_version}
    if timed:
        entry["time"] = now()
    entry["fieldsType"] = "FieldsV1"
    entry["fieldsV1"] = to_fields_v1(paths)
    if subresource:
        entry["subresource"] = subresource
    return entry


def _seconds(entry: dict[str, Any]) -> int:
    """An entry's time as Unix seconds; 0 without one."""
    t = entry.get("time")
    try:
        return int(datetime.fromisoformat(str(t).replace("Z", "+00:00")).timestamp()) if t else 0
    except ValueError:
        return 0


def sort_entries(entries: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Entries in the order kube-apiserver writes them (``sortEncodedManagedFields``):
    ``Apply`` before ``Update``, then by time (none first), manager, version, subresource."""
    if isinstance(entries, list) and len(entries) < 2:
        return entries  # the common case of every write: nothing to order
    return sorted(
        entries,
        key=lambda e: (
            e.get("operation", ""),
            _seconds(e),
            e.get("manager", ""),
            e.get("apiVersion", ""),
            e.get("subresource", ""),
        ),
    )


def parsed(entries: Any) -> list[tuple[dict[str, Any], set[Path]]]:
    """(entry, its paths) for each well-formed entry of ``metadata.managedFields``."""
    out = []
    for e in entries if isinstance(entries, list) else ():
        if isinstance(e, dict) and isinstance(e.get("manager"), str):
            out.append((e, from_fields_v1(e.get("fieldsV1"))))
    return out


def equivalent(a: Any, b: Any) -> bool:
    """Whether two ``managedFields`` lists record the same managers and fields
    (a client's re-encoding of the times does not count)."""
    return [(entry_id(e), s) for e, s in parsed(a)] == [(entry_id(e), s) for e, s in parsed(b)]


def rebuild(
    items: list[tuple[dict[str, Any], set[Path]]],
    before: list[tuple[dict[str, Any], set[Path]]],
    stamped: tuple[str, str, str, str] | None,
) -> list[dict[str, Any]]:
    """Entries for ``items`` (emptied ones dropped), each with its fields.

    As kube-apiserver's ``managedFieldsUpdater`` (``managedfieldsupdater.go``): only the
    writer's entry, ``stamped`` (its `entry_id`; None when its write changed nothing),
    gets the current time; every other entry keeps its time, also one that lost fields.
    """
    old = {entry_id(e): s for e, s in before}
    out = []
    for e, s in items:
        if not s:
            continue
        if old.get(entry_id(e)) != s or "fieldsV1" not in e:
            e = {**e, "fieldsV1": to_fields_v1(s)}
        if stamped is not None and entry_id(e) == stamped:
            e = _in_order({**e, "time": now()})
        out.append(e)
    return out


_ENTRY_ORDER: Final = (
    "manager",
    "operation",
    "apiVersion",
    "time",
    "fieldsType",
    "fieldsV1",
    "subresource",
)


def _in_order(entry: dict[str, Any]) -> dict[str, Any]:
    """``entry`` with its keys in the order kube-apiserver writes them."""
    known: dict[str, Any] = {k: entry[k] for k in _ENTRY_ORDER if k in entry}
    return {**known, **{k: v for k, v in entry.items() if k not in known}}


def track_update(
    old: dict[str, Any] | None,
    new: dict[str, Any],
    base: Any,
    *,
    manager: str,
    api_version: str,
    subresource: str,
    status: str,
    shape: Shape,
) -> list[dict[str, Any]]:
    """``managedFields`` after an Update operation by ``manager`` turned ``old`` into ``new``.

    ``base`` is the entries to start from (the stored ones, or those a PUT sent);
    ``status`` as for [`trim`][]. None when ``old`` exists and ``base`` has none: as
    kube-apiserver's ``skipNonAppliedManager``, an update tracks no fields of an object
    whose fields nobody owns (an apply does, see `_apply.py`).
    """
    before = parsed(base)
    if old is not None and not before:
        # kube-apiserver's skipNonAppliedManager.Update (skipnonapplied.go): an update of an
        # existing object whose managedFields are empty (or reset with []) starts no tracking
        return []
    changed, removed = compare(
        trim(old, status) if old is not None else MISSING, trim(new, status), shape
    )
    me = (manager, "Update", api_version, subresource)
    items: list[tuple[dict[str, Any], set[Path]]] = []
    mine: set[Path] | None = None
    for e, s in before:
        if entry_id(e) == me:
            mine = (s - removed) | changed
            items.append((e, mine))
        else:
            items.append((e, s - changed - removed))
    if mine is None and changed:
        items.append((make_entry(manager, "Update", api_version, subresource, changed), changed))
    return rebuild(items, before, me if changed else None)
