"""Empty maps and lists, dropped as kube-apiserver drops them when it stores an object.

kube-apiserver does not keep a built-in object as it was sent: it decodes it into its Go
type, stores it in etcd as protobuf (kube-apiserver's `--storage-media-type` default,
`cmd/kube-apiserver/app/options/options.go`) and answers with the object decoded back
from those bytes (`k8s.io/apiserver/pkg/storage/etcd3/store.go`: `Create` and
`GuaranteedUpdate` decode the data they wrote; a dry run does the same in
`pkg/registry/generic/registry/dryrun.go`), encoded as JSON by `encoding/json`. A
repeated or map field without items decodes from protobuf as a nil slice or map
(`generated.pb.go` only appends), so:

- a map or list field tagged `omitempty` (most of them: `metadata.labels`,
  `metadata.annotations`, `metadata.finalizers`, a ConfigMap's `data`, a PodSpec's
  `volumes`, a container's `env`, ...) disappears when it is empty: a controller that
  creates a ConfigMap with `labels: {}` and then writes `obj["metadata"]["labels"]["x"]`
  gets a KeyError on a real cluster;
- one of the few without `omitempty` (`Role.rules`, `PodSpec.containers`, ...) comes back
  as `null` when it was sent empty.

The same object is stored, so GETs, lists and watch events carry it too.

A custom resource is stored as the JSON it was sent, its own fields kept as they are
(`{}` and `[]` included), but its `metadata` is coerced through ObjectMeta
(apiextensions-apiserver `pkg/apiserver/customresource_handler.go`
`unstructuredSchemaCoercer.apply`, `pkg/apiserver/schema/objectmeta/coerce.go`
`GetObjectMetaWithOptions` / `SetObjectMeta`): written back with
`runtime.DefaultUnstructuredConverter.ToUnstructured`, which leaves out an `omitempty`
field whose map or slice is empty (`isEmpty` in apimachinery `pkg/runtime/converter.go`).
Its empty `labels`, `annotations`, `finalizers` and `ownerReferences` vanish as well.

Which fields are maps and lists, and the message type of every nested struct, come from
`_protobuf_schema.json` (see `mcruntime.envtest._protobuf`); `_KEPT` lists the map and
list fields whose `json` tag has no `omitempty`. Each kind gets a plan once: only the
fields that are maps or lists, or structs that hold some, so an object is checked with a
few dictionary lookups and copied only along the paths that change.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

from mcruntime.envtest import _protobuf

if TYPE_CHECKING:
    from mcruntime.envtest._registry import ServedResource

__all__ = ["drop_empty"]

#: The map and list fields of the built-in types whose ``json`` tag has no ``omitempty``
#: ("GoType.jsonName"; the ``items`` of the list kinds and meta/v1's discovery types left
#: out): every other map or list field of the types in ``_protobuf_schema.json`` has one.
#: Read from kubernetes/api (the ``types.go`` of each group version envtest serves) at
#: v0.37.0-beta.0 (commit 10b39a39b, July 2026), and kubernetes/apimachinery
#: ``pkg/apis/meta/v1/types.go`` at the same time (ObjectMeta's are all ``omitempty``).
_KEPT = frozenset(
    {
        "CSINodeDriver.topologyKeys",
        "CSINodeSpec.drivers",
        "CephFSPersistentVolumeSource.monitors",
        "CephFSVolumeSource.monitors",
        "ClusterRole.rules",
        "ContainerImage.names",
        "Endpoint.addresses",
        "EndpointSlice.endpoints",
        "EndpointSlice.ports",
        "HTTPIngressRuleValue.paths",
        "HorizontalPodAutoscalerStatus.currentMetrics",
        "LimitRangeSpec.limits",
        "MutatingWebhook.admissionReviewVersions",
        "NodeSelector.nodeSelectorTerms",
        "NonResourceRule.verbs",
        "PodExecOptions.command",
        "PodExtendedResourceClaimStatus.requestMappings",
        "PodFailurePolicy.rules",
        "PodFailurePolicyOnExitCodesRequirement.values",
        "PodSpec.containers",
        "PolicyRule.verbs",
        "ProjectedVolumeSource.sources",
        "RBDPersistentVolumeSource.monitors",
        "RBDVolumeSource.monitors",
        "ResourceRule.verbs",
        "Role.rules",
        "SubjectRulesReviewStatus.nonResourceRules",
        "SubjectRulesReviewStatus.resourceRules",
        "SuccessPolicy.rules",
        "TokenRequestSpec.audiences",
        "TopologySelectorLabelRequirement.values",
        "ValidatingWebhook.admissionReviewVersions",
    }
)

_OBJECT_META = "k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta"

# what a plan does with a field: drop it when empty, make it null when empty, walk into it
_DROP, _NULL, _STRUCT = 0, 1, 2

#: (JSON name, what to do, the plan of its items or value: None when there is nothing to walk)
_Plan = tuple[tuple[str, int, Any], ...]


def drop_empty(res: ServedResource, obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` as kube-apiserver stores it: a built-in kind without its empty ``omitempty``
    maps and lists (the others null), a custom resource without the empty ones of its
    ``metadata``. ``obj`` itself when it has none; otherwise a copy along the changed paths
    (``obj`` and what it shares with other objects are left as they are)."""
    plan = _custom_plan() if res.custom else _kind_plan(res.api_version, res.kind)
    return _walk(obj, plan) if plan else obj


@cache
def _custom_plan() -> _Plan:
    return (("metadata", _STRUCT, _message_plan(_OBJECT_META)),)


@cache
def _kind_plan(api_version: str, kind: str) -> _Plan:
    message = _protobuf.message_name(api_version, kind)
    return _message_plan(message) if message in _protobuf.schema() else ()


@cache
def _message_plan(message: str) -> _Plan:
    schema = _protobuf.schema()
    short = message.rpartition(".")[2]
    plan: list[tuple[str, int, Any]] = []
    for spec in schema[message].values():
        name, typ, label, inline = spec[0], spec[1], spec[2], spec[5]
        sub = _message_plan(typ) if typ in schema else ()
        if label:  # repeated (1) or map (2)
            action = _NULL if f"{short}.{name}" in _KEPT else _DROP
            # a list of structs is walked item by item; map values (quantities, times,
            # ExtraValue lists) hold no struct fields to walk
            plan.append((name, action, sub if label == 1 and sub else None))
        elif inline:
            plan.extend(sub)  # an embedded struct's fields sit in the parent's JSON object
        elif sub:
            plan.append((name, _STRUCT, sub))
    return tuple(plan)


def _walk(obj: dict[str, Any], plan: _Plan) -> dict[str, Any]:
    out: dict[str, Any] | None = None
    for name, action, sub in plan:
        value = obj.get(name)
        if value is None:
            continue
        cls = value.__class__
        if action == _STRUCT:
            if cls is not dict or not value:
                continue
            new: Any = _walk(value, sub)
        elif not value:
            if cls is not dict and cls is not list:
                continue
            if out is None:
                out = dict(obj)
            if action == _DROP:
                del out[name]
            else:
                out[name] = None
            continue
        elif sub is not None and cls is list:
            new = _walk_items(value, sub)
        else:
            continue
        if new is not value:
            if out is None:
                out = dict(obj)
            out[name] = new
    return obj if out is None else out


def _walk_items(items: list[Any], plan: _Plan) -> list[Any]:
    out: list[Any] | None = None
    for i, item in enumerate(items):
        if item.__class__ is dict:
            new = _walk(item, plan)
            if new is not item:
                if out is None:
                    out = list(items)
                out[i] = new
    return items if out is None else out
