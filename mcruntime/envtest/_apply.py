"""Server-side apply: ``PATCH`` with ``application/apply-patch+yaml``.

The applied configuration is merged into the live object by the list and map
semantics of its [`Shape`][mcruntime.envtest._managedfields.Shape]; a field it
would change that another manager owns is a conflict (409 with one cause per
field, as kube-apiserver words it) unless ``force=true`` takes it over; fields
the manager applied before and no longer applies are removed unless another
manager owns them. The manager's ``Apply`` entry then holds exactly the fields
of the applied configuration. Applying to an absent object creates it. An object
whose ``managedFields`` are empty has its fields recorded as an ``Update`` of
``before-first-apply`` before it is applied to, as kube-apiserver's
``skipNonAppliedManager`` does.

As kube-apiserver's ``lastAppliedManager``, kubectl's server-side apply (field manager
``kubectl``) after a client-side ``kubectl apply`` takes over without ``force`` the
fields whose values the ``kubectl.kubernetes.io/last-applied-configuration`` annotation
holds as they are live; and, as its ``lastAppliedUpdater``, such an apply rewrites the
annotation, when the object has one, to the configuration applied.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

import yaml

from mcruntime import _json
from mcruntime.envtest import _managedfields as mf
from mcruntime.envtest._gofmt import go_json
from mcruntime.envtest._json_types import type_error
from mcruntime.envtest._registry import STATUS_SUBRESOURCES
from mcruntime.envtest._schema import in_version
from mcruntime.envtest._status import StatusError

if TYPE_CHECKING:
    from mcruntime.envtest._objects import Objects, WriteCheck
    from mcruntime.envtest._registry import ServedResource

__all__ = [
    "APPLY",
    "apply",
    "apply_fields",
    "applied_configuration",
    "decode_apply_body",
    "merge",
]

APPLY: Final = "application/apply-patch+yaml"
LAST_APPLIED: Final = "kubectl.kubernetes.io/last-applied-configuration"
KUBECTL: Final = "kubectl"  # the field manager of `kubectl apply --server-side`
BEFORE_FIRST_APPLY: Final = "before-first-apply"  # skipnonapplied.go
_WIPED_ON_CREATE: Final = (
    "resourceVersion",
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "selfLink",
)
_ANNOTATIONS_LIMIT: Final = 256 * 1024  # TotalAnnotationSizeLimitB


def decode_apply_body(raw: bytes) -> dict[str, Any]:
    """The applied configuration from a JSON or YAML body."""
    try:
        cfg = _json.loads(raw)
    except _json.JSONDecodeError:
        try:
            cfg = yaml.load(raw, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        except yaml.YAMLError as e:
            raise StatusError.bad_request(f"error decoding YAML: {e}") from None
    if not isinstance(cfg, dict):
        raise StatusError.bad_request(
            "error decoding YAML: the applied configuration must be an object"
        )
    for field in ("apiVersion", "kind"):
        if not cfg.get(field):
            raise StatusError.bad_request(
                f"error decoding YAML: Object '{'Kind' if field == 'kind' else 'apiVersion'}' "
                "is missing in the applied configuration"
            )
    return cfg


def merge(live: Any, cfg: Any, shape: mf.Shape, parent: str = "") -> Any:
    """``cfg`` merged into ``live``: maps field by field, keyed lists item by item, sets by value."""
    if isinstance(cfg, dict) and isinstance(live, dict) and not shape.atomic_map:
        out = dict(live)
        for k, v in cfg.items():
            out[k] = merge(live[k], v, shape.child(k), shape.field) if k in live else v
        return out
    if isinstance(cfg, list) and isinstance(live, list):
        kind, keys = shape.list_type(parent)
        if kind == "map" and all(isinstance(i, dict) for i in (*live, *cfg)):
            item_shape = shape.item()
            defaults = shape.key_defaults(parent)
            result = list(live)
            where = {mf.item_key(it, keys, defaults): n for n, it in enumerate(result)}
            for it in cfg:
                k = mf.item_key(it, keys, defaults)
                if k in where:
                    result[where[k]] = merge(result[where[k]], it, item_shape, shape.field)
                else:
                    # a key field left out takes its default, as kube-apiserver defaults
                    # the object before storing it
                    missing = {f: v for f, v in defaults.items() if f not in it}
                    where[k] = len(result)
                    result.append({**it, **missing} if missing else it)
            return result
        if kind == "set":
            return [*live, *(v for v in cfg if v not in live)]
    return cfg


def applied_configuration(raw: bytes, name: str, manager: str | None) -> dict[str, Any]:
    """The configuration of an apply request on the object ``name`` by ``manager``: 422
    without a field manager, 400 for a body that is not one, names another object, or
    sets ``metadata.managedFields``."""
    if not manager:
        raise StatusError.invalid(
            "PatchOptions",
            "",
            "meta.k8s.io",
            "fieldManager",
            "Required value: is required for apply patch",
        )
    cfg = decode_apply_body(raw)
    meta = cfg.get("metadata")
    if isinstance(meta, dict) and meta.get("name") and meta["name"] != name:
        raise StatusError.bad_request(
            f"the name of the object ({meta['name']}) does not match the name on the URL ({name})"
        )
    if isinstance(meta, dict) and meta.get("managedFields"):
        raise StatusError.bad_request("metadata.managedFields must be nil")
    return cfg


def apply_fields(
    live: dict[str, Any],
    cfg: dict[str, Any],
    before: list[tuple[dict[str, Any], set[mf.Path]]],
    *,
    manager: str,
    api_version: str,
    subresource: str,
    shape: mf.Shape,
    force: bool,
    upgradable: Callable[[], set[mf.Path]] | None = None,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(the object, its ``managedFields``) once ``manager`` applied ``cfg`` over ``live``
    (both trimmed, see `mf.trim`), whose entries were ``before``.

    A field the configuration changes that another manager owns is a conflict (409)
    unless ``force`` takes it over, or every conflicting field is among those
    ``upgradable()`` returns, which then are taken over as if forced (else the 409 names
    only the others); fields the manager applied before and no longer
    applies go unless another manager owns them. The manager's ``Apply`` entry holds the
    fields of ``cfg``; its time is set when the object changed, and every other entry
    keeps its time (``managedfieldsupdater.go``), so a first apply that changes nothing
    has none.
    """
    applied = mf.fieldset(cfg, shape)
    me = (manager, "Apply", "", subresource)
    merged = merge(live, cfg, shape)
    merged_m = mf.members(merged, shape)
    changed = mf.changed_members(
        mf.members(live, shape), {p: merged_m.get(p, mf.MISSING) for p in applied}
    )
    items: list[tuple[dict[str, Any], set[mf.Path]]] = []
    previous: set[mf.Path] = set()
    found: dict[str, Any] | None = None
    for e, s in before:
        if mf.entry_id(e) == me:
            previous, found = s, e
        else:
            items.append((e, s))
    conflicts = [(p, e) for e, s in items for p in sorted(s & changed)]
    if conflicts and not force:
        # kube-apiserver's lastAppliedManager: kubectl's server-side apply takes over
        # without force what client-side apply recorded as applied and still holds
        allowed = upgradable() if upgradable is not None else set()
        refused = [(mf.path_string(p), e) for p, e in conflicts if p not in allowed]
        if refused:
            raise _conflict(refused)
    if conflicts:
        items = [(e, s - changed) for e, s in items]
    others: set[mf.Path] = set().union(*(s for _, s in items))
    owned = others | applied
    gone = {p for p in previous - applied if not _still_owned(p, owned)}
    # a key field of an item that stays stays too: never an item without its key
    gone = {p for p in gone if not _key_of_kept_item(p, gone)}
    if any(p[-1].startswith("k:") for p in gone):
        # the fields others own in an item that goes go with it (and from their entries)
        items = [(e, {o for o in s if not _under_any(o, gone)}) for e, s in items]
        others = set().union(*(s for _, s in items))
    result = mf.remove_paths(merged, gone, others | applied)
    if found is not None:
        entry = {**found, "apiVersion": api_version}
    else:
        entry = mf.make_entry(manager, "Apply", api_version, subresource, applied, timed=False)
    items.append((entry, applied))
    return result, mf.rebuild(items, before, me if result != live else None)


def _still_owned(path: mf.Path, owned: set[mf.Path]) -> bool:
    """Whether ``path``, which its applier no longer applies, stays for the fields ``owned``
    (by others, or applied now), as structured-merge-diff prunes (``merge/update.go``:
    ``prune``, ``addBackOwnedItems``, ``addBackDanglingItems``): when owned itself, or when
    a field (``f:``) holds owned fields (``Set.EnsureNamedFieldsAreMembers``). An item of
    a keyed list another manager only added fields to goes whole, with those fields
    (``typed/remove.go``; ``multiple_appliers_test.go``
    ``remove_one_with_dangling_subitem_keep_one``)."""
    if path in owned:
        return True
    n = len(path)
    return path[-1].startswith("f:") and any(len(o) > n and o[:n] == path for o in owned)


def _key_of_kept_item(path: mf.Path, gone: set[mf.Path]) -> bool:
    """Whether ``path`` is a key field of a keyed-list item that does not go."""
    if len(path) < 2 or not path[-1].startswith("f:") or not path[-2].startswith("k:"):
        return False
    return path[:-1] not in gone and path[-1][2:] in _json.loads(path[-2][2:])


def _under_any(path: mf.Path, roots: set[mf.Path]) -> bool:
    return any(path[: len(r)] == r for r in roots)


def _checked_configuration(
    objects: Objects, res: ServedResource, ns: str, name: str, raw: bytes, manager: str | None
) -> tuple[dict[str, Any], dict[str, Any], mf.Shape]:
    """The applied configuration in ``raw`` (quantities decoded), its metadata and the shape
    of ``res``: refused as kube-apiserver refuses it (another kind, undeclared fields)."""
    cfg = applied_configuration(raw, name, manager)
    meta: dict[str, Any] = cfg["metadata"] if isinstance(cfg.get("metadata"), dict) else {}
    if cfg.get("kind") != res.kind or cfg.get("apiVersion") != res.api_version:
        raise StatusError.bad_request(
            f"the kind and API version of the applied configuration ({cfg.get('apiVersion')}, "
            f"{cfg.get('kind')}) do not match the resource ({res.api_version}, {res.kind})"
        )
    # quantities compared by value: the same one in other words is no change, no conflict
    cfg = objects.decoded(res, cfg)
    shape = mf.shape_for(res.schema, not res.custom, res.kind)
    undeclared = objects.undeclared_fields(res, cfg)
    if undeclared:
        # kube-apiserver's typed conversion of the applied configuration fails, whatever the
        # fieldValidation, and the error reaches the client as a 500 without a reason
        gv = f"{res.group}/{res.version}"
        raise StatusError(
            500,
            "",
            f"failed to create typed patch object ({ns}/{name}; {gv}, Kind={res.kind}): "
            f"{_typed_path(cfg, undeclared[0], shape)}: field not declared in schema",
        )
    duplicates = mf.duplicate_keys(cfg, shape)
    if duplicates:
        # the typed conversion of the applied configuration allows no duplicate keys (that
        # of the live object does: structuredmerge.go, typed.AllowDuplicates)
        gv = f"{res.group}/{res.version}"
        errors = duplicates[0] if len(duplicates) == 1 else "errors:\n  " + "\n  ".join(duplicates)
        raise StatusError(
            500,
            "",
            f"failed to create typed patch object ({ns}/{name}; {gv}, Kind={res.kind}): {errors}",
        )
    return cfg, meta, shape


def _created(
    res: ServedResource,
    name: str,
    cfg: dict[str, Any],
    raw: bytes,
    manager: str,
    shape: mf.Shape,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The body an apply (of ``raw``, whose configuration is ``cfg``) of an absent ``name``
    creates, and its managedFields: one Apply entry of ``manager`` for the applied fields
    (none when it applied none)."""
    meta: dict[str, Any] = cfg["metadata"] if isinstance(cfg.get("metadata"), dict) else {}
    body = {**cfg, "metadata": {**meta, "name": name}}
    body["metadata"].pop("managedFields", None)
    # kube-apiserver creates through its registry's Update (create-via-apply): a
    # resourceVersion the configuration holds is no precondition there and storage clears it
    # (etcd3 GuaranteedUpdate, APIObjectVersioner.PrepareObjectForStorage), and the system
    # fields are wiped (registry/generic/registry/store.go, rest.WipeObjectMetaSystemFields)
    for field in _WIPED_ON_CREATE:
        body["metadata"].pop(field, None)
    applied = mf.fieldset(mf.trim(cfg, "main" if res.has_status else ""), shape)
    entry = mf.make_entry(manager, "Apply", res.api_version, "", applied)
    return _last_applied_synced(body, raw, manager), [entry] if applied else []


def _last_applied_fields(
    objects: Objects, res: ServedResource, live: dict[str, Any], part: str, shape: mf.Shape
) -> set[mf.Path]:
    """The fields of ``live`` (in the request's version) that its last-applied annotation
    says ``kubectl apply`` set client-side and that still hold the values it set:
    kube-apiserver's ``lastAppliedManager.allowedConflictsFromLastApplied``. None without
    the annotation, or when it is not a configuration of the kind in the request's version
    (JSON its typed conversion takes)."""
    text = (live["metadata"].get("annotations") or {}).get(LAST_APPLIED)
    if not isinstance(text, str) or not text:
        return set()
    try:
        last = _json.loads(text)
    except _json.JSONDecodeError:
        return set()
    if not isinstance(last, dict) or (last.get("apiVersion"), last.get("kind")) != (
        res.api_version,
        res.kind,
    ):
        return set()
    if objects.undeclared_fields(res, last) or (
        not res.custom and type_error(last, res.api_version, res.kind) is not None
    ):
        return set()
    last, live = mf.trim(last, part), mf.trim(live, part)
    # what differs from the live object (changed, added or gone) is no longer the
    # annotation's to give
    changed, removed = mf.compare(last, live, shape)
    return mf.fieldset(last, shape) - changed - removed


def _last_applied_synced(obj: dict[str, Any], raw: bytes, manager: str) -> dict[str, Any]:
    """``obj``, applied by ``manager`` from ``raw``, with its last-applied annotation set to
    the applied configuration when the manager is kubectl's and the object has one:
    kube-apiserver's ``lastAppliedUpdater``, so a later client-side ``kubectl apply``
    diffs against what was applied last. The configuration is written as Go encodes it,
    without the annotation; the annotation goes when it would take the object's
    annotations over their size limit."""
    meta: dict[str, Any] = obj.get("metadata") or {}
    annotations = meta.get("annotations")
    if manager != KUBECTL or not isinstance(annotations, dict) or not annotations.get(LAST_APPLIED):
        return obj
    cfg = decode_apply_body(raw)
    cfg_meta = cfg.get("metadata")
    if isinstance(cfg_meta, dict) and "annotations" in cfg_meta:
        cfg_meta = dict(cfg_meta)
        applied = cfg_meta.pop("annotations")
        if isinstance(applied, dict):  # unstructured's SetAnnotations keeps an empty map
            cfg_meta["annotations"] = {k: v for k, v in applied.items() if k != LAST_APPLIED}
        cfg = {**cfg, "metadata": cfg_meta}
    annotations = {**annotations, LAST_APPLIED: go_json(cfg)}
    size = sum(len(k.encode()) + len(str(v).encode()) for k, v in annotations.items())
    if size > _ANNOTATIONS_LIMIT:
        del annotations[LAST_APPLIED]
    return {**obj, "metadata": {**meta, "annotations": annotations}}


def apply_create(
    objects: Objects, res: ServedResource, ns: str, name: str, raw: bytes, *, manager: str | None
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """What an apply of the absent object ``name`` creates (checked as `apply` checks it):
    the body to create and its managedFields, for admission, which admits such an apply as
    a CREATE (kube-apiserver's patch handler does: the operation is Create when the object
    does not exist)."""
    cfg, _meta, shape = _checked_configuration(objects, res, ns, name, raw, manager)
    assert manager
    return _created(res, name, cfg, raw, manager, shape)


def apply(
    objects: Objects,
    res: ServedResource,
    ns: str,
    name: str,
    raw: bytes,
    *,
    manager: str | None,
    force: bool,
    dry_run: bool,
    subresource: str = "",
    check: WriteCheck | None = None,
) -> dict[str, Any]:
    """Apply the configuration in ``raw`` as ``manager`` (through ``subresource`` when not
    "", which its entry records); the stored (or dry-run) result."""
    cfg, meta, shape = _checked_configuration(objects, res, ns, name, raw, manager)
    assert manager
    status = subresource in STATUS_SUBRESOURCES
    sub = subresource
    part = "only" if status else ("main" if res.has_status else "")
    live = objects.store.get(res.key, ns if res.namespaced else "", name)
    if live is not None:  # applied as served in the request's version (`Objects.patch`)
        live = in_version(live, res.api_version, res.schema, res.custom, res.read_defaults)
    if live is None:
        if status:
            raise StatusError.not_found(res.qualified, name, res.group, res.plural)
        body, managed = _created(res, name, cfg, raw, manager, shape)
        return objects.create(
            res,
            ns,
            body,
            dry_run=dry_run,
            managed_fields=managed,
            check=check,
            applied=True,
        )
    rv = meta.get("resourceVersion")
    if rv and rv != live["metadata"]["resourceVersion"]:
        raise StatusError.conflict(
            res.qualified,
            name,
            res.group,
            res.plural,
            "the object has been modified; please apply your changes to the latest version "
            "and try again",
        )
    before = mf.parsed(live["metadata"].get("managedFields"))
    if not before:
        # kube-apiserver's skipNonAppliedManager.Apply (skipnonapplied.go): an object whose
        # fields nobody owns gets them recorded as an Update of "before-first-apply" first,
        # so the apply conflicts with the values it changes and does not delete what it
        # no longer applies
        owned = mf.fieldset(mf.trim(live, part), shape)
        if owned:
            first = mf.make_entry(BEFORE_FIRST_APPLY, "Update", res.api_version, sub, owned)
            before = [(first, owned)]
    result_t, managed = apply_fields(
        mf.trim(live, part),
        mf.trim(cfg, part),
        before,
        manager=manager,
        api_version=res.api_version,
        subresource=sub,
        shape=shape,
        force=force,
        upgradable=(
            (lambda: _last_applied_fields(objects, res, live, part, shape))
            if manager == KUBECTL
            else None
        ),
    )
    if status:
        new = {**live, "status": result_t.get("status")}
        if "status" not in result_t:
            new.pop("status")
    else:
        new = {**result_t, "apiVersion": live["apiVersion"], "kind": live["kind"]}
        new["metadata"] = {
            **{k: v for k, v in live["metadata"].items() if k in mf.SERVER_META},
            **(result_t.get("metadata") or {}),
        }
        if "status" in live and res.has_status:
            new["status"] = live["status"]
        new = _last_applied_synced(new, raw, manager)
    new["metadata"] = {**new["metadata"], "managedFields": managed}
    return objects.update(
        res, ns, name, new, subresource=sub, dry_run=dry_run, managed_fields=managed, check=check
    )


def _conflict(conflicts: list[tuple[str, dict[str, Any]]]) -> StatusError:
    causes = [
        {
            "reason": "FieldManagerConflict",
            "message": f"conflict with {mf.manager_label(e)}",
            "field": field,
        }
        for field, e in conflicts
    ]
    if len(conflicts) == 1:
        field, e = conflicts[0]
        message = f"Apply failed with 1 conflict: conflict with {mf.manager_label(e)}: {field}"
    else:
        by_manager: dict[str, list[str]] = {}
        for field, e in conflicts:
            by_manager.setdefault(mf.manager_label(e), []).append(field)
        lines = []
        for label in sorted(by_manager):
            lines.append(f"conflicts with {label}:")
            lines.extend(f"- {f}" for f in by_manager[label])
        message = f"Apply failed with {len(conflicts)} conflicts: " + "\n".join(lines)
    return StatusError(409, "Conflict", message, {"causes": causes})


def _typed_path(obj: dict[str, Any], dotted: str, shape: mf.Shape) -> str:
    """``spec.ports[0].x`` of ``obj`` as structured-merge-diff prints it: the items of keyed
    lists by their keys (``.spec.ports[name="http"].x``), of other lists by their index."""
    path: list[str] = []
    value: Any = obj
    parent = ""  # the field of the object holding the current value (built-in merge keys)
    for token in re.findall(r"\[\d+\]|[^.\[\]]+", dotted):
        if token.startswith("["):
            i = int(token[1:-1])
            kind, keys = shape.list_type(parent)
            item = value[i] if isinstance(value, list) and i < len(value) else None
            key = mf.item_key(item, keys, shape.key_defaults(parent)) if kind == "map" else None
            path.append(key or f"i:{i}")
            value, shape = item, shape.item()
        else:
            parent = shape.field
            value = value.get(token) if isinstance(value, dict) else None
            path.append("f:" + token)
            shape = shape.child(token)
    return mf.path_string(tuple(path))
