"""A Job's selector and pod template labels, generated and guarded as kube-apiserver's Job strategy does.

A Job created without ``spec.manualSelector: true`` selects its pods by its own
``uid``: kube-apiserver's ``jobStrategy`` (``pkg/registry/batch/job/strategy.go``,
``PrepareForCreate`` → ``generateSelectorIfNeeded`` → ``generateSelector``)
sets, where they are not set already,

- ``spec.selector.matchLabels["batch.kubernetes.io/controller-uid"]`` to the Job's uid,
- the pod template's labels ``batch.kubernetes.io/controller-uid`` and the legacy
  ``controller-uid`` (the uid), ``batch.kubernetes.io/job-name`` and the legacy
  ``job-name`` (the Job's name); the prefixed labels since 1.27.

Then ``Validate`` (``pkg/apis/batch/validation/validation.go``, ``ValidateJob``)
refuses with a 422 what the user set in their way: a generated label with another
value (``spec.template.metadata.labels[...]: Invalid value: ...: must be '<uid>'``),
a selector given without ``manualSelector`` (it does not match the generated labels:
``spec.selector: Invalid value: v1.LabelSelector{...}: `selector` not
auto-generated``), and, for every Job, a selector that does not match the
template's labels (``spec.template.metadata.labels: Invalid value: ...:
`selector` does not match template `labels```) or no selector at all
(``spec.selector: Required value``, with ``manualSelector: true``).
``SetDefaults_Job`` (``pkg/apis/batch/v1/defaults.go``) sets ``manualSelector:
false`` when unset, and gives a Job without labels its template's: kube-apiserver
stores those after the generation (the defaults run again when the object is read
back from storage), so such a Job carries the generated labels too.

On update, ``ValidateUpdate`` (``ValidateJobSpecUpdate``) keeps ``spec.selector``,
``completionMode``, ``podFailurePolicy``, ``backoffLimitPerIndex``, ``managedBy``,
``successPolicy``, a NonIndexed Job's ``completions`` and ``spec.template`` as they
are (``...: Invalid value: ...: field is immutable``), except that a Job suspended
and never started may change its template's labels, annotations, node selector,
tolerations, scheduling gates and node affinity. The generated labels must stay
(the prefixed ones only when the Job had them).

The order is kube-apiserver's. The handler decodes and defaults the body, the field
manager records the writer's fields, mutating admission runs; then the registry
(``staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go``,
``Store.create``) assigns the uid (``rest.FillObjectMetaSystemFields``) and
``rest.BeforeCreate`` (``staging/src/k8s.io/apiserver/pkg/registry/rest/create.go``)
calls ``PrepareForCreate`` and ``Validate``; validating admission comes last. So the
generated selector and labels belong to no field manager, and mutating webhooks do
not see them while validating webhooks do. envtest calls `prepare_for_create` after
its field manager; `default_and_check` (from ``_kinds.default_and_check``) gives the
``manualSelector`` default before it and checks updates.

envtest's admission builds the object its mutating webhooks see with a first,
dry-run create that leaves the generation out (``prepare=False`` of
`Objects.create`), as kube-apiserver's mutating webhooks see no generated
selector; the validating webhooks and the store get the Job prepared for the same
uid. A Job sent without labels is stored with its template's, the generated ones
included, unless a mutating webhook patched it: kube-apiserver's decoding of the
patched object parts the two maps.

Not done: the rest of ``ValidateJob`` (pod template validation, ``restartPolicy``,
indexed completions' limits, selector syntax) and of ``ValidateJobUpdate`` (an
Indexed Job's ``completions``, which may change with ``parallelism``). The values in
messages are Go's ``%#v`` of the selector and labels, but a template's is abridged
(``core.PodTemplateSpec{...}``).
"""

from __future__ import annotations

import copy
from typing import Any

from mcruntime.envtest._gofmt import go_map, go_selector, go_value
from mcruntime.envtest._schema import Cause
from mcruntime.envtest._status import StatusError
from mcruntime.envtest._validation import selects, template_labels

__all__ = ["JOBS", "default_and_check", "prepare_for_create"]

JOBS = ("batch", "jobs")
CONTROLLER_UID = "batch.kubernetes.io/controller-uid"
JOB_NAME = "batch.kubernetes.io/job-name"
LEGACY_CONTROLLER_UID = "controller-uid"
LEGACY_JOB_NAME = "job-name"
_IMMUTABLE = "field is immutable"
#: spec fields ``ValidateJobSpecUpdate`` keeps as they are (besides selector and template)
_IMMUTABLE_SPEC = (
    "completionMode",
    "podFailurePolicy",
    "backoffLimitPerIndex",
    "managedBy",
    "successPolicy",
)
#: what a suspended Job that never started may change in its template (``validatePodTemplateUpdate``)
_SCHEDULING_SPEC = ("nodeSelector", "tolerations", "schedulingGates")
_SCHEDULING_META = ("labels", "annotations")

Obj = dict[str, Any]


# ----------------------------------------------------------------- create


def prepare_for_create(key: tuple[str, str], obj: Obj, sent: Any) -> None:
    """``jobStrategy.PrepareForCreate`` and ``Validate`` for the selector: ``obj`` is the Job
    about to be stored (uid assigned, defaults given, fields recorded), ``sent`` the Job as
    the request gave it. Raises the 422 kube-apiserver answers."""
    if key != JOBS or not isinstance(obj.get("spec"), dict):
        return
    meta = obj["metadata"]
    spec = obj["spec"] = dict(obj["spec"])
    if spec.get("manualSelector") is not True:
        _generate(obj)
    labels = template_labels(spec)
    sent_meta = sent.get("metadata") if isinstance(sent, dict) else None
    if labels and not (isinstance(sent_meta, dict) and sent_meta.get("labels")):
        # SetDefaults_Job gives a Job sent without labels its template's map, the very map
        # the generation then adds to
        meta["labels"] = dict(labels)
    causes = [*_generated_selector(obj, prefixed=True), *_spec(obj)]
    if causes:
        raise _invalid(obj, causes)


def _generate(obj: Obj) -> None:
    """``generateSelector``: the labels and selector that tie the Job's pods to its uid,
    each where it is not set already (a conflicting value is for validation to refuse)."""
    meta, spec = obj["metadata"], obj["spec"]
    uid, name = meta["uid"], meta["name"]
    template = spec["template"] = dict(spec.get("template") or {})
    template_meta = template["metadata"] = dict(template.get("metadata") or {})
    labels = template_meta["labels"] = dict(template_meta.get("labels") or {})
    for label, value in (
        (LEGACY_JOB_NAME, name),
        (JOB_NAME, name),
        (LEGACY_CONTROLLER_UID, uid),
        (CONTROLLER_UID, uid),
    ):
        labels.setdefault(label, value)
    selector = spec.get("selector")
    selector = spec["selector"] = dict(selector) if isinstance(selector, dict) else {}
    match = selector["matchLabels"] = dict(selector.get("matchLabels") or {})
    match.setdefault(CONTROLLER_UID, uid)


# ----------------------------------------------------------------- defaults, update


def default_and_check(obj: Obj, old: Obj | None) -> None:
    """``SetDefaults_Job``'s ``manualSelector: false``; on update (``old``),
    ``ValidateUpdate``'s checks of the selector, the generated labels and the immutable
    fields."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    if spec.get("manualSelector") is None:
        spec["manualSelector"] = False
    if old is None:
        return
    old_labels = template_labels(old.get("spec") or {})
    prefixed = CONTROLLER_UID in old_labels and JOB_NAME in old_labels
    causes = [*_generated_selector(obj, prefixed=prefixed), *_spec(obj), *_update(obj, old)]
    if causes:
        raise _invalid(obj, causes)


def _update(obj: Obj, old: Obj) -> list[Cause]:
    """``ValidateJobSpecUpdate``'s immutable fields (its ``ValidateJobSpec`` is `_spec`'s)."""
    spec, old_spec = obj.get("spec") or {}, old.get("spec") or {}
    causes: list[Cause] = []
    if spec.get("completionMode", "NonIndexed") != "Indexed":
        causes += _immutable(spec, old_spec, "completions")
    causes += _immutable(spec, old_spec, "selector")
    template, old_template = spec.get("template"), old_spec.get("template")
    if _suspended_not_started(old):
        template, old_template = _without_scheduling(template), _without_scheduling(old_template)
    if _normal(template) != _normal(old_template):
        causes.append(_cause("spec.template", "core.PodTemplateSpec{...}", _IMMUTABLE))
    for name in _IMMUTABLE_SPEC:
        causes += _immutable(spec, old_spec, name)
    return causes


def _immutable(spec: Obj, old_spec: Obj, name: str) -> list[Cause]:
    value = spec.get(name)
    if _normal(value) == _normal(old_spec.get(name)):
        return []
    shown = go_selector(value) if name == "selector" else go_value(value)
    return [_cause(f"spec.{name}", shown, _IMMUTABLE)]


def _suspended_not_started(old: Obj) -> bool:
    status = old.get("status")
    started = isinstance(status, dict) and status.get("startTime") is not None
    return (old.get("spec") or {}).get("suspend") is True and not started


def _without_scheduling(template: Any) -> Any:
    """A template without what a suspended Job that never started may change."""
    if not isinstance(template, dict):
        return template
    out = copy.deepcopy(template)
    meta, pod = out.get("metadata"), out.get("spec")
    for name in _SCHEDULING_META:
        if isinstance(meta, dict):
            meta.pop(name, None)
    if isinstance(pod, dict):
        for name in _SCHEDULING_SPEC:
            pod.pop(name, None)
        affinity = pod.get("affinity")
        if isinstance(affinity, dict):
            affinity.pop("nodeAffinity", None)
            if not affinity:
                pod.pop("affinity")
    return out


def _normal(value: Any) -> Any:
    """``value`` without empty maps, lists and nulls: two values the Go types store alike."""
    if isinstance(value, dict):
        out = {k: _normal(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v not in (None, {}, [])}
    if isinstance(value, list):
        return [_normal(v) for v in value]
    return value


# ----------------------------------------------------------------- validation


def _generated_selector(obj: Obj, *, prefixed: bool) -> list[Cause]:
    """``validateGeneratedSelector``: a generated selector's labels are on the template, with
    the Job's uid and name, and the selector selects them."""
    spec = obj["spec"]
    selector = spec.get("selector")
    if spec.get("manualSelector") is True or not isinstance(selector, dict):
        return []
    meta = obj["metadata"]
    uid, name = meta.get("uid", ""), meta.get("name", "")
    causes: list[Cause] = []
    if not uid:
        causes.append(("FieldValueRequired", "metadata.uid", "metadata.uid: Required value"))
    labels = template_labels(spec)
    expected = {LEGACY_CONTROLLER_UID: uid, LEGACY_JOB_NAME: name}
    wanted = [(LEGACY_CONTROLLER_UID, uid), (LEGACY_JOB_NAME, name)]
    if prefixed:
        wanted += [(CONTROLLER_UID, uid), (JOB_NAME, name)]
        expected.update({CONTROLLER_UID: uid, JOB_NAME: name})
    for label, value in wanted:
        path = f"spec.template.metadata.labels[{label}]"
        if label not in labels:
            causes.append(
                ("FieldValueRequired", path, f"{path}: Required value: must be '{value}'")
            )
        elif labels[label] != value:
            shown = go_map(labels)
            causes.append(_cause(path, shown, f"must be '{value}'"))
    if selects(selector, expected) is False:
        causes.append(
            _cause("spec.selector", go_selector(selector), "`selector` not auto-generated")
        )
    return causes


def _spec(obj: Obj) -> list[Cause]:
    """``ValidateJobSpec``'s selector checks: there is one, and it selects the template's labels."""
    spec = obj["spec"]
    selector = spec.get("selector")
    causes: list[Cause] = []
    if selector is None:
        causes.append(("FieldValueRequired", "spec.selector", "spec.selector: Required value"))
    labels = template_labels(spec)
    if selects(selector, labels) is False:
        path = "spec.template.metadata.labels"
        shown = go_map(labels or None)
        causes.append(_cause(path, shown, "`selector` does not match template `labels`"))
    return causes


def _cause(path: str, shown: str, why: str) -> Cause:
    return ("FieldValueInvalid", path, f"{path}: Invalid value: {shown}: {why}")


def _invalid(obj: Obj, causes: list[Cause]) -> StatusError:
    unique = list(dict.fromkeys(causes))  # the Status message lists each error once
    return StatusError.invalid_causes("Job", obj["metadata"].get("name", ""), "batch", unique)
