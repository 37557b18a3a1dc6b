"""The ``/scale`` subresource: an ``autoscaling/v1`` ``Scale`` view of a replicated object.

Deployments, ReplicaSets, StatefulSets and ReplicationControllers have it, as in
kube-apiserver, and so does every CRD version that declares ``subresources.scale``
(``specReplicasPath``, ``statusReplicasPath``, optional ``labelSelectorPath``).
Reading returns the Scale; writing (PUT, or a patch of the Scale) sets only the
parent's desired replicas, through the parent's ordinary update.

Field ownership of a write goes through the Scale, as kube-apiserver's
``ScaleHandler`` (``k8s.io/apimachinery/pkg/util/managedfields/scalehandler.go``)
does it: the parent's entries that own the desired replicas become entries of
the Scale (``autoscaling/v1``, ``.spec.replicas``), the write is an ``Update``
of the Scale by its field manager through the subresource ``scale``, and the
result goes back into the parent's entries ([`scale_managed_fields`][]).
Server-side apply of a Scale ([`apply_scale`][]) goes the same way, an ``Apply``
of the Scale by its field manager: it conflicts with the other owners of the
replicas, named as the Scale's entries name them (an applier by its name, an
updater ``using autoscaling/v1``), unless forced.
"""

from __future__ import annotations

from typing import Any

from mcruntime.envtest import _managedfields as mf
from mcruntime.envtest._apply import apply_fields
from mcruntime.envtest._jsonpath import JSONPathError, find
from mcruntime.envtest._registry import ServedResource
from mcruntime.envtest._status import StatusError

__all__ = [
    "BUILTIN_SCALE",
    "SCALE_API_VERSION",
    "SCALE_VERBS",
    "to_scale",
    "with_replicas",
    "requested_replicas",
    "replicas_paths",
    "scale_managed_fields",
    "apply_scale",
]

SCALE_VERBS = ("get", "patch", "update")
BUILTIN_SCALE: dict[str, Any] = {
    "specReplicasPath": ".spec.replicas",
    "statusReplicasPath": ".status.replicas",
}
SCALE_API_VERSION = "autoscaling/v1"
#: the versions kube-apiserver maps a built-in kind's replicas path for (its storage
#: packages' ``ReplicasPathMappings``); entries of other versions are dropped on a write
_BUILTIN_VERSIONS: dict[str, tuple[str, ...]] = {
    "deployments": ("v1beta1", "v1beta2", "v1"),
    "replicasets": ("v1beta2", "v1"),
    "statefulsets": ("v1beta1", "v1beta2", "v1"),
}
_REPLICAS: mf.Path = ("f:spec", "f:replicas")  # in the Scale


def _selector_string(sel: Any) -> str:
    """A LabelSelector as the string form Scale.status.selector carries."""
    if not isinstance(sel, dict):
        return ""
    parts = [f"{k}={v}" for k, v in sorted((sel.get("matchLabels") or {}).items())]
    for e in sel.get("matchExpressions") or ():
        if not isinstance(e, dict):
            continue
        key, op = e.get("key", ""), e.get("operator", "")
        values = ",".join(sorted(str(v) for v in e.get("values") or ()))
        if op == "In":
            parts.append(f"{key} in ({values})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({values})")
        elif op == "Exists":
            parts.append(str(key))
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(parts)


def _first(obj: dict[str, Any], path: str | None) -> Any:
    if not path:
        return None
    try:
        values = find(obj, path)
    except JSONPathError:
        return None
    return values[0] if values else None


def _desired_replicas(res: ServedResource, obj: dict[str, Any]) -> int:
    """``obj``'s desired replicas, at the kind's ``specReplicasPath`` (0 when unset)."""
    replicas = _first(obj, (res.scale or BUILTIN_SCALE).get("specReplicasPath"))
    return replicas if isinstance(replicas, int) else 0


def to_scale(res: ServedResource, obj: dict[str, Any]) -> dict[str, Any]:
    """The Scale of ``obj``."""
    assert res.scale is not None
    meta = obj["metadata"]
    current = _first(obj, res.scale.get("statusReplicasPath"))
    spec_selector = (obj.get("spec") or {}).get("selector")
    if res.custom:
        selector = _first(obj, res.scale.get("labelSelectorPath"))
        selector = selector if isinstance(selector, str) else ""
    elif res.key == ("", "replicationcontrollers"):  # a map of labels, not a LabelSelector
        selector = _selector_string({"matchLabels": spec_selector})
    else:
        selector = _selector_string(spec_selector)
    status: dict[str, Any] = {"replicas": current if isinstance(current, int) else 0}
    if selector:
        status["selector"] = selector
    out_meta = {
        k: meta[k]
        for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
        if k in meta
    }
    return {
        "kind": "Scale",
        "apiVersion": SCALE_API_VERSION,
        "metadata": out_meta,
        "spec": {"replicas": _desired_replicas(res, obj)},
        "status": status,
    }


def requested_replicas(res: ServedResource, name: str, scale: Any) -> int:
    """``spec.replicas`` of a Scale sent by a client (422 unless a non-negative integer)."""
    if not isinstance(scale, dict):
        raise StatusError.bad_request("the body of the request must be a JSON object")
    kind = scale.get("kind")
    if kind not in (None, "", "Scale"):
        raise StatusError.bad_request(
            f"the kind of the provided object ({kind}) does not match the resource (Scale)"
        )
    replicas = (scale.get("spec") or {}).get("replicas", 0)
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        raise StatusError.invalid(
            "Scale",
            name,
            "autoscaling",
            "spec.replicas",
            f"Invalid value: {replicas!r}: must be greater than or equal to 0",
        )
    return replicas


def with_replicas(res: ServedResource, obj: dict[str, Any], replicas: int) -> dict[str, Any]:
    """A copy of ``obj`` whose desired replicas (at ``specReplicasPath``) are ``replicas``."""
    assert res.scale is not None
    path = str(res.scale.get("specReplicasPath") or ".spec.replicas").lstrip(".").split(".")
    new = dict(obj)
    node = new
    for key in path[:-1]:
        child = node.get(key)
        child = dict(child) if isinstance(child, dict) else {}
        node[key] = child
        node = child
    node[path[-1]] = replicas
    return new


# --------------------------------------------------------------------- field ownership


def _field_path(json_path: str) -> mf.Path:
    return tuple("f:" + p for p in json_path.lstrip(".").split("."))


def replicas_paths(res: ServedResource, crd: dict[str, Any] | None) -> dict[str, mf.Path | None]:
    """The path of the desired replicas in each version of ``res``'s kind (None in a CRD
    version without the scale subresource): kube-apiserver's ``ResourcePathMappings``."""
    if not res.custom:
        path = _field_path(BUILTIN_SCALE["specReplicasPath"])
        versions = _BUILTIN_VERSIONS.get(res.plural, (res.version,))
        return {f"{res.group}/{v}": path for v in versions}
    out: dict[str, mf.Path | None] = {}
    for v in ((crd or {}).get("spec") or {}).get("versions") or ():
        scale = (v.get("subresources") or {}).get("scale") if isinstance(v, dict) else None
        spec_path = scale.get("specReplicasPath") if isinstance(scale, dict) else None
        if isinstance(v, dict) and isinstance(v.get("name"), str):
            out[f"{res.group}/{v['name']}"] = _field_path(spec_path) if spec_path else None
    if out.get(res.api_version) is None and res.scale is not None:
        out[res.api_version] = _field_path(str(res.scale.get("specReplicasPath") or ""))
    return out


def scale_managed_fields(
    res: ServedResource,
    paths: dict[str, mf.Path | None],
    parent: dict[str, Any],
    replicas: int,
    manager: str,
) -> list[dict[str, Any]]:
    """The parent's ``managedFields`` once ``manager`` set its desired replicas to
    ``replicas`` through the Scale; ``paths`` from `replicas_paths`.

    As kube-apiserver: the writer's entry is an ``Update`` of the parent's version with
    ``subresource: scale`` owning the parent's replicas path, and without a ``time``
    (``ScaleHandler.ToParent`` takes times from the parent's entries, which never hold
    the Scale's ``autoscaling/v1`` entry of an Update). Whoever owned the replicas
    before loses them when they change (an ``Update`` entry that owned them is split, its
    replicas in an entry of their own while it still owns them). Replicas set to 0 are
    owned by nobody (``ScaleSpec.replicas`` is ``omitempty``: the Scale drops them), and
    a write is not recorded at all while nobody owns the replicas (the Scale has no
    entries, and the field manager does not start tracking an object without them:
    ``skipnonapplied.go``, kubernetes/kubernetes#131892).
    """
    entries = mf.parsed(parent["metadata"].get("managedFields"))
    scale = _to_subresource(entries, paths)
    if scale:
        scale = _update_scale(scale, _desired_replicas(res, parent), replicas, manager)
    return _to_parent(entries, scale, paths, res.api_version)


def apply_scale(
    res: ServedResource,
    paths: dict[str, mf.Path | None],
    parent: dict[str, Any],
    cfg: dict[str, Any],
    manager: str,
    force: bool,
) -> tuple[int, list[dict[str, Any]]]:
    """(desired replicas, the parent's ``managedFields``) once ``manager`` applied the Scale
    configuration ``cfg`` (from `applied_configuration`) to ``parent``.

    As kube-apiserver: the configuration must be an ``autoscaling/v1`` Scale (400
    ``invalid object type`` otherwise, ``versioncheck.go``); it is applied to the Scale
    with the Scale's entries (`apply_fields`: a 409 for a change of replicas another
    manager owns unless ``force``), and only the replicas go back to the parent, whose
    entry for the applier is an ``Apply`` with ``subresource: scale`` and no new time (as
    for an update, ``ToParent`` keeps the parent's times). When nobody owns the replicas
    yet, those already set belong to ``before-first-apply`` (``skipnonapplied.go``).
    """
    if (cfg.get("apiVersion"), cfg.get("kind")) != (SCALE_API_VERSION, "Scale"):
        group, _, version = str(cfg.get("apiVersion")).rpartition("/")
        raise StatusError.bad_request(
            f"invalid object type: {group}/{version}, Kind={cfg.get('kind')}"
        )
    applied: dict[str, Any] = {}
    spec = cfg.get("spec")
    if isinstance(spec, dict) and "replicas" in spec:
        applied = {"spec": {"replicas": requested_replicas(res, parent["metadata"]["name"], cfg)}}
    old = _desired_replicas(res, parent)
    entries = mf.parsed(parent["metadata"].get("managedFields"))
    scale = _to_subresource(entries, paths)
    if not scale and old:
        first = mf.make_entry(
            "before-first-apply", "Update", SCALE_API_VERSION, "scale", {_REPLICAS}
        )
        scale = [(first, {_REPLICAS})]
    live = {"spec": {"replicas": old} if old else {}}  # ScaleSpec.replicas is omitempty
    result, managed = apply_fields(
        live,
        applied,
        scale,
        manager=manager,
        api_version=SCALE_API_VERSION,
        subresource="scale",
        shape=mf.shape_for(None, True),
        force=force,
    )
    replicas = result.get("spec", {}).get("replicas", 0)
    return replicas, _to_parent(entries, mf.parsed(managed), paths, res.api_version)


def _to_subresource(
    entries: list[tuple[dict[str, Any], set[mf.Path]]], paths: dict[str, mf.Path | None]
) -> list[tuple[dict[str, Any], set[mf.Path]]]:
    """The Scale's entries: those of the parent that own its replicas, in autoscaling/v1."""
    out = []
    for e, s in entries:
        path = paths.get(e.get("apiVersion", ""))
        if path is not None and path in s:
            out.append(({**e, "apiVersion": SCALE_API_VERSION}, {_REPLICAS}))
    return out


def _update_scale(
    entries: list[tuple[dict[str, Any], set[mf.Path]]], old: int, new: int, manager: str
) -> list[tuple[dict[str, Any], set[mf.Path]]]:
    """The Scale's entries after ``manager`` updated its replicas from ``old`` to ``new``
    (every entry owns ``.spec.replicas`` alone, so a change empties all but the writer's)."""
    if old == new:
        return entries
    if new == 0:  # removed from the Scale: nobody owns it
        return []
    entry = mf.make_entry(manager, "Update", SCALE_API_VERSION, "scale", {_REPLICAS})
    return [(entry, {_REPLICAS})]


def _to_parent(
    entries: list[tuple[dict[str, Any], set[mf.Path]]],
    scale: list[tuple[dict[str, Any], set[mf.Path]]],
    paths: dict[str, mf.Path | None],
    api_version: str,
) -> list[dict[str, Any]]:
    """The parent's entries with the Scale's merged back (``ScaleHandler.ToParent``)."""
    from_scale = {mf.entry_id(e): (e, s) for e, s in scale}
    times = {mf.entry_id(e): e.get("time") for e, _ in entries}
    out = []
    for e, s in entries:
        version = e.get("apiVersion", "")
        if version not in paths:
            continue  # a version the kind does not have: kube-apiserver drops the entry
        path = paths[version]
        if path is None or path not in s:
            out.append(e)
        elif from_scale.pop(mf.entry_id(e), None) is not None:
            out.append(e)  # the same manager (an Apply entry) still owns them
        elif s - {path}:
            out.append({**e, "fieldsV1": mf.to_fields_v1(s - {path})})
    target = paths.get(api_version)
    for key, (e, s) in from_scale.items():
        if target is None or _REPLICAS not in s:
            continue
        entry: dict[str, Any] = {
            "manager": e["manager"],
            "operation": e["operation"],
            "apiVersion": api_version,
        }
        if times.get(key):
            entry["time"] = times[key]
        entry["fieldsType"] = "FieldsV1"
        entry["fieldsV1"] = mf.to_fields_v1({target})
        if e.get("subresource"):
            entry["subresource"] = e["subresource"]
        out.append(entry)
    return mf.sort_entries(out)
