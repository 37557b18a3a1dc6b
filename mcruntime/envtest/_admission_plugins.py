"""The built-in admission plugins kube-apiserver runs on every Pod: ServiceAccount, Priority
and DefaultTolerationSeconds.

All three are enabled by default in kube-apiserver and change every Pod created, so a
controller comparing the pod it sent with the live one must expect their fields.
kube-apiserver's create and update handlers
(``staging/src/k8s.io/apiserver/pkg/endpoints/handlers/create.go``, ``update.go``)
record the request's fields with the field manager first, then run mutating
admission (these plugins, then the MutatingAdmissionWebhook plugin): the fields the
plugins set belong to no field manager, and mutating webhooks see them.
Subresources (``pods/status``, ``pods/binding``, ...) are left alone. When a webhook
changes the object, kube-apiserver runs the built-in plugins once more
(``staging/src/k8s.io/apiserver/pkg/admission/reinvocation.go``); envtest runs them again
on the object the webhooks leave, so a webhook that sets only ``priorityClassName`` gets
the ``403`` it gets on kube.

**Priority** (``plugin/pkg/admission/priority/admission.go``, ``admitPod``): on
CREATE, a pod naming ``spec.priorityClassName`` gets that PriorityClass's
``value`` as ``spec.priority`` and its ``preemptionPolicy`` as
``spec.preemptionPolicy``; an unknown class is refused (``403``, ``pods "x" is
forbidden: no PriorityClass with name y was found``). A pod naming none gets the
``globalDefault`` class's (the lowest value's, if several), name included, or else
``priority: 0`` and ``preemptionPolicy: PreemptLowerPriority`` with no class name. A
``spec.priority`` or ``spec.preemptionPolicy`` the pod sets itself and that differs
is refused (``403``, ``the integer value of priority (5) must not be provided in
pod spec; priority admission controller computed 0 from the given PriorityClass
name``; ``the string value of PreemptionPolicy (...) ...``). On UPDATE, a pod whose
``spec.priority`` (or ``preemptionPolicy``) is left out keeps the one it has.
The plugin's ``validatePriorityClass`` refuses a second ``globalDefault``
PriorityClass (``403``, ``PriorityClass x is already marked as default. Only one
default can exist``), on create and on an update marking another class default.

**DefaultTolerationSeconds**
(``plugin/pkg/admission/defaulttolerationseconds/admission.go``, ``Admit``): on
CREATE and UPDATE, a pod gets the tolerations ``node.kubernetes.io/not-ready`` and
``node.kubernetes.io/unreachable`` (``operator: Exists``, ``effect: NoExecute``,
``tolerationSeconds: 300``), each unless it already has a toleration whose key is
that taint's or empty and whose effect is ``NoExecute`` or empty.

**ServiceAccount** (``plugin/pkg/admission/serviceaccount/admission.go``, ``Admit``): on
CREATE, a pod naming no ``spec.serviceAccountName`` gets ``default``; a service account
that does not exist is refused (``403``, ``error looking up service account ns/x:
serviceaccount "x" not found``). Unless the pod's ``automountServiceAccountToken`` (or
else its service account's) is ``false``, every container and init container without a
mount at ``/var/run/secrets/kubernetes.io/serviceaccount`` gets one, read-only, of a
projected volume ``kube-api-access-<5 characters>`` (a bound token of 3607 seconds, the
``kube-root-ca.crt`` ConfigMap's ``ca.crt`` and the pod's namespace): the volume and
mounts a controller that compares a pod with the one it sent finds on every cluster.
The v1 ``spec.serviceAccount`` is the deprecated twin of ``serviceAccountName``, as
kube-apiserver's conversion writes it.
"""

from __future__ import annotations

from typing import Any

from mcruntime.envtest._kinds import PRIORITY_CLASSES
from mcruntime.envtest._names import generate_name
from mcruntime.envtest._status import StatusError
from mcruntime.envtest._storage import ObjectStore

__all__ = ["PODS", "admit_pod_create", "admit_pod_update", "check_priority_class"]

PODS = ("", "pods")
#: what a pod's priority is without a class and with no ``globalDefault`` one
_NO_CLASS_PRIORITY = 0
_PREEMPT_LOWER = "PreemptLowerPriority"
#: kube-apiserver's ``--default-not-ready-toleration-seconds`` and
#: ``--default-unreachable-toleration-seconds`` (300 unless set)
_TOLERATION_SECONDS = 300
_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
_SERVICE_ACCOUNTS = ("", "serviceaccounts")
_TOKEN_VOLUME = "kube-api-access-"
_TOKEN_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
#: serviceaccount.WarnOnlyBoundTokenExpirationSeconds: an hour and seven seconds
_TOKEN_SECONDS = 3607


def _forbidden(plural: str, group: str, name: str, why: str) -> StatusError:
    """admission.NewForbidden's 403: ``pods "x" is forbidden: why``."""
    resource = f"{plural}.{group}" if group else plural
    return StatusError.forbidden(f'{resource} "{name}" is forbidden: {why}', name, group, plural)


def _spec(obj: dict[str, Any]) -> dict[str, Any] | None:
    """``obj``'s spec, copied into it so that it can be changed, or None."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return None
    spec = obj["spec"] = dict(spec)
    return spec


def admit_pod_create(store: ObjectStore, pod: dict[str, Any], name: str) -> None:
    """The three plugins on a pod being created (``pod`` changed in place); ``name`` is what a
    refusal calls it (the request's name, or its ``generateName``)."""
    spec = _spec(pod)
    if spec is None:
        return
    _service_account(store, spec, str((pod.get("metadata") or {}).get("namespace") or ""), name)
    _priority(store, spec, name)
    _tolerations(spec)


def _service_account(store: ObjectStore, spec: dict[str, Any], ns: str, name: str) -> None:
    """The ServiceAccount plugin on a pod's ``spec`` (a copy the caller owns)."""
    account = spec.get("serviceAccountName") or spec.get("serviceAccount") or "default"
    spec["serviceAccountName"] = spec["serviceAccount"] = account
    sa = store.get(_SERVICE_ACCOUNTS, ns, account)
    if sa is None:
        raise _forbidden(
            "pods",
            "",
            name,
            f"error looking up service account {ns}/{account}: "
            f'serviceaccount "{account}" not found',
        )
    automount = spec.get("automountServiceAccountToken")
    if automount is None:
        automount = sa.get("automountServiceAccountToken")
    if automount is False:
        return
    volumes = [v for v in spec.get("volumes") or () if isinstance(v, dict)]
    volume = next(
        (v["name"] for v in volumes if str(v.get("name", "")).startswith(_TOKEN_VOLUME)), None
    )
    volume_name = volume or generate_name(_TOKEN_VOLUME)
    mount = {"name": volume_name, "readOnly": True, "mountPath": _TOKEN_PATH}
    mounted = False
    for field in ("initContainers", "containers"):
        containers = spec.get(field)
        if not isinstance(containers, list):
            continue
        spec[field] = containers = [dict(c) if isinstance(c, dict) else c for c in containers]
        for c in containers:
            if not isinstance(c, dict):
                continue
            mounts = [m for m in c.get("volumeMounts") or () if isinstance(m, dict)]
            if any(m.get("mountPath") == _TOKEN_PATH for m in mounts):
                continue
            c["volumeMounts"] = [*(c.get("volumeMounts") or ()), dict(mount)]
            mounted = True
    if volume is None and mounted:
        spec["volumes"] = [*(spec.get("volumes") or ()), _token_volume(volume_name)]


def _token_volume(name: str) -> dict[str, Any]:
    """The projected volume of a pod's service account token (``TokenVolumeSource``)."""
    namespace = {"apiVersion": "v1", "fieldPath": "metadata.namespace"}
    return {
        "name": name,
        "projected": {
            "defaultMode": 420,
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": _TOKEN_SECONDS, "path": "token"}},
                {
                    "configMap": {
                        "name": "kube-root-ca.crt",
                        "items": [{"key": "ca.crt", "path": "ca.crt"}],
                    }
                },
                {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": namespace}]}},
            ],
        },
    }


def admit_pod_update(pod: dict[str, Any], old: dict[str, Any]) -> None:
    """Priority and DefaultTolerationSeconds on a pod being updated to ``pod`` from ``old``
    (``pod`` changed in place); the ServiceAccount plugin changes only pods being created."""
    spec = _spec(pod)
    if spec is None:
        return
    old_spec = old.get("spec")
    if isinstance(old_spec, dict):
        for field in ("priority", "preemptionPolicy"):
            if spec.get(field) is None and old_spec.get(field) is not None:
                spec[field] = old_spec[field]
    _tolerations(spec)


def _default_class(store: ObjectStore) -> dict[str, Any] | None:
    """The ``globalDefault`` PriorityClass (the lowest value's of several), or None."""
    found: dict[str, Any] | None = None
    for pc in store.iter(PRIORITY_CLASSES, ""):
        if pc.get("globalDefault") and (
            found is None or pc.get("value", 0) < found.get("value", 0)
        ):
            found = pc
    return found


def _priority(store: ObjectStore, spec: dict[str, Any], name: str) -> None:
    class_name = spec.get("priorityClassName")
    if class_name:
        pc = store.get(PRIORITY_CLASSES, "", class_name)
        if pc is None:
            raise _forbidden("pods", "", name, f"no PriorityClass with name {class_name} was found")
    else:
        pc = _default_class(store)
        if pc is not None:
            spec["priorityClassName"] = pc["metadata"]["name"]
    priority = pc.get("value", 0) if pc is not None else _NO_CLASS_PRIORITY
    policy = pc.get("preemptionPolicy") if pc is not None else _PREEMPT_LOWER
    _not_other("integer value of priority", spec.get("priority"), priority, name)
    spec["priority"] = priority
    if policy is not None:
        _not_other("string value of PreemptionPolicy", spec.get("preemptionPolicy"), policy, name)
        spec["preemptionPolicy"] = policy


def _not_other(what: str, given: Any, computed: Any, name: str) -> None:
    """The plugin's 403 for a value the pod sets that differs from its class's."""
    if given is not None and given != computed:
        raise _forbidden(
            "pods",
            "",
            name,
            f"the {what} ({given}) must not be provided in pod spec; priority admission "
            f"controller computed {computed} from the given PriorityClass name",
        )


def _tolerates(tolerations: list[Any], taint: str) -> bool:
    """Whether one of ``tolerations`` tolerates ``taint`` with effect NoExecute: its key
    that taint's or empty, its effect NoExecute or empty (the plugin ignores the operator)."""
    return any(
        isinstance(t, dict)
        and t.get("key") in (None, "", taint)
        and t.get("effect") in (None, "", "NoExecute")
        for t in tolerations
    )


def _tolerations(spec: dict[str, Any]) -> None:
    given = spec.get("tolerations")
    tolerations = list(given) if isinstance(given, list) else []
    added = False
    for taint in _TAINTS:
        if not _tolerates(tolerations, taint):
            tolerations.append(
                {
                    "key": taint,
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": _TOLERATION_SECONDS,
                }
            )
            added = True
    if added:
        spec["tolerations"] = tolerations


def check_priority_class(store: ObjectStore, pc: dict[str, Any]) -> None:
    """The Priority plugin's validation of a PriorityClass being created or updated: at most
    one ``globalDefault`` (403 otherwise)."""
    if not pc.get("globalDefault"):
        return
    current = _default_class(store)
    name = pc["metadata"]["name"]
    if current is not None and current["metadata"]["name"] != name:
        group, plural = PRIORITY_CLASSES
        raise _forbidden(
            plural,
            group,
            name,
            f"PriorityClass {current['metadata']['name']} is already marked as default. "
            "Only one default can exist",
        )
