"""Write semantics: create, update, patch and delete of one server's objects.

The verbs validate and default what they store and record field ownership
(`_managedfields.py`); server-side apply has its own module (`_apply.py`). The
work kube-apiserver leaves to controllers happens synchronously in modules of
their own: the garbage collector (`_gc.py`), the namespace controller
(`_namespaces.py`) and the CRD controllers (`_crds.py`).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import re
import time
import uuid
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any, NoReturn

from mcruntime import _json, _patch
from mcruntime.envtest import _admission_plugins, _managedfields, _policies, _quantity, _rbac
from mcruntime.envtest import _services as services
from mcruntime.envtest._apply import APPLY, apply
from mcruntime.envtest._builtin_defaults import default_builtin
from mcruntime.envtest._cel_rules import check as check_rules
from mcruntime.envtest._crds import (
    CRD_CLEANUP_FINALIZER,
    CRDS,
    check_stored_versions,
    crd_resources,
    crd_status,
    established,
    name_status,
    set_crd_condition,
    validate_crd,
)
from mcruntime.envtest._csr import CSRS, signed_status
from mcruntime.envtest._defaults import INITIAL_NAMESPACES, NAMESPACE_DEFAULTS
from mcruntime.envtest._ephemeral import EPHEMERAL, ephemeral_update
from mcruntime.envtest._etcd_limit import MAX_REQUEST_BYTES, check_request_size
from mcruntime.envtest._fields import drop_unknown_fields, drop_unknown_metadata
from mcruntime.envtest._gc import FOREGROUND, ORPHAN, GarbageCollector
from mcruntime.envtest._gofmt import go_plain, go_string
from mcruntime.envtest._immutable import check_update as check_immutable_fields
from mcruntime.envtest._ips import in_step
from mcruntime.envtest._jobs import prepare_for_create as prepare_job_for_create
from mcruntime.envtest._json_types import type_error
from mcruntime.envtest._kinds import PRIORITY_CLASSES, SYSTEM_PRIORITY_CLASSES, default_and_check
from mcruntime.envtest._names import (
    annotation_causes,
    finalizer_causes,
    generate_name,
    label_causes,
    name_problems,
    now,
    owner_reference_causes,
    prefix_problems,
    rfc3339,
)
from mcruntime.envtest._namespaces import (
    FINALIZE,
    NAMESPACE_FINALIZER,
    NAMESPACES,
    PROTECTED_NAMESPACES,
    NamespaceController,
)
from mcruntime.envtest._omitempty import drop_empty
from mcruntime.envtest._pod_status import (
    check_pod_status,
    created_pod_status,
    decoded_pod_status,
)
from mcruntime.envtest._pod_update import check_pod_update
from mcruntime.envtest._registry import (
    CREATE_ON_UPDATE,
    STATUS_SUBRESOURCES,
    Registry,
    ServedResource,
)
from mcruntime.envtest._schema import Cause, apply_schema, in_version, prune
from mcruntime.envtest._status import Causes, StatusError, status_success
from mcruntime.envtest._storage import ObjectStore, ResKey, owner_uids
from mcruntime.envtest._warnings import field_validation, warn

#: set while admission prepares the object mutating webhooks are shown (`unchecked`)
_unchecked: ContextVar[bool] = ContextVar("envtest_unchecked", default=False)


@contextlib.contextmanager
def unchecked() -> Iterator[None]:
    """Inside the block, a write's object is decoded and defaulted but not validated: the
    object kube-apiserver's mutating admission is shown, which its registry validates only
    after mutation (``BeforeCreate``/``BeforeUpdate``), so a webhook may complete it."""
    token = _unchecked.set(True)
    try:
        yield
    finally:
        _unchecked.reset(token)


__all__ = [
    "Objects",
    "NAMESPACES",
    "CRDS",
    "PROTECTED_NAMESPACES",
    "check_delete_preconditions",
    "json_patch",
    "non_apply_force",
    "patch_failed",
]

MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
#: sees an object about to be written and may refuse it (raise a StatusError)
WriteCheck = Callable[[dict[str, Any]], None]
STRATEGIC = "application/strategic-merge-patch+json"
#: how long the CRD cleanup waits for a deleted CRD's custom resources to go before it
#: reports ``InstanceDeletionCheck`` and starts again: the minute apiextensions' CRD
#: finalizer polls (``crd_finalizer.go``: ``deleteInstances``)
CRD_CLEANUP_TIMEOUT = 60.0
#: the CRD finalizer's retry after a failed cleanup: client-go's default controller rate
#: limiter, 5ms doubling with each failure up to 1000s
_CRD_RETRY_BASE, _CRD_RETRY_MAX = 0.005, 1000.0
#: the field manager of the signer's writes (kube-controller-manager's, as on a real cluster)
_SIGNER = "kube-controller-manager"
_SERVER_META = ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds")
#: the fields of a status write's schema causes (apiextensions validates its status alone)
_STATUS_AT = ("status.", "status[")
#: the kinds whose registry sets ``ReturnDeletedObject``: a delete answers with the object
#: as it was, not a Status (the typed clients expect it)
_RETURNS_OBJECT = frozenset(
    {
        ("", "pods"),
        ("", "services"),
        NAMESPACES,
        ("", "persistentvolumeclaims"),
        ("", "persistentvolumes"),
        ("", "podtemplates"),
        ("", "resourcequotas"),
        ("", "serviceaccounts"),
        ("storage.k8s.io", "storageclasses"),
        ("storage.k8s.io", "csidrivers"),
        ("storage.k8s.io", "csinodes"),
        ("storage.k8s.io", "volumeattachments"),
    }
)
DEPLOYMENTS: ResKey = ("apps", "deployments")
NODES: ResKey = ("", "nodes")
_REPLICATED = frozenset(
    {("apps", "deployments"), ("apps", "replicasets"), ("apps", "statefulsets")}
)


_WEBHOOK_CONFIGS = frozenset(
    {
        ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"),
        ("admissionregistration.k8s.io", "validatingwebhookconfigurations"),
    }
)


def _check_policy(key: ResKey, obj: dict[str, Any]) -> None:
    """A ValidatingAdmissionPolicy or its binding defaulted and validated (`_policies`)."""
    if key == _policies.POLICIES:
        _policies.default_policy(obj)
        _policies.validate_policy(obj)
    else:
        _policies.default_binding(obj)
        _policies.validate_binding(obj)


#: the finalizers of Kubernetes itself, which need no domain
_STANDARD_FINALIZERS = frozenset({ORPHAN, FOREGROUND, "kubernetes"})


def _warn_finalizer_names(obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    """apiextensions-apiserver's warnings for the finalizers a write adds to a custom
    resource without a domain and path (`customresource/validator.go`,
    ``validateKubeFinalizerName``): another controller may use the same bare name."""
    added = set((obj.get("metadata") or {}).get("finalizers") or ())
    if old is not None:
        added -= set((old.get("metadata") or {}).get("finalizers") or ())
    for name in sorted(added):
        if "/" in name or name in _STANDARD_FINALIZERS:
            continue
        path = " including a path (/)" if "." in name else ""
        warn(
            f'metadata.finalizers: "{name}": prefer a domain-qualified finalizer name{path} '
            "to avoid accidental conflicts with other finalizer writers"
        )


def _validate_webhook_configuration(obj: dict[str, Any]) -> None:
    from mcruntime.envtest._admission import validate_configuration  # imports this module

    validate_configuration(obj)


def _decode_node(obj: dict[str, Any]) -> None:
    """A Node's ``spec.podCIDR`` and ``spec.podCIDRs`` in step, as kube's core/v1 conversion
    keeps them (``Convert_v1_NodeSpec_To_core_NodeSpec`` and back: `_ips.in_step`)."""
    spec = obj.get("spec")
    if isinstance(spec, dict):
        obj["spec"] = in_step(spec, "podCIDR", "podCIDRs", None)


def _spec_of(obj: dict[str, Any], custom: bool = False) -> dict[str, Any]:
    """What of ``obj`` bumps its generation when it changes: all but its metadata and
    status; a custom resource's status too (apiextensions' ``PrepareForUpdate``: any change
    outside ``metadata``; one with a status subresource keeps the status it had)."""
    skip = (
        ("metadata", "kind", "apiVersion")
        if custom
        else ("metadata", "status", "kind", "apiVersion")
    )
    return {k: v for k, v in obj.items() if k not in skip}


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    m = obj.get("metadata")
    return m if isinstance(m, dict) else {}


def non_apply_force() -> StatusError:
    """The 422 of ``force=true`` on a patch that is not an apply, as kube-apiserver's
    ``PatchOptions`` validation words it."""
    return StatusError.invalid(
        "PatchOptions",
        "",
        "meta.k8s.io",
        "force",
        "Forbidden: may not be specified for non-apply patch",
    )


def patch_failed(e: _patch.PatchError, kind: str, name: str, group: str) -> StatusError:
    """kube-apiserver's answer to a merge or strategic merge patch that does not apply: a
    list item without its merge key is strategicpatch's ``ErrNoMergeKey``, an error no
    handler turns into a ``Status`` (``interpretStrategicMergePatchError`` passes it on), so
    a 500 without reason in Go's words; anything else a 422 on the object."""
    if isinstance(e, _patch.MergeKeyMissing):
        return StatusError(
            500, "", f"map: {go_plain(e.item)} does not contain declared merge key: {e.key}"
        )
    return StatusError.invalid(kind, name, group, "patch", str(e))


#: kube-apiserver's ``maxJSONPatchOperations``
MAX_JSON_PATCH_OPERATIONS = 10000


def json_patch(current: Any, patch: Any) -> Any:
    """``current`` with the JSON patch ``patch`` applied, failing as kube-apiserver does: 400
    for a body that is not an array of operation objects, and its one generic 422 for
    operations that do not apply (a failed ``test``, a missing path, an unknown op)."""
    if not isinstance(patch, list) or not all(isinstance(op, dict) for op in patch):
        raise StatusError.bad_request("a JSON patch must be a JSON array of operation objects")
    if len(patch) > MAX_JSON_PATCH_OPERATIONS:  # the patch handler's maxJSONPatchOperations
        raise StatusError(
            413,
            "RequestEntityTooLarge",
            "Request entity too large: The allowed maximum operations in a JSON patch is "
            f"{MAX_JSON_PATCH_OPERATIONS}, got {len(patch)}",
        )
    try:
        return _patch.json_patch(current, patch)
    except _patch.PatchError:
        raise StatusError.json_patch_failed() from None


class Objects:
    """The REST write verbs of one server over its `Store` and `Registry`."""

    def __init__(self, store: ObjectStore, registry: Registry) -> None:
        self.store = store
        self.registry = registry
        self.gc = GarbageCollector(
            store, self.delete_object, self._remove, frozen=lambda: self.frozen()
        )
        self.namespaces = NamespaceController(store, self.delete_object, self._remove)
        self._cluster_ip = 10
        #: CRDs whose custom resources `_delete_crd` is deleting now (each removal's
        #: `_finish_crd` waits for the end of it)
        self._crds_emptying: set[str] = set()
        #: seconds the CRD cleanup waits for the custom resources (`CRD_CLEANUP_TIMEOUT`)
        self.crd_cleanup_timeout = CRD_CLEANUP_TIMEOUT
        #: each deleted CRD's next cleanup step on the loop, and the failed attempts so far
        self._crd_timers: dict[str, asyncio.TimerHandle] = {}
        self._crd_failures: dict[str, int] = {}
        #: whether storage is down (`APIServer.storage_outage()`): the CRD cleanup writes
        #: through storage, so its steps due meanwhile wait in `_crd_deferred` until it is back
        self.storage_down: Callable[[], bool] = lambda: False
        #: whether the server is frozen (`APIServer.freeze()`): a SIGSTOPped kube-apiserver
        #: runs no CRD cleanup, and kube-controller-manager's garbage collector cannot reach
        #: it; their steps due meanwhile wait too, until `thaw()`
        self.frozen: Callable[[], bool] = lambda: False
        self._crd_deferred: dict[str, Callable[[str], None]] = {}
        #: called with the name of each namespace created (the namespace controllers' content)
        self.on_namespace_created: Callable[[str], None] | None = None

    # ----------------------------------------------------------------- helpers

    def bootstrap(self) -> None:
        """Create the namespaces, system PriorityClasses and ``cluster-admin`` every cluster
        starts with."""
        for ns in INITIAL_NAMESPACES:
            if self.store.get(NAMESPACES, "", ns) is None:
                self.create(self._res(NAMESPACES), "", {"metadata": {"name": ns}})
        for key, obj in (
            *((PRIORITY_CLASSES, pc) for pc in SYSTEM_PRIORITY_CLASSES),
            *_rbac.BOOTSTRAP,
        ):
            if self.store.get(key, "", obj["metadata"]["name"]) is None:
                self.create(self._res(key), "", copy.deepcopy(obj))

    def _res(self, key: ResKey) -> ServedResource:
        for r in self.registry.versions_of(key):
            return r
        raise KeyError(key)

    def _not_found(self, res: ServedResource, name: str) -> StatusError:
        return StatusError.not_found(res.qualified, name, res.group, res.plural)

    def _check_body(self, res: ServedResource, body: Any) -> tuple[dict[str, Any], list[Cause]]:
        """``body`` decoded, and the faults of its labels, annotations, owner references and
        finalizers (apimachinery's ``ValidateObjectMeta``), refused with the rest of the
        object's faults by `_refuse_invalid`; a body that is not an object is refused at once."""
        if not isinstance(body, dict):
            raise StatusError.bad_request("the body of the request must be a JSON object")
        kind = body.get("kind")
        if kind not in (None, "", res.kind):
            raise StatusError.bad_request(
                f"the kind of the provided object ({kind}) does not match the resource ({res.kind})"
            )
        api_version = body.get("apiVersion")
        if api_version not in (None, "", res.api_version):
            raise StatusError.bad_request(
                f"the API version in the data ({api_version}) does not match the expected "
                f"API version ({res.api_version})"
            )
        # decoded (its JSON types checked) before anything else looks at it
        decoded = self.decoded(res, body)
        meta = decoded.get("metadata", {})
        if meta is None:
            meta = {}
        if not isinstance(meta, dict):
            raise StatusError.bad_request("metadata must be a JSON object")
        causes: list[Cause] = []
        for field in ("labels", "annotations"):
            value = meta.get(field)
            if value is None:
                continue
            if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
                raise StatusError.invalid(
                    res.kind,
                    str(meta.get("name", "")),
                    res.group,
                    f"metadata.{field}",
                    "must be a map of string keys to string values",
                )
            if field == "labels":
                causes += label_causes(value, "metadata.labels")
            else:
                causes += annotation_causes(value, "metadata.annotations")
        refs = meta.get("ownerReferences")
        if refs is not None:
            if not isinstance(refs, list):
                refs = [refs]
            for i, ref in enumerate(refs):
                field = f"metadata.ownerReferences[{i}]"
                if not isinstance(ref, dict):
                    causes.append(
                        ("FieldValueInvalid", field, f"{field}: Invalid value: must be an object")
                    )
            causes += owner_reference_causes(refs, "metadata.ownerReferences")
        finalizers = meta.get("finalizers")
        if finalizers is not None and (
            not isinstance(finalizers, list) or not all(isinstance(f, str) for f in finalizers)
        ):
            raise StatusError.invalid(
                res.kind,
                str(meta.get("name", "")),
                res.group,
                "metadata.finalizers",
                "must be a list of strings",
            )
        if finalizers:
            # apimachinery's ValidateFinalizers: each one a qualified name, not orphan and foreground both
            causes += finalizer_causes(finalizers, "metadata.finalizers")
        return decoded, causes

    def _refuse_invalid(
        self,
        res: ServedResource,
        obj: dict[str, Any],
        old: dict[str, Any] | None,
        causes: list[Cause],
    ) -> None:
        """422 for the metadata faults ``causes`` of ``obj`` (``old``: the object it updates),
        if any, with the faults of the rest of it after them (a built-in kind's checks, a
        custom resource's schema and CEL rules): kube-apiserver's ``Validate`` of a kind is
        ``ValidateObjectMeta`` and the kind's checks in one ``ErrorList``, so one answer names
        every fault."""
        if not causes:
            return
        if _unchecked.get():  # the rest may be mutated yet, and is validated after
            pass
        elif not res.custom:
            try:
                default_and_check(res.key, copy.deepcopy(obj), old)
            except StatusError as e:
                if e.code == 422:
                    causes = causes + e.causes()
        elif res.schema is not None:
            trial = drop_unknown_metadata(copy.deepcopy(obj), [])
            if res.has_status:  # the main resource's write keeps the stored status
                trial.pop("status", None)
                if old is not None and "status" in old:
                    trial["status"] = old["status"]
            out, more = apply_schema(trial, res.schema, old=old)
            if res.rules is not None:
                more += check_rules(res.rules, more, out, old)
            causes = causes + more
        name = str((obj.get("metadata") or {}).get("name") or "")
        raise StatusError.invalid_causes(res.kind, name, res.group, causes)

    def decoded(self, res: ServedResource, body: dict[str, Any]) -> dict[str, Any]:
        """``body`` as kube-apiserver decodes it into a built-in kind and encodes it again:
        a 400 for a field whose JSON type its Go field does not take (`_json_types`), its
        quantities canonical (a 400 for one that is not a quantity); a custom resource as
        sent."""
        if res.custom:
            return body
        problem = type_error(body, res.api_version, res.kind)
        try:
            if problem is not None:
                raise ValueError(problem)
            return _quantity.canonicalize(body, res.api_version, res.kind)
        except ValueError as e:
            raise StatusError.bad_request(
                f'{res.kind} in version "{res.version}" cannot be handled as a {res.kind}: {e}'
            ) from None

    def _check_namespace(self, res: ServedResource, ns: str, name: str) -> None:
        nsobj = self.store.get(NAMESPACES, "", ns)
        if nsobj is None:
            raise StatusError.not_found("namespaces", ns, "", "namespaces")
        if "deletionTimestamp" in nsobj["metadata"]:
            e = StatusError.forbidden(
                f'{res.qualified} "{name}" is forbidden: unable to create new content in '
                f"namespace {ns} because it is being terminated",
                name,
                res.group,
                res.plural,
            )
            # as kube-apiserver's NamespaceLifecycle admission says it, for clients that look
            # for the cause (client-go's HasStatusCause(err, NamespaceTerminatingCause))
            cause = {
                "reason": "NamespaceTerminating",
                "message": f"namespace {ns} is being terminated",
                "field": "metadata.namespace",
            }
            e.details = {**(e.details or {}), "causes": [cause]}
            raise e

    # ----------------------------------------------------------------- create

    def create(
        self,
        res: ServedResource,
        ns: str,
        body: Any,
        *,
        dry_run: bool = False,
        manager: str | None = None,
        managed_fields: list[dict[str, Any]] | None = None,
        check: WriteCheck | None = None,
        prepare: bool = True,
        sent: Any = None,
        uid: str | None = None,
        applied: bool = False,
    ) -> dict[str, Any]:
        """POST: store a new object (``dry_run``: only validate and return it).

        ``manager`` owns the created fields (an Update entry of ``managedFields``);
        ``managed_fields`` replaces that record (server-side apply). ``check`` sees the
        object as it would be stored and may refuse it (the RBAC escalation check).
        ``prepare=False`` leaves out what kube-apiserver's registry adds after mutating
        admission (a Job's generated selector): the object mutating webhooks see; ``sent``
        is the request's body when ``body`` is what admission made of it, and ``uid`` the
        uid admission's webhooks were shown (kube-apiserver assigns one, once).
        ``applied``: the create of a server-side apply (a PATCH), which kube-apiserver makes
        while its CRD terminates too (it refuses POSTs only); the CRD's cleanup deletes it.
        """
        if res.custom and not applied:
            self._check_crd_not_terminating(res)
        body, meta_causes = self._check_body(res, body)
        meta = dict(body.get("metadata") or {})
        if res.namespaced:
            body_ns = meta.get("namespace")
            if body_ns and body_ns != ns:
                raise StatusError.bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            meta["namespace"] = ns
        else:
            meta.pop("namespace", None)
        name = meta.get("name")
        requested = name or meta.get("generateName")  # what admission's refusals call it
        if not name:
            prefix = meta.get("generateName")
            if not prefix or not isinstance(prefix, str):
                raise StatusError.invalid(
                    res.kind,
                    "",
                    res.group,
                    "metadata.name",
                    "Required value: name or generateName is required",
                )
            for _ in range(8):
                name = generate_name(prefix)
                if self.store.get(res.key, ns if res.namespaced else "", name) is None:
                    break
        if not isinstance(name, str):
            raise StatusError.invalid(
                res.kind, str(name), res.group, "metadata.name", "must be a string"
            )
        # ValidateObjectMeta: generateName checked whenever given (a name given too included)
        causes = Causes()
        prefix = meta.get("generateName")
        if isinstance(prefix, str) and prefix:
            for why in prefix_problems(prefix, res.name_rule):
                causes.invalid("metadata.generateName", f'"{prefix}"', why)
        for why in name_problems(name, res.name_rule):
            causes.invalid("metadata.name", f'"{name}"', why)
        meta["name"] = name
        self._refuse_invalid(res, {**body, "metadata": meta}, None, causes.items + meta_causes)
        if res.namespaced:
            self._check_namespace(res, ns, name)
        if (there := self.store.get(res.key, ns if res.namespaced else "", name)) is not None:
            if not dry_run:  # the storage's check comes before its key-exists check
                _check_no_resource_version(meta)
            e = StatusError.already_exists(res.qualified, name, res.group, res.plural)
            if "deletionTimestamp" in there["metadata"]:
                # kube-apiserver's registry says why the name is still taken: an object its
                # finalizers hold (a namespace stuck Terminating, re-created)
                e.message = f"object is being deleted: {e.message}"
            raise e
        set_version = meta.get("resourceVersion")
        for k in (
            "resourceVersion",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "selfLink",
            "managedFields",
        ):
            meta.pop(k, None)
        meta["uid"] = uid or str(uuid.uuid4())
        meta["creationTimestamp"] = now()
        if res.generation:
            meta["generation"] = 1
        else:
            meta.pop("generation", None)
        obj = dict(body)
        obj["metadata"] = meta
        obj["apiVersion"] = res.api_version
        obj["kind"] = res.kind
        self._prepare_create(res, obj, prepare)
        obj = self._known_fields(res, obj, None, status=False)
        if managed_fields is None and manager:
            managed_fields = self._track(res, None, obj, None, manager, "")
        if managed_fields:
            obj["metadata"]["managedFields"] = _managedfields.sort_entries(managed_fields)
        self._admit_builtin(res, obj, None, str(requested or name))
        if res.custom:
            _warn_finalizer_names(obj, None)
        if prepare:  # after the field manager, as kube-apiserver's registry strategy runs
            prepare_job_for_create(res.key, obj, body if sent is None else sent)
        if check is not None:
            check(obj)
        if dry_run:  # kube-apiserver's dry-run storage makes no resourceVersion check
            return obj
        _check_no_resource_version({"resourceVersion": set_version})
        obj = self._stored(res, obj)
        self._fits_etcd(res, obj)
        self.store.commit(res.key, "ADDED", obj, None)
        if res.key == ("", "services") and obj["spec"].get("clusterIP") == self._next_cluster_ip():
            self._cluster_ip += 1  # taken: dry runs (and admission's) showed it without taking it
        if res.key == CRDS:
            self._serve_crd(obj)
        elif res.key == NAMESPACES and self.on_namespace_created is not None:
            self.on_namespace_created(name)
        elif res.key == _rbac.CLUSTER_ROLES:
            self._aggregate_cluster_roles()
        elif res.key == _policies.POLICIES:
            self._policy_status(res, obj)
        self.gc.watch_for_dangling(res.key, obj)
        if res.custom and self._crd_cleaning(res) is not None:
            # created while its CRD's cleanup runs, which deletes it: at once here
            self.delete_object(res.key, obj, "Background")
        return obj

    def _admit_builtin(
        self, res: ServedResource, obj: dict[str, Any], old: dict[str, Any] | None, name: str
    ) -> None:
        """kube-apiserver's built-in admission plugins that change or refuse Pods and
        PriorityClasses (`_admission_plugins`): after the field manager, before the mutating
        webhooks see ``obj`` (``old`` on update; ``name`` as a refusal calls the object)."""
        key = res.key
        if key == _admission_plugins.PODS:
            if old is None:
                _admission_plugins.admit_pod_create(self.store, obj, name)
            else:
                _admission_plugins.admit_pod_update(obj, old)
        elif key == PRIORITY_CLASSES:
            _admission_plugins.check_priority_class(self.store, obj)

    def _next_cluster_ip(self) -> str:
        """The cluster IP the next Service gets (taken once one is stored with it)."""
        n = self._cluster_ip + 1
        return f"10.96.{n // 250 % 250}.{n % 250 + 1}"

    def _prepare_create(self, res: ServedResource, obj: dict[str, Any], prepare: bool) -> None:
        """The defaults and registry fields of ``obj`` being created; ``prepare=False`` leaves
        out what kube-apiserver's registry sets after mutating admission: a Service's
        allocated cluster IPs, IP families and node ports, a Pod's status."""
        key = res.key
        if key == NAMESPACES:
            self._namespace_defaults(obj)
            # kube-apiserver's create strategy: the namespace controller's finalizer, always
            finalizers = list((obj["spec"]).get("finalizers") or ())
            if NAMESPACE_FINALIZER not in finalizers:
                finalizers.append(NAMESPACE_FINALIZER)
            self._namespace_finalizers(obj, finalizers)
            obj["status"] = {"phase": "Active"}
        elif key == ("", "secrets"):
            self._secret_defaults(obj)
        elif key == ("", "pods"):
            if prepare:
                obj.pop("status", None)  # the strategy's, once the spec is defaulted (below)
        elif key == ("", "services"):
            # the scheme's defaults first (type, sessionAffinity, ...), as the body is decoded
            obj["spec"] = dict(obj.get("spec") or {})
            default_builtin(key, obj)
            spec = obj["spec"]
            if prepare:  # the REST storage's allocation, after mutating admission
                if spec["type"] != "ExternalName" and not spec.get("clusterIP"):
                    ip = self._next_cluster_ip()
                    spec["clusterIP"] = ip
                    spec["clusterIPs"] = [ip]
                elif spec.get("clusterIP") and not spec.get("clusterIPs"):
                    spec["clusterIPs"] = [spec["clusterIP"]]
                meta = obj["metadata"]
                services.prepare_create(self.store, meta.get("namespace", ""), meta["name"], spec)
                obj["status"] = {"loadBalancer": {}}
        elif key == CRDS:
            obj["spec"] = validate_crd(obj)
            obj["status"] = crd_status(obj, None, self._group_crds(obj))
        elif key in _WEBHOOK_CONFIGS:
            _validate_webhook_configuration(obj)
        elif key in _policies.KEYS:
            obj["spec"] = copy.deepcopy(obj.get("spec"))
            _check_policy(key, obj)
            if key == _policies.POLICIES:
                obj["status"] = {}
        elif res.custom:
            if res.has_status:
                obj.pop("status", None)
        elif key == NODES:
            _decode_node(obj)
        elif res.has_status:
            obj["status"] = {}
        if key in _REPLICATED:
            rspec = obj.get("spec")
            if isinstance(rspec, dict) and "replicas" not in rspec:
                obj["spec"] = {**rspec, "replicas": 1}
        if not res.custom:
            _default_and_check(key, obj, None)
        if key == ("", "pods") and prepare:
            obj["status"] = created_pod_status(obj.get("spec"))

    def _sign(self, res: ServedResource, csr: dict[str, Any]) -> None:
        """kube-controller-manager's signer: an approved request's certificate (or a Failed
        condition) written to its status; the write calls this again, which finds it done."""
        status = signed_status(csr)
        if status is not None:
            name = csr["metadata"]["name"]
            self.update(
                res, "", name, {**csr, "status": status}, subresource="status", manager=_SIGNER
            )

    def _policy_status(self, res: ServedResource, policy: dict[str, Any]) -> None:
        """kube-controller-manager's type checker: the status of a policy whose generation it
        has not seen (the write calls this again, which finds it done)."""
        status = _policies.policy_status(policy)
        if policy.get("status") != status:
            name = policy["metadata"]["name"]
            self.update(
                res,
                "",
                name,
                {**policy, "status": status},
                subresource="status",
                manager=_policies.STATUS_MANAGER,
            )

    def _aggregate_cluster_roles(self) -> None:
        """Write into the first aggregated ClusterRole whose rules are out of date the rules it
        should hold (the aggregation controller's work): that write calls this again, for the
        next one, until every one is up to date."""
        for role, rules in _rbac.aggregations(self.store):
            if (role.get("rules") or []) != rules:
                self.update(
                    self._res(_rbac.CLUSTER_ROLES),
                    "",
                    role["metadata"]["name"],
                    {**role, "rules": rules},
                    manager="clusterrole-aggregation-controller",
                )
                return

    def _namespace_defaults(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        meta["labels"] = {**(meta.get("labels") or {}), "kubernetes.io/metadata.name": meta["name"]}
        spec = obj.get("spec")
        obj["spec"] = dict(spec) if isinstance(spec, dict) else {}

    def _namespace_finalizers(self, obj: dict[str, Any], finalizers: Any) -> None:
        """Set ``spec.finalizers`` of the namespace ``obj`` (dropped when empty, as stored)."""
        spec = obj["spec"] = dict(obj.get("spec") or {})
        if finalizers:
            spec["finalizers"] = list(finalizers)
        else:
            spec.pop("finalizers", None)

    def _secret_defaults(self, obj: dict[str, Any]) -> None:
        string_data = obj.pop("stringData", None)
        if isinstance(string_data, dict):
            data = dict(obj.get("data") or {})
            for k, v in string_data.items():
                data[k] = base64.b64encode(str(v).encode()).decode()
            obj["data"] = data
        obj.setdefault("type", "Opaque")

    # ----------------------------------------------------------------- update

    def update(
        self,
        res: ServedResource,
        ns: str,
        name: str,
        body: Any,
        *,
        subresource: str = "",
        dry_run: bool = False,
        manager: str | None = None,
        managed_fields: list[dict[str, Any]] | None = None,
        check: WriteCheck | None = None,
    ) -> dict[str, Any]:
        """PUT, on the object or on ``subresource``: replace the object (or, for a subresource
        of `STATUS_SUBRESOURCES`, its status); 200 with the result. A PUT of an absent
        object of a resource of `CREATE_ON_UPDATE` creates it (`created_by_update`).

        ``manager`` takes ownership of the fields the update changes (an Update entry
        of ``managedFields``, recorded for ``subresource``); ``managed_fields`` replaces
        that record (server-side apply). ``check`` as for `create`.
        """
        body, meta_causes = self._check_body(res, body)
        status = subresource in STATUS_SUBRESOURCES
        if meta_causes and subresource:
            raise StatusError.invalid_causes(res.kind, name, res.group, meta_causes)
        meta = dict(body.get("metadata") or {})
        _check_url_name(res, ns, name, meta)
        store_ns = ns if res.namespaced else ""
        stored = self.store.get(res.key, store_ns, name)
        if stored is None and not subresource and res.key in CREATE_ON_UPDATE:
            created = self.created_by_update(res, ns, name, body)
            return self.create(res, ns, created, dry_run=dry_run, manager=manager, check=check)
        if stored is None:
            raise self._not_found(res, name)
        # updated as served in the request's version (a CRD's object stored in another is
        # converted, with its stored version's defaults), as kube-apiserver decodes it first
        old = self._out(res, stored) if res.custom else stored
        self._refuse_invalid(res, {**body, "metadata": {**meta, "name": name}}, old, meta_causes)
        old_meta = old["metadata"]
        uid = meta.get("uid")
        if uid and uid != old_meta["uid"]:
            raise StatusError.conflict(
                res.qualified,
                name,
                res.group,
                res.plural,
                f"Precondition failed: UID in precondition: {uid}, UID in object meta: {old_meta['uid']}",
            )
        rv = meta.get("resourceVersion")
        if rv in (None, "", "0") and res.custom and subresource in ("", "status"):
            # a custom resource's strategy allows no unconditional update (apiextensions'
            # customResourceStrategy.AllowUnconditionalUpdate is false): the generic store's
            # Update refuses it, naming the resource where the kind goes (its TODO) and the
            # resourceVersion it parsed, a uint64 printed by Go as 0x0
            raise StatusError.invalid(
                res.plural,
                name,
                res.group,
                "metadata.resourceVersion",
                "Invalid value: 0x0: must be specified for an update",
            )
        if rv and rv != old_meta["resourceVersion"]:
            raise StatusError.conflict(
                res.qualified,
                name,
                res.group,
                res.plural,
                "the object has been modified; please apply your changes to the latest version and try again",
            )
        if status:
            new = dict(old)
            new_meta = dict(old_meta)
            if "status" in body:
                new["status"] = body["status"]
                if res.key == _admission_plugins.PODS:
                    new["status"] = decoded_pod_status(body["status"])
            else:
                new.pop("status", None)
        elif subresource == EPHEMERAL:  # the pod's ephemeral containers, nothing else
            sent = dict(body)
            default_builtin(res.key, sent)  # compared and stored defaulted, as decoded
            new = ephemeral_update(name, old, sent)
            new_meta = dict(old_meta)
        else:
            new = dict(body)
            new_meta = meta
            new_meta["name"] = name
            if res.namespaced:
                new_meta["namespace"] = ns
            else:
                new_meta.pop("namespace", None)
            new_meta.pop("selfLink", None)
            for k in _SERVER_META:
                if k in old_meta:
                    new_meta[k] = old_meta[k]
                else:
                    new_meta.pop(k, None)
            if res.has_status:
                if "status" in old:
                    new["status"] = old["status"]
                else:
                    new.pop("status", None)
            self._prepare_update(res, new, old)
            if res.key == NAMESPACES:
                # spec.finalizers change through /finalize only, and only they do there
                source = body if subresource == FINALIZE else old
                self._namespace_finalizers(new, (source.get("spec") or {}).get("finalizers"))
            if "deletionTimestamp" in old_meta:
                before = set(old_meta.get("finalizers") or ())
                added = [f for f in new_meta.get("finalizers") or () if f not in before]
                if added:
                    raise StatusError.invalid(
                        res.kind,
                        name,
                        res.group,
                        "metadata.finalizers",
                        f"Forbidden: no new finalizers can be added if the object is being deleted, "
                        f"found new finalizers {_json.dumps(added).decode()}",
                    )
        new["metadata"] = new_meta
        new["apiVersion"] = res.api_version
        new["kind"] = res.kind
        new = self._known_fields(res, new, old, status=status)
        new_meta = new["metadata"]  # a copy when fields were dropped from it
        new_meta.pop("generation", None)
        if managed_fields is None:
            base = old_meta.get("managedFields")
            if "managedFields" in meta and not _managedfields.equivalent(
                meta["managedFields"], base
            ):
                base = meta["managedFields"]
            managed_fields = (
                self._track(res, old, new, base, manager, subresource)
                if manager
                else (base if isinstance(base, list) else [])
            )
        if managed_fields:
            new_meta["managedFields"] = _managedfields.sort_entries(managed_fields)
        else:
            new_meta.pop("managedFields", None)
        if not subresource:
            self._admit_builtin(res, new, old, name)
            if res.custom:
                _warn_finalizer_names(new, old)
            if _unchecked.get():
                pass  # validated after mutating admission
            elif res.key == _admission_plugins.PODS:
                check_pod_update(name, new, old)
            elif not res.custom:
                check_immutable_fields(res.key, name, new, old)
        elif status and res.key == _admission_plugins.PODS:
            check_pod_status(name, new.get("status"))
        if res.generation:
            gen = old_meta.get("generation", 1)
            if not status and (
                _spec_of(new, res.custom) != _spec_of(old, res.custom)
                or (
                    res.key == DEPLOYMENTS
                    and new_meta.get("annotations") != old_meta.get("annotations")
                )
            ):
                gen += 1
            new_meta["generation"] = gen
        new_meta["resourceVersion"] = old_meta["resourceVersion"]
        if check is not None and new != old:
            check(new)
        if dry_run:
            return old if new == old else new
        # compared as stored: a write that stores nothing new is not made (a default the
        # object was read with is stored by it, as kube-apiserver compares encoded bytes)
        new, old = self._stored(res, new), stored
        if new == old:
            return old
        self._fits_etcd(res, new)
        deleting = "deletionTimestamp" in new_meta
        held = bool(new_meta.get("finalizers")) or (
            res.key == NAMESPACES and bool((new.get("spec") or {}).get("finalizers"))
        )
        if deleting and not held:
            # a namespace goes too once no finalizer of either kind is left, with whatever
            # content is still in it (as kube-apiserver does after a PUT to /finalize)
            self._remove(res.key, new, old)
            return new
        self.store.commit(res.key, "MODIFIED", new, old)
        for uid in owner_uids(old) - owner_uids(new):
            self.gc.check_foreground(uid)
        if owner_uids(new) - owner_uids(old):
            self.gc.watch_for_dangling(res.key, new)
        if res.key == CRDS:
            self._serve_crd(new, old)
            if new["spec"]["names"] != old["spec"].get("names"):
                self._rename_group(new["spec"]["group"])  # names it gave up may be free
        elif res.key == NAMESPACES and deleting:
            self.namespaces.finish(name)
        elif res.key == _rbac.CLUSTER_ROLES:
            self._aggregate_cluster_roles()
        elif res.key == CSRS:
            self._sign(res, new)
        elif res.key == _policies.POLICIES:
            self._policy_status(res, new)
        return new

    def created_by_update(
        self, res: ServedResource, ns: str, name: str, body: Any
    ) -> dict[str, Any]:
        """The object a PUT of absent ``name`` (of a resource of `CREATE_ON_UPDATE`) creates,
        as kube-apiserver's ``Store.Update`` creates it: a ``metadata.uid`` in ``body`` is a
        precondition the absent object fails (409), a ``resourceVersion`` is dropped (the
        storage clears it), the rest goes through create's defaults, admission and
        validation, and the response is a 201."""
        body, _ = self._check_body(res, body)  # its metadata's faults: create's to refuse
        meta = dict(body.get("metadata") or {})
        _check_url_name(res, ns, name, meta)
        uid = meta.get("uid")
        if uid:
            raise StatusError.conflict(
                res.qualified,
                name,
                res.group,
                res.plural,
                f"Precondition failed: UID in precondition: {uid}, UID in object meta: ",
            )
        meta.pop("resourceVersion", None)
        meta["name"] = name
        return {**body, "metadata": meta}

    def _track(
        self,
        res: ServedResource,
        old: dict[str, Any] | None,
        new: dict[str, Any],
        base: Any,
        manager: str,
        subresource: str,
    ) -> list[dict[str, Any]]:
        """``managedFields`` after ``manager`` wrote ``new`` over ``old`` (an Update operation,
        through ``subresource`` when not "")."""
        status = subresource in STATUS_SUBRESOURCES
        return _managedfields.track_update(
            old,
            new,
            base,
            manager=manager,
            api_version=res.api_version,
            subresource=subresource,
            status="only" if status else ("main" if res.has_status else ""),
            shape=_managedfields.shape_for(res.schema, not res.custom, res.kind),
        )

    def _known_fields(
        self,
        res: ServedResource,
        obj: dict[str, Any],
        old: dict[str, Any] | None,
        *,
        status: bool,
    ) -> dict[str, Any]:
        """``obj`` without the fields its kind does not have: a custom resource pruned and
        defaulted by its schema, then checked by it and its CEL rules (``old`` is the stored
        object on an update, ``status`` says the write is the status subresource's), a
        built-in kind decoded as kube-apiserver's Go types would."""
        dropped: list[str] = []
        if res.custom:
            obj = drop_unknown_metadata(obj, dropped)
            _unknown_fields(res, dropped)
            out = obj
            if res.schema is not None:
                dropped = []
                out, causes = apply_schema(obj, res.schema, dropped, old)
                _unknown_fields(res, dropped)
                if status:  # the status subresource validates the status alone (its schema's)
                    causes = [c for c in causes if c[1] == "status" or c[1].startswith(_STATUS_AT)]
                if res.rules is not None:
                    causes += check_rules(res.rules, causes, out, old)
                if causes and not _unchecked.get():
                    name = obj["metadata"]["name"]
                    raise StatusError.invalid_causes(res.kind, name, res.group, causes)
        else:
            out = drop_unknown_fields(res, obj, dropped)
            _unknown_fields(res, dropped)
        # as stored: empty omitempty maps and lists gone (see _omitempty)
        return drop_empty(res, out)

    def undeclared_fields(self, res: ServedResource, obj: dict[str, Any]) -> list[str]:
        """The paths of ``obj``'s fields its kind does not declare (what `_known_fields`
        would drop), without a warning or refusal; ``obj`` is left as it is."""
        dropped: list[str] = []
        if not res.custom:
            drop_unknown_fields(res, obj, dropped)
            return dropped
        drop_unknown_metadata(obj, dropped)
        if res.schema is not None:
            apply_schema(obj, res.schema, dropped)
        return dropped

    def _prepare_update(
        self, res: ServedResource, new: dict[str, Any], old: dict[str, Any]
    ) -> None:
        key = res.key
        if key == NAMESPACES:
            self._namespace_defaults(new)
        elif key == ("", "secrets"):
            self._secret_defaults(new)
        elif key == ("", "services"):
            # the scheme's defaults first, as the body is decoded: a type left out is
            # ClusterIP, not carried forward from the old object
            new["spec"] = dict(new.get("spec") or {})
            default_builtin(key, new)
            spec = new["spec"]
            old_spec = old.get("spec") or {}
            meta = old["metadata"]
            services.prepare_update(
                self.store, meta.get("namespace", ""), meta["name"], spec, old_spec
            )
        elif key == CRDS:
            new["spec"] = validate_crd(new, old)
            # as kube-apiserver's CRD strategy: a new storage version joins status.storedVersions
            # (objects may now be stored in it); the naming controller accepts the new names
            # no other CRD of the group has
            new["status"] = crd_status(new, new.get("status"), self._group_crds(new))
            check_stored_versions(new)
        elif key in _WEBHOOK_CONFIGS:
            _validate_webhook_configuration(new)
        elif key in _policies.KEYS:
            new["spec"] = copy.deepcopy(new.get("spec"))
            _check_policy(key, new)
        elif key == NODES:
            _decode_node(new)
        if key in _REPLICATED:
            rspec = new.get("spec")
            if isinstance(rspec, dict) and "replicas" not in rspec:
                new["spec"] = {**rspec, "replicas": 1}
        if not res.custom:
            _default_and_check(key, new, old)

    # ----------------------------------------------------------------- patch

    def patch(
        self,
        res: ServedResource,
        ns: str,
        name: str,
        content_type: str,
        raw: bytes,
        *,
        subresource: str = "",
        dry_run: bool = False,
        manager: str | None = None,
        force: bool = False,
        check: WriteCheck | None = None,
    ) -> dict[str, Any]:
        """PATCH with a JSON merge, JSON or strategic merge patch, then the update rules apply;
        or server-side apply (``force`` takes over conflicting fields). ``subresource`` as
        for `update`."""
        ct = content_type.split(";", 1)[0].strip().lower()
        if ct == APPLY:
            return apply(
                self,
                res,
                ns,
                name,
                raw,
                manager=manager,
                force=force,
                subresource=subresource,
                dry_run=dry_run,
                check=check,
            )
        if force:
            raise non_apply_force()
        if ct not in (MERGE, JSON_PATCH, STRATEGIC) or (ct == STRATEGIC and res.custom):
            accepted = [JSON_PATCH, MERGE, *(() if res.custom else (STRATEGIC,)), APPLY]
            raise StatusError.unsupported_patch_type(accepted)
        try:
            patch = _json.loads(raw)
        except _json.JSONDecodeError as e:
            raise StatusError.bad_request(f"error decoding patch: {e}") from None
        old = self.store.get(res.key, ns if res.namespaced else "", name)
        if old is None:
            raise self._not_found(res, name)
        # patched as served in the request's version (a CRD's object stored in another is
        # converted, with its stored version's defaults), as kube-apiserver decodes it first
        old = self._out(res, old)
        try:
            if ct == JSON_PATCH:
                result = json_patch(old, patch)
            elif ct == MERGE:
                if not isinstance(patch, dict):
                    raise StatusError.bad_request("a merge patch must be a JSON object")
                result = _patch.merge_patch(old, patch)
            else:
                if not isinstance(patch, dict):
                    raise StatusError.bad_request("a strategic merge patch must be a JSON object")
                result = _patch.strategic_merge_patch(old, patch, _patch.merge_keys_for(res.kind))
        except _patch.PatchError as e:
            raise patch_failed(e, res.kind, name, res.group) from None
        if not isinstance(result, dict):
            raise StatusError.bad_request("the patched object is not a JSON object")
        strategic = patch if ct == STRATEGIC else None
        if not res.custom:
            _check_patched(res, result, strategic)
        if field_validation() == "Strict":
            _check_patched_strictly(res, result, strategic, self.undeclared_fields(res, result))
        return self.update(
            res,
            ns,
            name,
            result,
            subresource=subresource,
            dry_run=dry_run,
            manager=manager,
            check=check,
        )

    # ----------------------------------------------------------------- delete

    def delete(
        self,
        res: ServedResource,
        ns: str,
        name: str,
        options: dict[str, Any],
        *,
        dry_run: bool = False,
    ) -> tuple[int, dict[str, Any]]:
        """DELETE: (HTTP code, body): the object while finalizers hold it, else Success or the object."""
        store_ns = ns if res.namespaced else ""
        old = self.store.get(res.key, store_ns, name)
        if old is None:
            raise self._not_found(res, name)
        meta = old["metadata"]
        check_delete_preconditions(res, old, options)
        policy = options.get("propagationPolicy") or "Background"
        if policy not in ("Background", "Foreground", "Orphan"):
            raise StatusError.invalid(
                res.kind, name, res.group, "propagationPolicy", f'Unsupported value: "{policy}"'
            )
        if options.get("orphanDependents") is True:
            policy = "Orphan"
        if res.key == NAMESPACES and name in PROTECTED_NAMESPACES:
            raise StatusError.forbidden(
                f'namespaces "{name}" is forbidden: this namespace may not be deleted',
                name,
                "",
                "namespaces",
            )
        if dry_run:
            return 200, self._out(res, old)
        marked: list[dict[str, Any]] = []
        after = self.delete_object(res.key, old, policy, options.get("gracePeriodSeconds"), marked)
        if after is not None:
            return 200, self._out(res, after)
        if marked:  # the pod as kube-apiserver answers: terminating, its kubelet to confirm
            return 200, self._out(res, marked[0])
        if res.custom or res.key in _RETURNS_OBJECT:
            return 200, self._out(res, old)
        return 200, status_success(name, res.group, res.plural, meta["uid"])

    def _out(self, res: ServedResource, obj: dict[str, Any]) -> dict[str, Any]:
        return in_version(obj, res.api_version, res.schema, res.custom, res.read_defaults)

    @staticmethod
    def _stored(res: ServedResource, obj: dict[str, Any]) -> dict[str, Any]:
        """``obj``, written in ``res``'s version, as kube-apiserver stores it: a CRD's object
        in the storage version, pruned to its schema (what only the request's version
        declares is lost, as with conversion strategy ``None`` on a real cluster)."""
        if res.stored_as is None:
            return obj
        api_version, schema = res.stored_as
        return prune({**obj, "apiVersion": api_version}, schema)

    @staticmethod
    def _fits_etcd(res: ServedResource, obj: dict[str, Any]) -> None:
        """etcd's refusal of a write over its request limit, as kube-apiserver answers it
        (see `_etcd_limit`); a dry run, which writes nothing, is not refused."""
        meta = obj["metadata"]
        where = f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]
        group = f"{res.group}/" if res.group else ""
        check_request_size(
            f"/registry/{group}{res.plural}/{where}",
            obj,
            custom=res.custom,
            resource=res.plural,
            limit=MAX_REQUEST_BYTES,
        )

    def delete_object(
        self,
        key: ResKey,
        obj: dict[str, Any],
        policy: str = "Background",
        grace: Any = None,
        marked: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any] | None:
        """Delete one object honouring finalizers; returns it if it stays (being deleted), else None.

        ``grace`` is the request's ``gracePeriodSeconds``: a pod on a node is deleted
        gracefully (see `_pod_grace`), and the pod as marked then goes to ``marked``."""
        meta = obj["metadata"]
        if policy == "Orphan":
            self.gc.orphan(meta["uid"])
        if key == NAMESPACES:
            return self.namespaces.delete(obj)
        if "deletionTimestamp" in meta:
            return obj
        if key == CRDS:
            return self._delete_crd(obj)
        if policy == "Foreground" and self.store.dependents.get(meta["uid"]):
            uid = meta["uid"]
            finalizers = list(meta.get("finalizers") or ())
            if FOREGROUND not in finalizers:
                finalizers.append(FOREGROUND)
            new = dict(obj)
            new["metadata"] = {
                **_bump_generation(meta),
                "deletionTimestamp": now(),
                "deletionGracePeriodSeconds": 0,
                "finalizers": finalizers,
            }
            self.store.commit(key, "MODIFIED", new, obj)
            self.gc.collect(uid, "Foreground")
            self.gc.check_foreground(uid)
            return self.store.by_uid(uid)
        period = _pod_grace(obj, grace) if key == _admission_plugins.PODS else 0
        if period > 0:
            # kube-apiserver marks it and waits for the pod's kubelet to stop its containers
            # and delete it for good; envtest has no kubelet and confirms at once, as one
            # whose containers stopped would: watchers see the pod terminating, then gone
            terminating = dict(obj)
            terminating["metadata"] = {
                **_bump_generation(meta),
                "deletionTimestamp": rfc3339(time.time() + period),
                "deletionGracePeriodSeconds": period,
            }
            self.store.commit(key, "MODIFIED", terminating, obj)
            obj, meta = terminating, terminating["metadata"]
            if marked is not None:
                marked.append(terminating)
        if meta.get("finalizers"):
            new = dict(obj)
            if "deletionTimestamp" not in meta:
                meta = _bump_generation(meta)
            new["metadata"] = {**meta, "deletionTimestamp": now(), "deletionGracePeriodSeconds": 0}
            self.store.commit(key, "MODIFIED", new, obj)
            return new
        self._remove(key, dict(obj), obj)
        return None

    def _remove(self, key: ResKey, new: dict[str, Any], old: dict[str, Any]) -> None:
        """Remove ``old`` (the stored object) for good, then let the controllers react.

        ``new`` is what removes it (an update that empties the finalizers of an object being
        deleted), never stored: kube-apiserver deletes instead of writing it
        (``deleteWithoutFinalizers``), so the DELETED event carries the object as last
        stored, finalizers and all, under the deletion's resourceVersion."""
        gone = {**old, "metadata": dict(old["metadata"])}
        self.store.commit(key, "DELETED", gone, old)
        meta = gone["metadata"]
        self.gc.collect(meta["uid"], "Background")
        for uid in owner_uids(old) | owner_uids(new):
            self.gc.check_foreground(uid)
        if key == CRDS:
            self._unserve_crd(gone)
        elif key == _rbac.CLUSTER_ROLES:
            self._aggregate_cluster_roles()
        else:
            self._finish_crd(f"{key[1]}.{key[0]}")
        ns = meta.get("namespace")
        if ns:
            nsobj = self.store.get(NAMESPACES, "", ns)
            if nsobj is not None and "deletionTimestamp" in nsobj["metadata"]:
                self.namespaces.finish(ns)
            elif (
                nsobj is not None
                and (key, meta["name"]) in NAMESPACE_DEFAULTS
                and self.on_namespace_created is not None
            ):
                # the service-account controller and the root-CA publisher put theirs back
                self.on_namespace_created(ns)

    def delete_collection(
        self,
        res: ServedResource,
        ns: str | None,
        objs: list[dict[str, Any]],
        options: dict[str, Any],
        *,
        dry_run: bool = False,
    ) -> list[dict[str, Any]]:
        """DELETE on a collection: every listed object, as single deletes would (none with ``dry_run``)."""
        policy = options.get("propagationPolicy") or "Background"
        out = []
        for obj in objs:
            meta = obj["metadata"]
            current = self.store.get(res.key, meta.get("namespace", ""), meta["name"])
            if current is None:
                continue
            if dry_run:
                out.append(self._out(res, current))
                continue
            after = self.delete_object(res.key, current, policy, options.get("gracePeriodSeconds"))
            out.append(self._out(res, after if after is not None else current))
        return out

    # ----------------------------------------------------------------- CRDs

    def _serve_crd(self, crd: dict[str, Any], old: dict[str, Any] | None = None) -> None:
        """Serve (or re-serve after an update) the versions a CRD declares.

        A spec that changed (its conversion, schemas, versions) ends the watches of its
        objects, as kube-apiserver tears down the CRD's storage and with it their watches
        (``crdHandler.updateCustomResourceDefinition``): clients watch again and get the
        objects as the CRD serves them now, not converted as it did when they started."""
        if not established(crd):  # its names conflict with another CRD's: not served
            self.registry.drop_crd(crd["metadata"]["name"])
            return
        self.registry.set_crd(crd["metadata"]["name"], crd_resources(crd))
        if old is not None and old.get("spec") != crd.get("spec"):
            for w in list(self.store.watchers.get(_crd_key(crd), ())):
                w.close()

    def serve_stored_crds(self) -> None:
        """Serve what the stored CRDs declare, and nothing else custom: after the store was
        restored (`ObjectStore.restore`), as a kube-apiserver started over restored etcd serves
        the CRDs it finds there."""
        for name in self.registry.crd_names():
            self.registry.drop_crd(name)
        for crd in self.store.iter(CRDS, None):
            self._serve_crd(crd)

    def _crd_cleaning(self, res: ServedResource) -> dict[str, Any] | None:
        """The CRD of the custom resource ``res`` if its cleanup (which deletes its custom
        resources) runs: deleted, its cleanup finalizer still there."""
        crd = self.store.get(CRDS, "", f"{res.plural}.{res.group}")
        return crd if crd is not None and _cleaning(crd) else None

    def _check_crd_not_terminating(self, res: ServedResource) -> None:
        """Refuse a POST while the CRD's ``Terminating`` condition is true, as
        kube-apiserver's custom resource handler does."""
        crd = self.store.get(CRDS, "", f"{res.plural}.{res.group}")
        conditions = ((crd or {}).get("status") or {}).get("conditions") or ()
        if any(c.get("type") == "Terminating" and c.get("status") == "True" for c in conditions):
            raise StatusError(
                405,
                "MethodNotAllowed",
                "create not allowed while custom resource definition is terminating",
                {"group": res.group, "kind": res.plural},
            )

    def _delete_crd(self, crd: dict[str, Any]) -> dict[str, Any] | None:
        """Delete a CRD as kube-apiserver's apiextensions server does: mark it (its
        ``customresourcecleanup`` finalizer), then clean it up (`_clean_crd`). Returns it
        while it stays."""
        meta = crd["metadata"]
        finalizers = list(meta.get("finalizers") or ())
        if CRD_CLEANUP_FINALIZER not in finalizers:
            finalizers.append(CRD_CLEANUP_FINALIZER)
        marked = {**crd, "metadata": {**meta, "deletionTimestamp": now(), "finalizers": finalizers}}
        self.store.commit(CRDS, "MODIFIED", marked, crd)
        self._clean_crd(meta["name"])
        return self.store.get(CRDS, "", meta["name"])

    def _clean_crd(self, name: str) -> None:
        """One pass of apiextensions' CRD finalizer over the deleted CRD ``name``: its
        ``Terminating`` condition true (``InstanceDeletionInProgress``), its custom resources
        deleted, and the CRD removed once none is left (`_finish_crd`). A custom resource's
        finalizer holds it ``Terminating`` (still served, but for creates): after
        `crd_cleanup_timeout` the pass fails (``InstanceDeletionCheck``) and another one
        follows, as the finalizer's work queue retries it."""
        self._crd_timers.pop(name, None)
        if self._crd_step_waits(name, self._clean_crd):
            return
        crd = self.store.get(CRDS, "", name)
        if crd is None or not _cleaning(crd):
            return
        status = _with_terminating(
            crd, "True", "InstanceDeletionInProgress", "CustomResource deletion is in progress"
        )
        if status != crd.get("status"):
            self.store.commit(CRDS, "MODIFIED", {**crd, "status": status}, crd)
        key = _crd_key(crd)
        self._crds_emptying.add(name)
        try:
            for obj in list(self.store.iter(key, None)):
                current = self.store.get(
                    key, obj["metadata"].get("namespace", ""), obj["metadata"]["name"]
                )
                if current is not None:
                    self.delete_object(key, current, "Background")
        finally:
            self._crds_emptying.discard(name)
        self._finish_crd(name)
        crd = self.store.get(CRDS, "", name)
        if crd is not None and _cleaning(crd):
            self._crd_later(name, self.crd_cleanup_timeout, self._crd_check_failed)

    def _crd_check_failed(self, name: str) -> None:
        """The cleanup of ``name`` waited `crd_cleanup_timeout` for its custom resources in
        vain: ``InstanceDeletionCheck``, and a new pass after the work queue's backoff."""
        self._crd_timers.pop(name, None)
        if self._crd_step_waits(name, self._crd_check_failed):
            return
        crd = self.store.get(CRDS, "", name)
        if crd is None or not _cleaning(crd):
            return
        status = _with_terminating(
            crd,
            "True",
            "InstanceDeletionCheck",
            "could not confirm zero CustomResources remaining: context deadline exceeded",
        )
        self.store.commit(CRDS, "MODIFIED", {**crd, "status": status}, crd)
        failures = self._crd_failures[name] = self._crd_failures.get(name, 0) + 1
        delay = min(_CRD_RETRY_BASE * 2 ** min(failures - 1, 40), _CRD_RETRY_MAX)
        self._crd_later(name, delay, self._clean_crd)

    def _crd_later(self, name: str, delay: float, step: Callable[[str], None]) -> None:
        """Run the cleanup ``step`` of the CRD ``name`` on the loop after ``delay`` seconds
        (not at all outside the loop: no server serves these objects)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._crd_timers[name] = loop.call_later(delay, step, name)

    def _crd_step_waits(self, name: str, step: Callable[[str], None]) -> bool:
        """Whether storage is down or the server frozen: then the cleanup ``step`` of
        ``name`` (whose writes would fail in kube-apiserver, or not run) runs when
        `run_waiting_crd_steps` is called (at the end of either)."""
        if not (self.storage_down() or self.frozen()):
            return False
        self._crd_deferred[name] = step
        return True

    def run_waiting_crd_steps(self) -> None:
        """Run the CRD cleanup steps that came due while storage was down or the server
        frozen (call on the loop; a step that still cannot run waits again)."""
        deferred, self._crd_deferred = self._crd_deferred, {}
        for name, step in deferred.items():
            if name not in self._crd_timers:
                step(name)

    def stop_crd_cleanup(self) -> None:
        """Stop the pending cleanup steps (the server stops, and its controllers with it)."""
        for timer in self._crd_timers.values():
            timer.cancel()
        self._crd_timers.clear()
        self._crd_deferred.clear()  # (a restarted server cleans up every deleted CRD again)
        self._crd_failures.clear()  # a restarted finalizer's work queue starts afresh

    def start_crd_cleanup(self) -> None:
        """Clean up every deleted CRD again, as a restarted kube-apiserver's CRD finalizer does
        (call on the loop)."""
        for crd in list(self.store.iter(CRDS, "")):
            if _cleaning(crd) and crd["metadata"]["name"] not in self._crd_timers:
                self._clean_crd(crd["metadata"]["name"])

    def _finish_crd(self, name: str) -> None:
        """Drop the cleanup finalizer of the CRD ``name`` being deleted once its custom
        resources are all gone (which removes it, unless another finalizer holds it)."""
        crd = self.store.get(CRDS, "", name)
        if crd is None or name in self._crds_emptying or not _cleaning(crd):
            return
        key = _crd_key(crd)
        if next(iter(self.store.iter(key, None)), None) is not None:
            return
        timer = self._crd_timers.pop(name, None)
        if timer is not None:
            timer.cancel()
        self._crd_failures.pop(name, None)
        meta = crd["metadata"]
        left = [f for f in meta["finalizers"] if f != CRD_CLEANUP_FINALIZER]
        new_meta = {k: v for k, v in meta.items() if k != "finalizers"}
        if left:
            new_meta["finalizers"] = left
        new = {
            **crd,
            "metadata": new_meta,
            "status": _with_terminating(
                crd, "False", "InstanceDeletionCompleted", "removed all instances"
            ),
        }
        if left:
            self.store.commit(CRDS, "MODIFIED", new, crd)
        else:
            self._remove(CRDS, new, crd)

    def _unserve_crd(self, crd: dict[str, Any]) -> None:
        """Stop serving a deleted CRD: its objects go, its watches end."""
        key = _crd_key(crd)
        for obj in list(self.store.iter(key, None)):
            self._remove(key, dict(obj), obj)
        for w in list(self.store.watchers.get(key, ())):
            w.close()
        self.store.drop_resource(key)
        self.registry.drop_crd(crd["metadata"]["name"])
        self._rename_group(key[0])  # its names are free for the group's other CRDs

    def _group_crds(self, crd: dict[str, Any]) -> list[dict[str, Any]]:
        """The CRDs stored in the group of ``crd`` (``crd`` itself once stored)."""
        group = crd["spec"]["group"]
        return [
            c for c in self.store.iter(CRDS, None) if (c.get("spec") or {}).get("group") == group
        ]

    def _rename_group(self, group: str) -> None:
        """The naming controller's resync of a group whose names may have been freed: each
        CRD whose accepted names are not its ``spec.names`` tries for them again (and is
        established and served once they are all accepted)."""
        for crd in list(self.store.iter(CRDS, None)):
            spec = crd.get("spec") or {}
            status = crd.get("status") or {}
            if spec.get("group") != group or spec.get("names") == status.get("acceptedNames"):
                continue
            current = self.store.get(CRDS, "", crd["metadata"]["name"])
            if current is None:
                continue
            new_status = {**status, **name_status(current, status, self._group_crds(current))}
            if new_status == status:
                continue
            new = {**current, "status": new_status}
            self.store.commit(CRDS, "MODIFIED", new, current)
            self._serve_crd(new, current)


def _cleaning(crd: dict[str, Any]) -> bool:
    """Whether the CRD's cleanup runs: deleted, its cleanup finalizer still there."""
    meta = crd["metadata"]
    return "deletionTimestamp" in meta and CRD_CLEANUP_FINALIZER in (meta.get("finalizers") or ())


def _crd_key(crd: dict[str, Any]) -> ResKey:
    """The storage key of the custom resources a CRD serves."""
    spec = crd.get("spec") or {}
    return (spec.get("group", ""), (spec.get("names") or {}).get("plural", ""))


def _with_terminating(
    crd: dict[str, Any], status: str, reason: str, message: str
) -> dict[str, Any]:
    """The CRD's status with its ``Terminating`` condition set where it was (its transition
    time kept while the status stays), as apiextensions' ``SetCRDCondition`` sets it."""
    st = dict(crd.get("status") or {})
    st["conditions"] = set_crd_condition(
        list(st.get("conditions") or ()), "Terminating", (status, reason, message)
    )
    return st


def _bump_generation(meta: dict[str, Any]) -> dict[str, Any]:
    """``meta`` of an object being marked for deletion: a ``generation`` it has goes up by one, as
    kube-apiserver's ``markAsDeleting`` (and a graceful delete) bump it, so a controller that
    filters with a generation-changed predicate still sees the deletion it must finalize."""
    generation = meta.get("generation")
    if isinstance(generation, int) and generation > 0:
        return {**meta, "generation": generation + 1}
    return meta


def _pod_grace(pod: dict[str, Any], requested: Any) -> int:
    """The seconds a pod's deletion grants it (kube's pod strategy, ``CheckGracefulDelete``):
    none for a pod on no node or one that ended (Succeeded, Failed); else the request's
    ``gracePeriodSeconds``, or the pod's ``terminationGracePeriodSeconds`` (30)."""
    spec = pod.get("spec") or {}
    phase = (pod.get("status") or {}).get("phase")
    if not spec.get("nodeName") or phase in ("Succeeded", "Failed"):
        return 0
    if isinstance(requested, int) and not isinstance(requested, bool) and requested >= 0:
        return requested
    period = spec.get("terminationGracePeriodSeconds")
    if isinstance(period, int) and not isinstance(period, bool) and period >= 0:
        return period
    return 30


def _check_patched(res: ServedResource, result: dict[str, Any], strategic: Any) -> None:
    """Refuse a patched built-in object the decoder cannot take, as kube-apiserver's patch
    handler does: 422 Invalid on the field ``patch``, its value the patched object's JSON
    (a JSON or merge patch) or the strategic merge patch as Go prints the map, and the
    decoder's error (not the ``cannot be handled as`` 400 of a create or update).

    The strategic merge case is an approximation: kube-apiserver converts that patch's
    result with the unstructured converter, whose errors are worded otherwise."""
    problem = type_error(result, res.api_version, res.kind)
    if problem is None:
        return
    _refuse_patched(result, strategic, problem)


def _check_patched_strictly(
    res: ServedResource, result: dict[str, Any], strategic: Any, unknown: list[str]
) -> None:
    """Refuse a patched object with fields its kind does not have under
    ``fieldValidation=Strict`` as kube-apiserver's patch handler does: the 422 of
    `_check_patched` saying ``strict decoding error``, not the 400 of a create or update."""
    if unknown:
        fields = ", ".join(f'unknown field "{p}"' for p in unknown)
        _refuse_patched(result, strategic, f"strict decoding error: {fields}")


def _refuse_patched(result: dict[str, Any], strategic: Any, problem: str) -> NoReturn:
    shown = _json.dumps(result).decode() if strategic is None else go_plain(strategic)
    why = f"patch: Invalid value: {go_string(shown)}: {problem}"
    raise StatusError.invalid_causes("", "", "", [("FieldValueInvalid", "patch", why)])


def _unknown_fields(res: ServedResource, dropped: list[str]) -> None:
    """What the request's ``fieldValidation`` makes of the fields dropped from a write:
    a warning each (``Warn``, the default), a 400 as kube-apiserver's strict decoding
    (``Strict``), or nothing (``Ignore``)."""
    if not dropped:
        return
    directive = field_validation()
    if directive == "Strict":
        raise StatusError.bad_request(
            f'{res.kind} in version "{res.version}" cannot be handled as a {res.kind}: '
            "strict decoding error: " + ", ".join(f'unknown field "{p}"' for p in dropped)
        )
    if directive == "Warn":
        for p in dropped:
            warn(f'unknown field "{p}"')


def check_delete_preconditions(
    res: ServedResource, obj: dict[str, Any], options: dict[str, Any]
) -> None:
    """Refuse (409) the delete of ``obj`` whose ``options.preconditions`` (a uid, a
    resourceVersion) it does not meet, as kube-apiserver's ``rest.BeforeDelete`` does before
    the storage sees the delete: its conflict names the kind (``GroupResource{Group, Kind}``),
    not the resource."""
    pre = options.get("preconditions") or {}
    if not isinstance(pre, dict):
        return
    meta = obj["metadata"]
    for key, label, what in (
        ("uid", "UID", "deleted and then recreated"),
        ("resourceVersion", "ResourceVersion", "modified"),
    ):
        if pre.get(key) and pre[key] != meta[key]:
            kind = f"{res.kind}.{res.group}" if res.group else res.kind
            raise StatusError.conflict(
                kind,
                meta["name"],
                res.group,
                res.kind,
                f"the {label} in the precondition ({pre[key]}) does not match the {label} "
                f"in record ({meta[key]}). The object might have been {what}",
            )


def _check_url_name(res: ServedResource, ns: str, name: str, meta: dict[str, Any]) -> None:
    """A PUT's body names the object (and namespace) its URL names, or none (400 else), as
    kube-apiserver's update handler checks before the storage looks the object up."""
    body_name = meta.get("name")
    if body_name and body_name != name:
        raise StatusError.bad_request(
            f"the name of the object ({body_name}) does not match the name on the URL ({name})"
        )
    body_ns = meta.get("namespace")
    if res.namespaced and body_ns and body_ns != ns:
        raise StatusError.bad_request(
            "the namespace of the provided object does not match the namespace sent on the request"
        )


def _default_and_check(key: ResKey, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    """`default_and_check`; while `unchecked`, an object it refuses keeps the scheme's
    defaults only, unrefused (validation comes after mutating admission)."""
    if not _unchecked.get():
        default_and_check(key, obj, old)
        return
    trial = copy.deepcopy(obj)
    try:
        default_and_check(key, trial, old)
    except StatusError:
        default_builtin(key, obj)
        return
    obj.clear()
    obj.update(trial)


_RESOURCE_VERSION_SET_ON_CREATE = "resourceVersion should not be set on objects to be created"


def _check_no_resource_version(meta: dict[str, Any]) -> None:
    """kube-apiserver's storage refuses to create an object with a resourceVersion: the
    etcd3 store's ``Create`` returns ``storage.ErrResourceVersionSetOnCreate``, a plain error
    the handler answers as a 500 without reason (``ErrorToAPIStatus``). A version that does
    not parse as a uint64 (``ParseResourceVersion``), and ``"0"``, are let through."""
    rv = meta.get("resourceVersion")
    if isinstance(rv, str) and _UINT.fullmatch(rv) and 0 < int(rv) < 1 << 64:
        raise StatusError(500, "", _RESOURCE_VERSION_SET_ON_CREATE)


_UINT = re.compile(r"[0-9]+")
