"""Admission webhooks: envtest calls Mutating, then Validating, webhook configurations on writes.

Like kube-apiserver, on create, update, patch and delete: every webhook of
every MutatingWebhookConfiguration (in name order) whose rules, scope,
namespaceSelector, objectSelector and ``matchConditions`` (CEL, as `_policies` evaluates
them) match is called in turn and its JSON
patch applied (a built-in object then loses, silently, the fields its kind does
not have, as decoding into its Go type does; a custom resource gets the defaults
of its version's schema, as kube-apiserver's defaulter gives them after a non-empty
patch, and is pruned by its schema only when stored); then every matching
validating webhook is called (at once); a refusal ends the request with the
webhook's status, a failed call follows ``failurePolicy`` (Fail: 500
InternalError; Ignore: skipped). Each call is bounded by the hook's ``timeoutSeconds``, which
its URL says (``?timeout=10s``), as kube-apiserver's dispatchers say it. A dry-run
request is refused by a webhook whose ``sideEffects`` is not None or
NoneOnDryRun. ``matchPolicy: Equivalent`` (the default) also matches other
versions of the same resource: a custom resource is sent converted to the first
of them the webhook's rules name (by the CRD's conversion webhook, or its
``apiVersion`` alone with ``strategy: None``), with ``requestKind`` and
``requestResource`` naming the version written in, and a patch is converted back
(then defaulted); a built-in kind is sent in the version it is written in.
Webhooks are not called for webhook configurations themselves; a
deletecollection admits each object as a DELETE first (one refusal refuses
the whole request, nothing is deleted). On CREATE, as in kube-apiserver's create handler,
the mutating webhooks see the object before the registry's ``BeforeCreate``: defaults
applied and a Pod's fields from the built-in admission plugins of `_admission_plugins`
(which belong to no field manager, as those the webhooks set do not either), but no
``uid``, ``creationTimestamp`` or ``generation``, and no name for an object sent with
only a ``generateName``; the validating webhooks see it as it will be stored, name and
uid included, and their request names it (`AdmissionToValidateObjectFunc`) where the
mutating webhooks' request has no ``name``. A pod's eviction is a CREATE of
``pods/eviction`` whose object is the ``policy/v1`` ``Eviction`` (`admit_create`); a
``pods/exec`` (``attach``, ``portforward``) is a CONNECT whose object is its options
(`admit_connect`). Before the validating webhooks, the bound ValidatingAdmissionPolicies
(`_policies`) are run on the same request (`_check_policies`): only while a binding
exists does a request go through this module for them. A server-side apply of an
absent object is admitted as a CREATE; when another client creates the object while
the webhooks run, the apply is retried as an UPDATE of that object, and when another
client deletes it while they admit the apply's UPDATE, the apply is retried as a
CREATE (kube-apiserver's ``GuaranteedUpdate`` retries both ways): never an
``AlreadyExists`` or a ``NotFound``.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import logging
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

from mcruntime import _json, _patch
from mcruntime._selectors import LabelSelector, SelectorError
from mcruntime.envtest import _cel, _policies
from mcruntime.envtest import _services as services
from mcruntime.envtest._fields import drop_unknown_fields
from mcruntime.envtest._http import Response
from mcruntime.envtest._managedfields import SERVER_META
from mcruntime.envtest._objects import NAMESPACES, WriteCheck, unchecked
from mcruntime.envtest._registry import CREATE_ON_UPDATE
from mcruntime.envtest._schema import apply_defaults
from mcruntime.envtest._status import Causes, StatusError
from mcruntime.envtest._warnings import lenient, warn
from mcruntime.envtest._webhook_call import WebhookCallError, call_webhook

if TYPE_CHECKING:
    from mcruntime.envtest._api import API
    from mcruntime.envtest._http import HTTPRequest
    from mcruntime.envtest._registry import ServedResource
    from mcruntime.envtest._storage import ObjectStore

__all__ = ["Admission", "MUTATING", "VALIDATING"]

log = logging.getLogger("mcruntime.envtest")

GROUP = "admissionregistration.k8s.io"
MUTATING = (GROUP, "mutatingwebhookconfigurations")
VALIDATING = (GROUP, "validatingwebhookconfigurations")
DEFAULT_TIMEOUT = 10
_CONFLICT_RETRIES = 5
_OPERATION = {"create": "CREATE", "update": "UPDATE", "patch": "UPDATE", "delete": "DELETE"}
_OPTIONS_KIND = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions", "DELETE": "DeleteOptions"}
#: the kinds admission (webhooks and policies) never sees, as kube-apiserver exempts them
_EXEMPT = frozenset({MUTATING, VALIDATING, *_policies.KEYS})


def _matches_any(values: Any, wanted: str) -> bool:
    return isinstance(values, list) and ("*" in values or wanted in values)


def _resource_matches(resources: Any, plural: str, sub: str) -> bool:
    if not isinstance(resources, list):
        return False
    full = f"{plural}/{sub}" if sub else plural
    for r in resources:
        if r == full or (not sub and r == "*"):
            return True
        if sub and r in ("*/*", f"{plural}/*", f"*/{sub}"):
            return True
    return False


def validate_configuration(obj: dict[str, Any]) -> None:
    """Refuse a Mutating/ValidatingWebhookConfiguration kube-apiserver's v1 validation refuses."""
    kind = obj.get("kind") or "WebhookConfiguration"
    name = obj["metadata"]["name"]
    causes: list[tuple[str, str, str]] = []

    def bad(reason: str, field: str, why: str) -> None:
        causes.append((reason, field, f"{field}: {why}"))

    hooks = obj.get("webhooks") or []
    if not isinstance(hooks, list):
        raise StatusError.invalid(kind, name, GROUP, "webhooks", "Invalid value: must be a list")
    seen: set[str] = set()
    for i, hook in enumerate(hooks):
        at = f"webhooks[{i}]"
        if not isinstance(hook, dict):
            bad("FieldValueInvalid", at, "Invalid value: must be an object")
            continue
        hname = hook.get("name")
        if not isinstance(hname, str) or not hname:
            bad("FieldValueRequired", f"{at}.name", "Required value")
        elif hname.count(".") < 2:
            bad(
                "FieldValueInvalid",
                f"{at}.name",
                f'Invalid value: "{hname}": should be a domain with at least three segments separated by dots',
            )
        elif hname in seen:
            bad("FieldValueDuplicate", f"{at}.name", f'Duplicate value: "{hname}"')
        else:
            seen.add(hname)
        versions = hook.get("admissionReviewVersions")
        if not versions:
            bad(
                "FieldValueRequired",
                f"{at}.admissionReviewVersions",
                "Required value: must specify one of v1, v1beta1",
            )
        elif "v1" not in versions and "v1beta1" not in versions:
            bad(
                "FieldValueInvalid",
                f"{at}.admissionReviewVersions",
                "Invalid value: must include at least one of v1, v1beta1",
            )
        side = hook.get("sideEffects")
        if side not in ("None", "NoneOnDryRun"):
            bad(
                "FieldValueNotSupported",
                f"{at}.sideEffects",
                f'Unsupported value: "{side or ""}": supported values: "None", "NoneOnDryRun"',
            )
        policy = hook.get("failurePolicy", "Fail")
        if policy not in ("Fail", "Ignore"):
            bad(
                "FieldValueNotSupported",
                f"{at}.failurePolicy",
                f'Unsupported value: "{policy}": supported values: "Fail", "Ignore"',
            )
        timeout = hook.get("timeoutSeconds", DEFAULT_TIMEOUT)
        if not isinstance(timeout, int) or not 1 <= timeout <= 30:
            bad(
                "FieldValueInvalid",
                f"{at}.timeoutSeconds",
                f"Invalid value: {timeout}: the timeout value must be between 1 and 30 seconds",
            )
        cc = hook.get("clientConfig") or {}
        has_url, has_service = bool(cc.get("url")), bool(cc.get("service"))
        if has_url == has_service:
            bad(
                "FieldValueRequired",
                f"{at}.clientConfig",
                "Required value: exactly one of url or service is required",
            )
        elif has_url and not str(cc["url"]).startswith("https://"):
            bad(
                "FieldValueInvalid",
                f"{at}.clientConfig.url",
                f"Invalid value: \"{cc['url']}\": 'https' is the only allowed URL scheme",
            )
        conditions = Causes()
        _policies.check_match_conditions(
            conditions, hook.get("matchConditions"), f"{at}.matchConditions"
        )
        causes.extend(conditions.items)
    if causes:
        raise StatusError.invalid_causes(kind, name, GROUP, causes)


T = TypeVar("T")


#: the metadata of a policy's ``namespaceObject``: what the server sets, but the field
#: records and the self link, and the labels, annotations and finalizers
_NAMESPACE_OBJECT_META = (SERVER_META - {"managedFields", "selfLink"}) | {
    "generateName",
    "labels",
    "annotations",
    "finalizers",
}


def _namespace_object(ns: dict[str, Any] | None) -> dict[str, Any] | None:
    """A policy's ``namespaceObject``: the request's Namespace with its spec, status and the
    metadata kube-apiserver shows (``CreateNamespaceObject``: no managedFields, no owners)."""
    if ns is None:
        return None
    kept = _NAMESPACE_OBJECT_META
    meta = ns.get("metadata") or {}
    out: dict[str, Any] = {"metadata": {k: meta[k] for k in kept if k in meta}}
    for key in ("spec", "status"):
        if key in ns:
            out[key] = ns[key]
    return out


#: what kube-apiserver's registry sets in BeforeCreate, after the mutating webhooks
_SYSTEM_FIELDS = ("uid", "creationTimestamp", "generation", "resourceVersion")


def _before_create(obj: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    """``obj`` (as it would be stored) as the mutating webhooks see it: the metadata the
    registry fills in later (`_SYSTEM_FIELDS`, the name generated from ``generateName``)
    as the request ``body`` had it."""
    sent = body.get("metadata") or {}
    meta = dict(obj["metadata"])
    for key in (*_SYSTEM_FIELDS, "name"):
        if sent.get(key):
            meta[key] = sent[key]
        else:
            meta.pop(key, None)
    return {**obj, "metadata": meta}


def _as_created(obj: dict[str, Any], prepared: dict[str, Any]) -> dict[str, Any]:
    """A mutated custom resource as the validating webhooks see it: with the name, uid,
    creation time and generation the registry gave it in ``prepared`` (no resourceVersion
    yet: storage sets that), unpruned."""
    meta = dict(obj.get("metadata") or {})
    for key in ("name", "uid", "creationTimestamp", "generation"):
        if key in prepared["metadata"] and not meta.get(key):
            meta[key] = prepared["metadata"][key]
    return {**obj, "metadata": meta}


def _named(obj: dict[str, Any], prepared: dict[str, Any]) -> dict[str, Any]:
    """A mutated ``obj`` with the name generated for it in ``prepared``, unless a webhook
    named it (the name the validating webhooks see is the one it is stored with)."""
    meta = obj.get("metadata")
    if isinstance(meta, dict) and meta.get("name"):
        return obj
    return {**obj, "metadata": {**(meta or {}), "name": prepared["metadata"]["name"]}}


class _Call:
    """One admission request being decided."""

    def __init__(
        self,
        res: ServedResource,
        operation: str,
        ns: str,
        name: str,
        sub: str,
        obj: dict[str, Any] | None,
        old: dict[str, Any] | None,
        dry_run: bool,
        kind: dict[str, str] | None = None,
    ) -> None:
        self.res, self.operation, self.ns, self.name, self.sub = res, operation, ns, name, sub
        self.obj, self.old, self.dry_run = obj, old, dry_run
        #: the kind of ``obj`` when a subresource's body is not ``res``'s (an Eviction of a pod)
        self.kind = kind


def _created_meanwhile(
    e: StatusError, store: ObjectStore, res: ServedResource, ns: str, name: str
) -> bool:
    """Whether ``e`` refused a create of ``name`` because another client created it after
    the request found it absent (it exists now)."""
    return (
        e.reason == "AlreadyExists"
        and store.get(res.key, ns if res.namespaced else "", name) is not None
    )


class Admission:
    """The admission webhooks of one server, called from its request handler."""

    def __init__(self, api: API) -> None:
        self.api = api
        self.policies = _policies.Enforcer(api.store, api.registry)

    def _mutating(self) -> bool:
        """Whether a mutating webhook may change the object: then the object they are shown
        is made `unchecked` (decoded and defaulted, not validated) and validated after
        them, as kube-apiserver validates it after mutation; else validated at once."""
        return any(True for _ in self.api.store.iter(MUTATING, ""))

    def wanted(self, res: ServedResource) -> bool:
        """Whether any webhook configuration or policy binding exists (and ``res`` is none of
        the admission configuration kinds, which kube-apiserver exempts): writes go through us."""
        if res.key in _EXEMPT:
            return False
        store = self.api.store
        return (
            any(True for _ in store.iter(MUTATING, ""))
            or any(True for _ in store.iter(VALIDATING, ""))
            or self.policies.active()
        )

    # ----------------------------------------------------------------- the verbs

    async def admit(
        self,
        req: HTTPRequest,
        res: ServedResource,
        verb: str,
        ns: str,
        name: str | None,
        sub: str,
        check: WriteCheck | None = None,
    ) -> Response:
        """Serve a write with admission (the objects layer does the rest; ``check`` sees the
        admitted object as it is written)."""
        from mcruntime.envtest._api import _field_manager, _force
        from mcruntime.envtest._apply import APPLY

        api, objects = self.api, self.api.objects
        dry_run = api._dry_run(req)
        op = _OPERATION[verb]
        manager = _field_manager(req)
        if verb == "create":
            return await self._admit_create(
                res, ns, sub, api._body(req), manager, dry_run=dry_run, check=check
            )
        assert name is not None
        store_ns = ns if res.namespaced else ""
        if verb == "delete":
            old = api.store.get(res.key, store_ns, name)
            if old is None:
                raise StatusError.not_found(res.qualified, name, res.group, res.plural)
            # the old object as served in the request's version, as webhooks are shown it
            call = _Call(res, op, ns, name, sub, None, api._out(res, old), dry_run)
            await self._decide(call)
            code, out = objects.delete(res, ns, name, api._delete_options(req), dry_run=dry_run)
            return self._respond(code, res, out, call)
        ct = req.headers.get("content-type", "")
        # an apply creates an absent object; when another client creates or deletes it
        # while admission runs, kube-apiserver's GuaranteedUpdate retries with what it finds
        creates = verb == "patch" and not sub and ct.split(";")[0].strip() == APPLY
        for attempt in range(_CONFLICT_RETRIES):
            last = attempt == _CONFLICT_RETRIES - 1
            old = api.store.get(res.key, store_ns, name)
            if old is None and creates:
                try:
                    return await self._admit_apply_create(req, res, ns, name, dry_run, check)
                except StatusError as e:
                    if last or not _created_meanwhile(e, api.store, res, ns, name):
                        raise
                continue  # an UPDATE of the object the other client created
            if old is None and verb == "update" and not sub and res.key in CREATE_ON_UPDATE:
                # a PUT that creates the absent object, admitted as a CREATE (kube-apiserver's
                # update handler admits it so); one that another client created meanwhile
                # is updated instead, as GuaranteedUpdate retries with what it finds
                body = objects.created_by_update(res, ns, name, api._body(req))
                try:
                    return await self._admit_create(
                        res, ns, "", body, manager, dry_run=dry_run, check=check
                    )
                except StatusError as e:
                    if last or not _created_meanwhile(e, api.store, res, ns, name):
                        raise
                continue
            if old is None:
                raise StatusError.not_found(res.qualified, name, res.group, res.plural)
            mutating = self._mutating()
            with unchecked() if mutating else contextlib.nullcontext():
                if verb == "update":
                    new = objects.update(
                        res,
                        ns,
                        name,
                        api._body(req),
                        subresource=sub,
                        dry_run=True,
                        manager=manager,
                    )
                else:
                    is_apply = ct.split(";")[0].strip() == APPLY
                    new = objects.patch(
                        res,
                        ns,
                        name,
                        ct,
                        req.body,
                        subresource=sub,
                        dry_run=True,
                        manager=req.query.get("fieldManager") if is_apply else manager,
                        force=_force(req),
                    )
            # the fields recorded before admission, as kube-apiserver's update handler runs
            # its field manager before the mutating webhooks: theirs belong to no manager
            fields = new["metadata"].get("managedFields") or []
            call = _Call(res, op, ns, name, sub, new, api._out(res, old), dry_run)
            await self._mutate(call)
            final = call.obj if call.obj is not None else {}
            if mutating:  # validated now, between the mutating and the validating webhooks
                with lenient():
                    objects.update(
                        res,
                        ns,
                        name,
                        _at_version(final, old),
                        subresource=sub,
                        dry_run=True,
                        manager=manager,
                        managed_fields=fields,
                    )
            await self._validate(call)
            current = api.store.get(res.key, store_ns, name)
            if current is None and creates and not last:
                continue  # deleted meanwhile: the apply creates it again
            if current is None:
                raise StatusError.not_found(res.qualified, name, res.group, res.plural)
            changed = current["metadata"]["resourceVersion"] != old["metadata"]["resourceVersion"]
            if changed and verb == "patch" and attempt < _CONFLICT_RETRIES - 1:
                continue  # a patch applies to the latest object, as kube-apiserver retries it
            final = _at_version(final, old)
            with lenient():
                obj = objects.update(
                    res,
                    ns,
                    name,
                    final,
                    subresource=sub,
                    dry_run=dry_run,
                    manager=manager,
                    managed_fields=fields,
                    check=check,
                )
            return self._respond(200, res, obj, call)
        raise AssertionError("unreachable")

    async def _admit_apply_create(
        self,
        req: HTTPRequest,
        res: ServedResource,
        ns: str,
        name: str,
        dry_run: bool,
        check: WriteCheck | None,
    ) -> Response:
        """An apply of the absent object ``name``, admitted as a CREATE, as kube-apiserver's
        patch handler admits it (the operation is Create when the object does not exist)."""
        from mcruntime.envtest._apply import apply_create

        applier = req.query.get("fieldManager")
        body, fields = apply_create(self.api.objects, res, ns, name, req.body, manager=applier)
        return await self._admit_create(
            res,
            ns,
            "",
            body,
            applier,
            dry_run=dry_run,
            check=check,
            managed_fields=fields,
            applied=True,
        )

    async def _admit_create(
        self,
        res: ServedResource,
        ns: str,
        sub: str,
        body: dict[str, Any],
        manager: str | None,
        *,
        dry_run: bool,
        check: WriteCheck | None,
        managed_fields: list[dict[str, Any]] | None = None,
        applied: bool = False,
    ) -> Response:
        """A CREATE of ``body`` through admission: a POST, or an apply of an absent object
        (``applied``, its ``managed_fields`` the apply's entry)."""
        objects = self.api.objects
        # mutating webhooks see the object before the registry's BeforeCreate (no uid,
        # no generated name, no Job selector, not validated), validating ones a built-in
        # object as it will be stored, with the uid and name it gets (in their request
        # too, where the mutating ones' names nothing for an object that has only a
        # generateName)
        mutating = self._mutating()
        with unchecked() if mutating else contextlib.nullcontext():
            prepared = objects.create(
                res,
                ns,
                body,
                dry_run=True,
                manager=manager,
                managed_fields=managed_fields,
                prepare=False,
                applied=applied,
            )
        shown = _before_create(prepared, body)
        requested = str((body.get("metadata") or {}).get("name") or "")
        call = _Call(res, "CREATE", ns, requested, sub, shown, None, dry_run)
        await self._mutate(call)
        patched = call.obj is not None and call.obj != shown
        final = _named(call.obj, prepared) if patched and call.obj is not None else prepared
        sent = final if patched else body  # patched: as a webhook left it
        uid = prepared["metadata"]["uid"]
        call.name = final["metadata"]["name"]  # validating: the name it is stored with
        # the fields recorded before admission: what the built-in plugins and the
        # webhooks set belongs to no manager, as kube-apiserver's create handler runs
        # its field manager before mutating admission
        fields = prepared["metadata"].get("managedFields")
        with lenient():  # what the webhooks added is theirs: dropped, never refused
            # validated now (when it was not before the mutating webhooks), between them
            # and the validating ones, which see a built-in object as it will be stored
            if mutating or not res.custom:
                call.obj = objects.create(
                    res,
                    ns,
                    final,
                    dry_run=True,
                    manager=manager,
                    managed_fields=fields,
                    sent=sent,
                    uid=uid,
                    applied=applied,
                )
            if res.custom:  # a custom resource is shown unpruned (see the tests)
                call.obj = _as_created(final, prepared)
            await self._validate(call)
            if res.key == services.SERVICES and call.obj is not None:
                final = services.with_allocation(final, call.obj)  # allocated once
            obj = objects.create(
                res,
                ns,
                final,
                dry_run=dry_run,
                manager=manager,
                managed_fields=fields,
                check=check,
                sent=sent,
                uid=uid,
                applied=applied,
            )
        return self._respond(201, res, obj, call)

    async def admit_create(
        self,
        res: ServedResource,
        sub: str,
        kind: dict[str, str],
        ns: str,
        name: str,
        obj: dict[str, Any],
        dry_run: bool,
        check: Callable[[dict[str, Any]], T],
    ) -> T:
        """A CREATE of subresource ``sub`` of ``res`` whose body ``obj`` is another ``kind``
        (group, version, kind: a pod's Eviction): the mutating webhooks, then ``check`` of the
        mutated body (the subresource's own checks), then the validating webhooks, in
        kube-apiserver's create handler's order; ``check``'s result."""
        call = _Call(res, "CREATE", ns, name, sub, obj, None, dry_run, kind)
        await self._mutate(call)
        if call.obj is not None:
            obj = call.obj
        checked = check(obj)
        await self._validate(call)
        return checked

    async def admit_connect(
        self, res: ServedResource, sub: str, ns: str, name: str, options: dict[str, Any]
    ) -> None:
        """A CONNECT of subresource ``sub`` of ``res`` (``pods/exec``...) whose object is its
        ``options`` (``PodExecOptions``...): the mutating, then the validating webhooks, as
        kube-apiserver's connect handler calls them before it connects; a refusal raises."""
        kind = {"group": "", "version": options["apiVersion"], "kind": options["kind"]}
        await self._decide(_Call(res, "CONNECT", ns, name, sub, options, None, False, kind))

    async def admit_collection(
        self, req: HTTPRequest, res: ServedResource, objs: list[dict[str, Any]]
    ) -> Response:
        """deletecollection: every listed object is admitted as a DELETE first; one refusal
        refuses the whole request and nothing is deleted."""
        api = self.api
        dry_run = api._dry_run(req)
        for obj in objs:
            meta = obj["metadata"]
            call = _Call(
                res, "DELETE", meta.get("namespace", ""), meta["name"], "", None, obj, dry_run
            )
            await self._decide(call)
        deleted = api.objects.delete_collection(
            res, None, objs, api._delete_options(req), dry_run=dry_run
        )
        body = {
            "kind": res.list_kind,
            "apiVersion": res.api_version,
            "metadata": {"resourceVersion": str(api.store.rv)},
            "items": deleted,
        }
        return Response(200, _json.dumps(body))

    def _respond(
        self, code: int, res: ServedResource, obj: dict[str, Any], call: _Call
    ) -> Response:
        out = self.api._out(res, obj) if obj.get("kind") == res.kind else obj
        return Response(code, _json.dumps(out))

    # ----------------------------------------------------------------- deciding

    async def _decide(self, call: _Call) -> dict[str, Any]:
        """Run mutating then validating webhooks; the (mutated) object or an APIError."""
        await self._mutate(call)
        await self._validate(call)
        return call.obj if call.obj is not None else {}

    async def _mutate(self, call: _Call) -> None:
        """Call the matching mutating webhooks in turn; each one's patch applies to ``call.obj``.

        Then, once, those with ``reinvocationPolicy: IfNeeded`` that a later webhook's
        change followed, if they still match, as kube-apiserver's mutating dispatcher
        reinvokes them (``RequireReinvokingPreviouslyInvokedPlugins``): a webhook that
        did not match the first time is not called the second."""
        store = self.api.store
        hooks = [
            ((config["metadata"]["name"], index), hook)
            for config in sorted(store.iter(MUTATING, ""), key=lambda c: c["metadata"]["name"])
            for index, hook in enumerate(config.get("webhooks") or ())
            if isinstance(hook, dict)
        ]
        invoked: set[tuple[str, int]] = set()  # reinvocable, called before the last change
        again: set[tuple[str, int]] = set()
        for key, hook in hooks:
            sent = self._match(hook, call)
            if sent is None:
                continue
            before = call.obj
            await self._call(hook, call, sent, mutating=True)
            if call.obj != before:
                again |= invoked
                invoked = set()
            if hook.get("reinvocationPolicy") == "IfNeeded":
                invoked.add(key)
        for key, hook in hooks:
            if key in again and (sent := self._match(hook, call)) is not None:
                await self._call(hook, call, sent, mutating=True)

    async def _validate(self, call: _Call) -> None:
        """Run the bound ValidatingAdmissionPolicies (`_check_policies`), then call the matching
        validating webhooks at once; the first refusal raises."""
        if self.policies.active():
            self._check_policies(call)
        store = self.api.store
        calls = [
            self._call(hook, call, sent, mutating=False)
            for config in sorted(store.iter(VALIDATING, ""), key=lambda c: c["metadata"]["name"])
            for hook in config.get("webhooks") or ()
            if isinstance(hook, dict) and (sent := self._match(hook, call)) is not None
        ]
        results = await asyncio.gather(*calls, return_exceptions=True)
        for r in results:
            if isinstance(r, BaseException):
                raise r

    def _check_policies(self, call: _Call) -> None:
        """The ValidatingAdmissionPolicy plugin's part of validating admission: a policy's
        refusal is kube-apiserver's ``admission.NewForbidden`` with the validation's reason
        and code (422 Invalid unless it names another) and the message as its one cause."""

        def match(resources: dict[str, Any], rules_required: bool) -> bool:
            return self._policy_matches(resources, rules_required, call)

        res = call.res
        namespace = None
        if res.namespaced and call.ns and res.key != NAMESPACES:
            namespace = _namespace_object(self.api.store.get(NAMESPACES, "", call.ns))
        request = self._request(call, res)
        variables = {
            "object": call.obj,
            "oldObject": call.old,
            "request": {**request, "dryRun": call.dry_run},
            "namespaceObject": namespace,
        }
        try:
            self.policies.check(match, variables, call.ns if res.namespaced else "")
        except _policies.Denial as denial:
            meta = (call.obj or {}).get("metadata") or {}
            name = str(meta.get("name") or meta.get("generateName") or "Unknown")
            details: dict[str, Any] = {"name": name, "group": res.group, "kind": res.plural}
            details = {k: v for k, v in details.items() if v}
            details["causes"] = [{"message": denial.message}]
            raise StatusError(
                _policies.status_code(denial.reason),
                denial.reason,
                f'{res.qualified} "{name}" is forbidden: {denial.message}',
                details,
            ) from None

    def _policy_matches(self, resources: dict[str, Any], rules_required: bool, call: _Call) -> bool:
        """Whether ``call`` matches a policy's ``matchConstraints`` (``rules_required``) or a
        binding's ``matchResources`` (no ``resourceRules``: any resource), as the webhooks'
        rules match, with ``resourceNames`` and ``excludeResourceRules``."""

        def named(rules: Any) -> list[dict[str, Any]]:
            return [
                r
                for r in rules or ()
                if isinstance(r, dict)
                and (not r.get("resourceNames") or call.name in r["resourceNames"])
            ]

        policy = resources.get("matchPolicy", "Equivalent")
        excluded = named(resources.get("excludeResourceRules"))
        if excluded and self._match({"rules": excluded, "matchPolicy": policy}, call) is not None:
            return False
        rules = resources.get("resourceRules")
        if rules or rules_required:
            hook = {**resources, "rules": named(rules), "matchPolicy": policy}
            return self._match(hook, call) is not None
        try:
            return self._object_selected(
                resources.get("objectSelector"), call
            ) and self._namespace_selected(resources.get("namespaceSelector"), call)
        except SelectorError:
            return False

    def _match(self, hook: dict[str, Any], call: _Call) -> ServedResource | None:
        """The version of ``call``'s resource ``hook`` is called with (``call.res``, or with
        ``matchPolicy: Equivalent`` the first other served version its rules name, as
        kube-apiserver's ``ShouldCallHook`` picks it), or None when it is not called."""
        res = call.res
        chosen: ServedResource | None = None
        equivalents: list[ServedResource] | None = None
        for rule in hook.get("rules") or ():
            if not isinstance(rule, dict):
                continue
            if not _matches_any(rule.get("operations"), call.operation):
                continue
            if not _matches_any(rule.get("apiGroups"), res.group):
                continue
            if not _resource_matches(rule.get("resources"), res.plural, call.sub):
                continue
            scope = rule.get("scope") or "*"
            if scope == "Namespaced" and not res.namespaced:
                continue
            if scope == "Cluster" and res.namespaced:
                continue
            if _matches_any(rule.get("apiVersions"), res.version):
                chosen = res
                break
            if chosen is None and hook.get("matchPolicy", "Equivalent") == "Equivalent":
                if equivalents is None:
                    equivalents = [
                        r
                        for r in self.api.registry.versions_of(res.key)
                        if r.version != res.version
                    ]
                chosen = next(
                    (r for r in equivalents if _matches_any(rule.get("apiVersions"), r.version)),
                    None,
                )
        if chosen is None:
            return None
        try:
            if not self._object_selected(hook.get("objectSelector"), call):
                return None
            if not self._namespace_selected(hook.get("namespaceSelector"), call):
                return None
        except SelectorError as exc:
            log.warning("envtest: webhook %s has a bad selector: %s", hook.get("name"), exc)
            return None
        if hook.get("matchConditions") and not self._conditions_hold(hook, call, chosen):
            return None
        return chosen

    def _conditions_hold(self, hook: dict[str, Any], call: _Call, sent: ServedResource) -> bool:
        """Whether ``hook``'s ``matchConditions`` hold for ``call`` (kube-apiserver's
        ``generic.Webhook.ShouldCallHook``): a false one skips the hook; one that fails to
        evaluate skips it with ``failurePolicy: Ignore``, else refuses the request (403).
        The objects are the request's, not converted to the version ``sent`` in."""
        name = str(hook.get("name") or "")
        if not _cel.available():
            _cel.warn_missing_once(f"webhook {name}", "is called whatever its matchConditions say")
            return True
        request = {**self._request(call, sent), "dryRun": call.dry_run}
        variables = {"object": call.obj, "oldObject": call.old, "request": request}
        matched, errors = _policies.match_conditions(hook["matchConditions"], variables)
        if not matched:
            return False
        if not errors:
            return True
        if hook.get("failurePolicy", "Fail") == "Ignore":
            return False
        res = call.res
        why = _policies.aggregate(errors)
        message = f'{res.qualified} "{call.name}" is forbidden: {why}'
        if not call.name:
            message = f"{res.qualified} is forbidden: {why}"
        raise StatusError.forbidden(message, call.name, res.group, res.plural)

    @staticmethod
    def _labels(obj: dict[str, Any] | None) -> dict[str, str]:
        return ((obj or {}).get("metadata") or {}).get("labels") or {}

    def _object_selected(self, sel: Any, call: _Call) -> bool:
        if not sel:
            return True
        selector = LabelSelector.from_label_selector(sel)
        return any(selector.matches(self._labels(o)) for o in (call.obj, call.old) if o is not None)

    def _namespace_selected(self, sel: Any, call: _Call) -> bool:
        if not sel:
            return True
        selector = LabelSelector.from_label_selector(sel)
        if call.res.key == NAMESPACES:
            return selector.matches(self._labels(call.obj or call.old))
        if not call.res.namespaced:
            return True
        ns = self.api.store.get(NAMESPACES, "", call.ns)
        return selector.matches(self._labels(ns))

    def _review(
        self,
        call: _Call,
        sent: ServedResource,
        obj: dict[str, Any] | None,
        old: dict[str, Any] | None,
    ) -> dict[str, Any]:
        """The AdmissionReview of ``call`` with ``obj`` and ``old`` in the version ``sent``
        (the request's ``requestKind`` and ``requestResource`` are ``call.res``'s)."""
        request: dict[str, Any] = {
            "uid": str(uuid.uuid4()),
            **self._request(call, sent),
            "object": obj,
            "oldObject": old,
            "dryRun": call.dry_run,
        }
        for key in ("name", "subResource", "requestSubResource", "namespace"):
            if not request[key]:  # omitempty
                del request[key]
        if call.res.namespaced:
            request["namespace"] = call.ns
        return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}

    @staticmethod
    def _request(call: _Call, sent: ServedResource) -> dict[str, Any]:
        """The attributes of ``call``'s AdmissionRequest (as a webhook gets it, and a
        policy's ``request``) for ``sent``, the version of its resource it is shown in: every
        string field present, empty when unset."""
        res = call.res
        asked = call.kind or {"group": res.group, "version": res.version, "kind": res.kind}
        asked_resource = {"group": res.group, "version": res.version, "resource": res.plural}
        kind, resource = asked, asked_resource
        if sent is not res:
            kind = {**asked, "version": sent.version}
            resource = {**asked_resource, "version": sent.version}
        return {
            "kind": kind,
            "resource": resource,
            "subResource": call.sub,
            "requestKind": asked,
            "requestResource": asked_resource,
            "requestSubResource": call.sub,
            "name": call.name,  # none for a create with a generateName, to mutating webhooks
            "namespace": call.ns if res.namespaced else "",
            "operation": call.operation,
            "userInfo": {
                "username": "envtest-admin",
                "groups": ["system:masters", "system:authenticated"],
            },
            # a CONNECT has no operation options: kube-apiserver sends null
            "options": (
                {"apiVersion": "meta.k8s.io/v1", "kind": _OPTIONS_KIND[call.operation]}
                if call.operation in _OPTIONS_KIND
                else None
            ),
        }

    async def _in_version(
        self, res: ServedResource, objs: list[dict[str, Any] | None], version: str
    ) -> list[dict[str, Any] | None]:
        """Custom resources ``objs`` (None kept) in ``version`` of ``res``: by the CRD's
        conversion webhook, or, with ``strategy: None``, by their ``apiVersion`` alone."""
        to = f"{res.group}/{version}"
        present = [o for o in objs if o is not None]
        converted = iter(
            o if o.get("apiVersion") == to else {**o, "apiVersion": to}
            for o in await self.api.conversion.convert(res, present, to)
        )
        return [next(converted) if o is not None else None for o in objs]

    async def _call(
        self, hook: dict[str, Any], call: _Call, sent: ServedResource, *, mutating: bool
    ) -> None:
        """Call ``hook`` on ``call``, sending a custom resource in the version ``sent`` (its
        rules' equivalent version, `_match`) and converting a patched object back."""
        name = str(hook.get("name") or "")
        side_effects = hook.get("sideEffects") or "Unknown"
        if call.dry_run and side_effects not in ("None", "NoneOnDryRun"):
            raise StatusError.bad_request(f'admission webhook "{name}" does not support dry run')
        timeout = hook.get("timeoutSeconds") or DEFAULT_TIMEOUT
        # a built-in kind (or another kind's body) is sent as it was written: envtest does
        # not convert built-in kinds between versions
        if sent is not call.res and not (call.res.custom and call.kind is None):
            sent = call.res
        obj, old = call.obj, call.old
        if sent is not call.res:
            obj, old = await self._in_version(call.res, [obj, old], sent.version)
        review = self._review(call, sent, obj, old)
        uid = review["request"]["uid"]
        try:
            try:
                answer = await call_webhook(
                    hook.get("clientConfig"),
                    review,
                    float(timeout),
                    self.api.server.name,
                    tell_timeout=True,
                )
            except WebhookCallError as exc:
                raise WebhookCallError(f"failed to call webhook: {exc}") from None
            resp = _verified(answer, uid, mutating)
            patch = self._patch(resp) if mutating and resp.get("allowed") else None
        except WebhookCallError as exc:
            if hook.get("failurePolicy", "Fail") == "Ignore":
                log.info(
                    "envtest %s: webhook %s failed, ignored: %s", self.api.server.name, name, exc
                )
                return
            raise StatusError(
                500,
                "InternalError",
                f'Internal error occurred: failed calling webhook "{name}": {exc}',
            ) from None
        for w in resp.get("warnings") or ():
            if isinstance(w, str):
                warn(w)  # sent with the answer, a refusal included, as kube-apiserver does
        if not resp.get("allowed"):
            raise self._denied(name, resp.get("status"))
        if patch is not None and obj is not None:
            try:
                patched = _patch.json_patch(obj, patch)
            except _patch.PatchError as exc:
                raise StatusError(
                    500,
                    "InternalError",
                    f'Internal error occurred: admission webhook "{name}" returned a bad patch: {exc}',
                ) from None
            if not isinstance(patched, dict):
                raise StatusError(
                    500, "InternalError", f'admission webhook "{name}" patched away the object'
                )
            if sent is not call.res:  # back to the request's version
                (back,) = await self._in_version(sent, [patched], call.res.version)
                assert back is not None
                patched = back
            call.obj = self._decoded(call, patched)

    @staticmethod
    def _decoded(call: _Call, patched: dict[str, Any]) -> dict[str, Any]:
        """A mutating webhook's patched object as kube-apiserver decodes it: a built-in kind
        into its Go type, the fields it does not have dropped without a word (the next
        webhooks never see them); a custom resource as unstructured content, unpruned (its
        schema prunes it when it is stored, after the validating webhooks) but defaulted by
        its schema, as the defaulter does after every non-empty patch (the next webhooks see
        the defaults of what the patch added). The body of another kind than ``res`` (a
        pod's Eviction) is left as it is."""
        if call.kind is not None:
            return patched
        if call.res.custom:
            return apply_defaults(patched, call.res.schema)
        return cast(dict[str, Any], drop_unknown_fields(call.res, patched, []))

    @staticmethod
    def _patch(resp: dict[str, Any]) -> list[Any] | None:
        """The JSON patch of an allowed answer `_verified` took, as kube-apiserver's mutating
        dispatcher reads it (decoded first, then its type checked); None without one."""
        raw = resp.get("patch")
        if not raw:
            return None
        try:
            data = base64.b64decode(raw, validate=True)
        except (binascii.Error, ValueError):
            raise WebhookCallError("failed to call webhook: response.patch is not base64") from None
        try:
            ops = _json.loads(data)
        except ValueError as exc:
            raise WebhookCallError(
                f"received undecodable patch in webhook response: {exc}"
            ) from None
        if not isinstance(ops, list):
            raise WebhookCallError(
                "received undecodable patch in webhook response: not a JSON patch (an array)"
            )
        if resp.get("patchType") != "JSONPatch":
            raise WebhookCallError(f'unsupported patch type "{resp.get("patchType")}"')
        return ops or None  # an empty patch leaves the object as it is, undecoded

    @staticmethod
    def _denied(name: str, status: Any) -> StatusError:
        st = status if isinstance(status, dict) else {}
        raw_code = st.get("code")
        code = raw_code if isinstance(raw_code, int) and raw_code >= 400 else 400
        denied_by = f'admission webhook "{name}" denied the request'
        if st.get("message"):
            message = f"{denied_by}: {st['message']}"
        elif st.get("reason"):
            message = f"{denied_by}: {st['reason']}"
        else:
            message = f"{denied_by} without explanation"
        return StatusError(code, str(st.get("reason") or ""), message, st.get("details"))


_REVIEW = "admission.k8s.io/v1, Kind=AdmissionReview"


def _verified(answer: dict[str, Any], uid: str, mutating: bool) -> dict[str, Any]:
    """The ``response`` of a webhook's ``answer`` to review ``uid``, refused as kube-apiserver's
    ``VerifyAdmissionResponse`` refuses it (a call failure: ``failurePolicy`` decides): no
    response, another uid or kind, a patch without its type (or the other way round), and
    any patch from a validating webhook."""

    def invalid(why: str) -> WebhookCallError:
        return WebhookCallError(f"received invalid webhook response: {why}")

    resp = answer.get("response")
    if not isinstance(resp, dict):
        raise invalid("webhook response was absent")
    if resp.get("uid") != uid:
        raise invalid(f'expected response.uid="{uid}", got "{resp.get("uid") or ""}"')
    gvk = f"{answer.get('apiVersion') or ''}, Kind={answer.get('kind') or ''}"
    if gvk != _REVIEW:
        raise invalid(f"expected webhook response of {_REVIEW}, got {gvk}")
    patch, patch_type = resp.get("patch"), resp.get("patchType")
    if mutating:
        if patch and patch_type is None:
            raise invalid("webhook returned response.patch but not response.patchType")
        if not patch and patch_type is not None:
            raise invalid("webhook returned response.patchType but not response.patch")
        if patch_type == "":
            raise invalid('webhook returned invalid response.patchType of ""')
    elif patch:
        raise invalid("validating webhook may not return response.patch")
    elif patch_type is not None:
        raise invalid("validating webhook may not return response.patchType")
    return resp


def _at_version(obj: dict[str, Any], old: dict[str, Any]) -> dict[str, Any]:
    """``obj`` with ``old``'s resourceVersion: the update admission made of a request."""
    rv = old["metadata"]["resourceVersion"]
    return {**obj, "metadata": {**obj["metadata"], "resourceVersion": rv}}
