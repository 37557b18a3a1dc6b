"""Write semantics: create, update, patch and delete, plus the server-side controllers.

Besides storing objects this module does the work kube-apiserver leaves to its
controllers, synchronously: the garbage collector (ownerReferences), the
namespace controller (Terminating, then empty, then gone) and the CRD
controllers (names accepted, established, served; cleanup on delete).
"""

from __future__ import annotations

import asyncio
import base64
import uuid
from typing import Any

from mcruntime import _json
from mcruntime.envtest import _managedfields
from mcruntime.envtest._apply import APPLY, apply
from mcruntime.envtest._names import (
    generate_name,
    now,
    validate_label_value,
    validate_name,
    validate_qualified_name,
)
from mcruntime.envtest._registry import BASE_FIELDS, Registry, Resource
from mcruntime.envtest._schema import Cause, apply_schema, check_schema
from mcruntime.envtest._status import APIError, status_success
from mcruntime.envtest._storage import ObjKey, ResKey, Store, owner_uids

__all__ = ["Objects", "NAMESPACES", "CRDS", "PROTECTED_NAMESPACES"]

NAMESPACES: ResKey = ("", "namespaces")
CRDS: ResKey = ("apiextensions.k8s.io", "customresourcedefinitions")
PROTECTED_NAMESPACES = ("default", "kube-system", "kube-public")
FOREGROUND = "foregroundDeletion"
DANGLING_GC_DELAY = 0.05
MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
_SERVER_META = ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds")
_RETURNS_OBJECT = frozenset({("", "pods"), ("", "services"), NAMESPACES})
DEPLOYMENTS: ResKey = ("apps", "deployments")
_REPLICATED = frozenset(
    {("apps", "deployments"), ("apps", "replicasets"), ("apps", "statefulsets")}
)


def _spec_of(obj: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "kind", "apiVersion")}


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    m = obj.get("metadata")
    return m if isinstance(m, dict) else {}


class Objects:
    """The REST write verbs of one server over its :class:`Store` and :class:`Registry`."""

    def __init__(self, store: Store, registry: Registry) -> None:
        self.store = store
        self.registry = registry
        self._cluster_ip = 10

    # ----------------------------------------------------------------- helpers

    def bootstrap(self) -> None:
        """Create the namespaces every cluster starts with."""
        for ns in PROTECTED_NAMESPACES:
            if self.store.get(NAMESPACES, "", ns) is None:
                self.create(self._res(NAMESPACES), "", {"metadata": {"name": ns}})

    def _res(self, key: ResKey) -> Resource:
        for r in self.registry.versions_of(key):
            return r
        raise KeyError(key)

    def _not_found(self, res: Resource, name: str) -> APIError:
        return APIError.not_found(res.qualified, name, res.group, res.plural)

    def _check_body(self, res: Resource, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise APIError.bad_request("the body of the request must be a JSON object")
        kind = body.get("kind")
        if kind not in (None, "", res.kind):
            raise APIError.bad_request(
                f"the kind of the provided object ({kind}) does not match the resource ({res.kind})"
            )
        api_version = body.get("apiVersion")
        if api_version not in (None, "", res.api_version):
            raise APIError.bad_request(
                f"the API version in the data ({api_version}) does not match the expected "
                f"API version ({res.api_version})"
            )
        meta = body.get("metadata", {})
        if meta is None:
            meta = {}
        if not isinstance(meta, dict):
            raise APIError.bad_request("metadata must be a JSON object")
        causes: list[Cause] = []
        for field in ("labels", "annotations"):
            value = meta.get(field)
            if value is None:
                continue
            if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
                raise APIError.invalid(
                    res.kind,
                    str(meta.get("name", "")),
                    res.group,
                    f"metadata.{field}",
                    "must be a map of string keys to string values",
                )
            for k, v in value.items():
                why = validate_qualified_name(k)
                if why:
                    causes.append(
                        (
                            "FieldValueInvalid",
                            f"metadata.{field}",
                            f'metadata.{field}: Invalid value: "{k}": {why}',
                        )
                    )
                if field == "labels":
                    why = validate_label_value(v)
                    if why:
                        causes.append(
                            (
                                "FieldValueInvalid",
                                "metadata.labels",
                                f'metadata.labels: Invalid value: "{v}": {why}',
                            )
                        )
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
                    continue
                for part in ("apiVersion", "kind", "name", "uid"):
                    if not isinstance(ref.get(part), str) or not ref[part]:
                        causes.append(
                            (
                                "FieldValueRequired",
                                f"{field}.{part}",
                                f"{field}.{part}: Required value: {part} must not be empty",
                            )
                        )
        if causes:
            raise APIError.invalid_causes(res.kind, str(meta.get("name", "")), res.group, causes)
        finalizers = meta.get("finalizers")
        if finalizers is not None and (
            not isinstance(finalizers, list) or not all(isinstance(f, str) for f in finalizers)
        ):
            raise APIError.invalid(
                res.kind,
                str(meta.get("name", "")),
                res.group,
                "metadata.finalizers",
                "must be a list of strings",
            )
        return body

    def _check_namespace(self, res: Resource, ns: str, name: str) -> None:
        nsobj = self.store.get(NAMESPACES, "", ns)
        if nsobj is None:
            raise APIError.not_found("namespaces", ns, "", "namespaces")
        if "deletionTimestamp" in nsobj["metadata"]:
            raise APIError.forbidden(
                f'{res.qualified} "{name}" is forbidden: unable to create new content in '
                f"namespace {ns} because it is being terminated",
                name,
                res.group,
                res.plural,
            )

    # ----------------------------------------------------------------- create

    def create(
        self,
        res: Resource,
        ns: str,
        body: Any,
        *,
        dry_run: bool = False,
        manager: str | None = None,
        managed_fields: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """POST: store a new object (``dry_run``: only validate and return it).

        ``manager`` owns the created fields (an Update entry of ``managedFields``);
        ``managed_fields`` replaces that record (server-side apply).
        """
        body = self._check_body(res, body)
        meta = dict(body.get("metadata") or {})
        if res.namespaced:
            body_ns = meta.get("namespace")
            if body_ns and body_ns != ns:
                raise APIError.bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            meta["namespace"] = ns
        else:
            meta.pop("namespace", None)
        name = meta.get("name")
        if not name:
            prefix = meta.get("generateName")
            if not prefix or not isinstance(prefix, str):
                raise APIError.invalid(
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
            raise APIError.invalid(
                res.kind, str(name), res.group, "metadata.name", "must be a string"
            )
        why = validate_name(name, res.name_rule)
        if why:
            raise APIError.invalid(
                res.kind, name, res.group, "metadata.name", f'Invalid value: "{name}": {why}'
            )
        meta["name"] = name
        if res.namespaced:
            self._check_namespace(res, ns, name)
        if self.store.get(res.key, ns if res.namespaced else "", name) is not None:
            raise APIError.already_exists(res.qualified, name, res.group, res.plural)
        for k in (
            "resourceVersion",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "selfLink",
            "managedFields",
        ):
            meta.pop(k, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now()
        if res.generation:
            meta["generation"] = 1
        else:
            meta.pop("generation", None)
        obj = dict(body)
        obj["metadata"] = meta
        obj["apiVersion"] = res.api_version
        obj["kind"] = res.kind
        self._prepare_create(res, obj)
        if res.schema is not None:
            obj = self._apply_schema(res, obj)
        if managed_fields is None and manager:
            managed_fields = self._track(res, None, obj, None, manager, False)
        if managed_fields:
            obj["metadata"]["managedFields"] = managed_fields
        if dry_run:
            return obj
        self.store.commit(res.key, "ADDED", obj, None)
        if res.key == CRDS:
            self._serve_crd(obj)
        self._watch_for_dangling(res.key, obj)
        return obj

    def _prepare_create(self, res: Resource, obj: dict[str, Any]) -> None:
        key = res.key
        if key == NAMESPACES:
            self._namespace_defaults(obj)
            obj["status"] = {"phase": "Active"}
        elif key == ("", "secrets"):
            self._secret_defaults(obj)
        elif key == ("", "pods"):
            obj["status"] = {"phase": "Pending"}
        elif key == ("", "services"):
            spec = dict(obj.get("spec") or {})
            spec.setdefault("type", "ClusterIP")
            if spec["type"] != "ExternalName" and not spec.get("clusterIP"):
                self._cluster_ip += 1
                ip = f"10.96.{self._cluster_ip // 250 % 250}.{self._cluster_ip % 250 + 1}"
                spec["clusterIP"] = ip
                spec["clusterIPs"] = [ip]
            spec.setdefault("sessionAffinity", "None")
            obj["spec"] = spec
            obj["status"] = {"loadBalancer": {}}
        elif key == CRDS:
            obj["spec"] = self._validate_crd(obj)
            obj["status"] = self._crd_status(obj, None)
        elif res.custom:
            if res.has_status:
                obj.pop("status", None)
        elif key == ("", "nodes"):
            pass
        elif res.has_status:
            obj["status"] = {}
        if key in _REPLICATED:
            rspec = obj.get("spec")
            if isinstance(rspec, dict) and "replicas" not in rspec:
                obj["spec"] = {**rspec, "replicas": 1}

    def _namespace_defaults(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        meta["labels"] = {**(meta.get("labels") or {}), "kubernetes.io/metadata.name": meta["name"]}
        spec = obj.get("spec")
        if not isinstance(spec, dict) or "finalizers" not in spec:
            obj["spec"] = {**(spec if isinstance(spec, dict) else {}), "finalizers": ["kubernetes"]}

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
        res: Resource,
        ns: str,
        name: str,
        body: Any,
        *,
        status: bool = False,
        dry_run: bool = False,
        manager: str | None = None,
        managed_fields: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """PUT (``status``: on the status subresource): replace the object; 200 with the result.

        ``manager`` takes ownership of the fields the update changes (an Update entry
        of ``managedFields``); ``managed_fields`` replaces that record (server-side apply).
        """
        body = self._check_body(res, body)
        store_ns = ns if res.namespaced else ""
        old = self.store.get(res.key, store_ns, name)
        if old is None:
            raise self._not_found(res, name)
        meta = dict(body.get("metadata") or {})
        body_name = meta.get("name")
        if body_name and body_name != name:
            raise APIError.bad_request(
                f"the name of the object ({body_name}) does not match the name on the URL ({name})"
            )
        body_ns = meta.get("namespace")
        if res.namespaced and body_ns and body_ns != ns:
            raise APIError.bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        old_meta = old["metadata"]
        uid = meta.get("uid")
        if uid and uid != old_meta["uid"]:
            raise APIError.conflict(
                res.qualified,
                name,
                res.group,
                res.plural,
                f"Precondition failed: UID in precondition: {uid}, UID in object meta: {old_meta['uid']}",
            )
        rv = meta.get("resourceVersion")
        if rv and rv != old_meta["resourceVersion"]:
            raise APIError.conflict(
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
            else:
                new.pop("status", None)
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
            if "deletionTimestamp" in old_meta:
                before = set(old_meta.get("finalizers") or ())
                added = [f for f in new_meta.get("finalizers") or () if f not in before]
                if added:
                    raise APIError.invalid(
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
        if res.schema is not None:
            new = self._apply_schema(res, new)
        new_meta.pop("generation", None)
        if managed_fields is None:
            base = old_meta.get("managedFields")
            if "managedFields" in meta and not _managedfields.equivalent(
                meta["managedFields"], base
            ):
                base = meta["managedFields"]
            managed_fields = (
                self._track(res, old, new, base, manager, status)
                if manager
                else (base if isinstance(base, list) else [])
            )
        if managed_fields:
            new_meta["managedFields"] = managed_fields
        else:
            new_meta.pop("managedFields", None)
        if res.generation:
            gen = old_meta.get("generation", 1)
            if not status and (
                _spec_of(new) != _spec_of(old)
                or (
                    res.key == DEPLOYMENTS
                    and new_meta.get("annotations") != old_meta.get("annotations")
                )
            ):
                gen += 1
            new_meta["generation"] = gen
        new_meta["resourceVersion"] = old_meta["resourceVersion"]
        if new == old or dry_run:
            return old if new == old else new
        deleting = "deletionTimestamp" in new_meta
        if deleting and not new_meta.get("finalizers") and res.key != NAMESPACES:
            self._remove(res.key, new, old)
            return new
        self.store.commit(res.key, "MODIFIED", new, old)
        for uid in owner_uids(old) - owner_uids(new):
            self._check_foreground(uid)
        if owner_uids(new) - owner_uids(old):
            self._watch_for_dangling(res.key, new)
        if res.key == CRDS:
            self._serve_crd(new)
        elif res.key == NAMESPACES and deleting:
            self._finish_namespace(name)
        return new

    def _track(
        self,
        res: Resource,
        old: dict[str, Any] | None,
        new: dict[str, Any],
        base: Any,
        manager: str,
        status: bool,
    ) -> list[dict[str, Any]]:
        """``managedFields`` after ``manager`` wrote ``new`` over ``old`` (an Update operation)."""
        return _managedfields.track_update(
            old,
            new,
            base,
            manager=manager,
            api_version=res.api_version,
            subresource="status" if status else "",
            status="only" if status else ("main" if res.has_status else ""),
            shape=_managedfields.shape_for(res.schema, not res.custom),
        )

    def _apply_schema(self, res: Resource, obj: dict[str, Any]) -> dict[str, Any]:
        out, causes = apply_schema(obj, res.schema)
        if causes:
            raise APIError.invalid_causes(res.kind, obj["metadata"]["name"], res.group, causes)
        return out

    def _prepare_update(self, res: Resource, new: dict[str, Any], old: dict[str, Any]) -> None:
        key = res.key
        if key == NAMESPACES:
            self._namespace_defaults(new)
        elif key == ("", "secrets"):
            self._secret_defaults(new)
        elif key == ("", "services"):
            spec = dict(new.get("spec") or {})
            old_spec = old.get("spec") or {}
            for k in ("clusterIP", "clusterIPs"):
                if k not in spec and k in old_spec:
                    spec[k] = old_spec[k]
            spec.setdefault("type", old_spec.get("type", "ClusterIP"))
            spec.setdefault("sessionAffinity", "None")
            new["spec"] = spec
        elif key == CRDS:
            new["spec"] = self._validate_crd(new)
        if key in _REPLICATED:
            rspec = new.get("spec")
            if isinstance(rspec, dict) and "replicas" not in rspec:
                new["spec"] = {**rspec, "replicas": 1}

    # ----------------------------------------------------------------- patch

    def patch(
        self,
        res: Resource,
        ns: str,
        name: str,
        content_type: str,
        raw: bytes,
        *,
        status: bool = False,
        dry_run: bool = False,
        manager: str | None = None,
        force: bool = False,
    ) -> dict[str, Any]:
        """PATCH with a JSON merge, JSON or strategic merge patch, then the update rules apply;
        or server-side apply (``force`` takes over conflicting fields)."""
        from mcruntime import _patch

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
                status=status,
                dry_run=dry_run,
            )
        if force:
            raise APIError.invalid(
                "PatchOptions",
                "",
                "meta.k8s.io",
                "force",
                "Forbidden: may not be specified for non-apply patch",
            )
        if ct not in (MERGE, JSON_PATCH, STRATEGIC) or (ct == STRATEGIC and res.custom):
            accepted = [JSON_PATCH, MERGE, *(() if res.custom else (STRATEGIC,)), APPLY]
            raise APIError.unsupported_patch_type(accepted)
        try:
            patch = _json.loads(raw)
        except _json.JSONDecodeError as e:
            raise APIError.bad_request(f"error decoding patch: {e}") from None
        old = self.store.get(res.key, ns if res.namespaced else "", name)
        if old is None:
            raise self._not_found(res, name)
        try:
            if ct == JSON_PATCH:
                if not isinstance(patch, list):
                    raise APIError.bad_request("a JSON patch must be a JSON array of operations")
                result = _patch.json_patch(old, patch)
            elif ct == MERGE:
                if not isinstance(patch, dict):
                    raise APIError.bad_request("a merge patch must be a JSON object")
                result = _patch.merge_patch(old, patch)
            else:
                if not isinstance(patch, dict):
                    raise APIError.bad_request("a strategic merge patch must be a JSON object")
                result = _patch.strategic_merge_patch(old, patch)
        except _patch.PatchError as e:
            raise APIError.invalid(res.kind, name, res.group, "patch", str(e)) from None
        if not isinstance(result, dict):
            raise APIError.bad_request("the patched object is not a JSON object")
        return self.update(res, ns, name, result, status=status, dry_run=dry_run, manager=manager)

    # ----------------------------------------------------------------- delete

    def delete(
        self, res: Resource, ns: str, name: str, options: dict[str, Any], *, dry_run: bool = False
    ) -> tuple[int, dict[str, Any]]:
        """DELETE: (HTTP code, body): the object while finalizers hold it, else Success or the object."""
        store_ns = ns if res.namespaced else ""
        old = self.store.get(res.key, store_ns, name)
        if old is None:
            raise self._not_found(res, name)
        meta = old["metadata"]
        pre = options.get("preconditions") or {}
        if isinstance(pre, dict):
            if pre.get("uid") and pre["uid"] != meta["uid"]:
                raise APIError.conflict(
                    res.qualified,
                    name,
                    res.group,
                    res.plural,
                    f"Precondition failed: UID in precondition: {pre['uid']}, UID in object meta: {meta['uid']}",
                )
            if pre.get("resourceVersion") and pre["resourceVersion"] != meta["resourceVersion"]:
                raise APIError.conflict(
                    res.qualified,
                    name,
                    res.group,
                    res.plural,
                    f"Precondition failed: ResourceVersion in precondition: {pre['resourceVersion']}, "
                    f"ResourceVersion in object meta: {meta['resourceVersion']}",
                )
        policy = options.get("propagationPolicy") or "Background"
        if policy not in ("Background", "Foreground", "Orphan"):
            raise APIError.invalid(
                res.kind, name, res.group, "propagationPolicy", f'Unsupported value: "{policy}"'
            )
        if options.get("orphanDependents") is True:
            policy = "Orphan"
        if res.key == NAMESPACES and name in PROTECTED_NAMESPACES:
            raise APIError.forbidden(
                f'namespaces "{name}" is forbidden: this namespace may not be deleted',
                name,
                "",
                "namespaces",
            )
        if dry_run:
            return 200, self._out(res, old)
        after = self.delete_object(res.key, old, policy)
        if after is not None:
            return 200, self._out(res, after)
        if res.custom or res.key in _RETURNS_OBJECT:
            return 200, self._out(res, old)
        return 200, status_success(name, res.group, res.plural, meta["uid"])

    def _out(self, res: Resource, obj: dict[str, Any]) -> dict[str, Any]:
        if obj.get("apiVersion") != res.api_version:
            return {**obj, "apiVersion": res.api_version}
        return obj

    def delete_object(
        self, key: ResKey, obj: dict[str, Any], policy: str = "Background"
    ) -> dict[str, Any] | None:
        """Delete one object honouring finalizers; returns it if it stays (being deleted), else None."""
        meta = obj["metadata"]
        if policy == "Orphan":
            self._orphan(meta["uid"])
        if key == NAMESPACES:
            return self._delete_namespace(obj)
        if "deletionTimestamp" in meta:
            return obj
        if policy == "Foreground" and self.store.dependents.get(meta["uid"]):
            uid = meta["uid"]
            finalizers = list(meta.get("finalizers") or ())
            if FOREGROUND not in finalizers:
                finalizers.append(FOREGROUND)
            new = dict(obj)
            new["metadata"] = {
                **meta,
                "deletionTimestamp": now(),
                "deletionGracePeriodSeconds": 0,
                "finalizers": finalizers,
            }
            self.store.commit(key, "MODIFIED", new, obj)
            self._collect(uid, "Foreground")
            self._check_foreground(uid)
            return self.store.by_uid(uid)
        if meta.get("finalizers"):
            new = dict(obj)
            new["metadata"] = {**meta, "deletionTimestamp": now(), "deletionGracePeriodSeconds": 0}
            self.store.commit(key, "MODIFIED", new, obj)
            return new
        self._remove(key, dict(obj), obj)
        return None

    def _remove(self, key: ResKey, new: dict[str, Any], old: dict[str, Any]) -> None:
        """Remove for good (DELETED event), then let the controllers react."""
        new["metadata"] = dict(new["metadata"])
        self.store.commit(key, "DELETED", new, old)
        meta = new["metadata"]
        self._collect(meta["uid"], "Background")
        for uid in owner_uids(new):
            self._check_foreground(uid)
        if key == CRDS:
            self._unserve_crd(new)
        ns = meta.get("namespace")
        if ns:
            nsobj = self.store.get(NAMESPACES, "", ns)
            if nsobj is not None and "deletionTimestamp" in nsobj["metadata"]:
                self._finish_namespace(ns)

    def _collect(self, uid: str, policy: str) -> None:
        """Garbage-collect the dependents of a deleted owner."""
        for dep_key in self.store.dependents_of(uid):
            dep = self.store.get(*dep_key)
            if dep is None:
                continue
            refs = dep["metadata"].get("ownerReferences") or []
            others = [r for r in refs if r.get("uid") != uid]
            if any(self.store.by_uid(r.get("uid", "")) is not None for r in others):
                self._set_owner_refs(dep_key, dep, others)
            else:
                self.delete_object(dep_key[0], dep, policy)

    def _watch_for_dangling(self, key: ResKey, obj: dict[str, Any]) -> None:
        """Schedule the garbage collector's look at an object whose owners may all be absent."""
        uids = owner_uids(obj)
        if not uids or any(u in self.store.uids for u in uids):
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        meta = obj["metadata"]
        loop.call_later(
            DANGLING_GC_DELAY,
            self._collect_dangling,
            key,
            meta.get("namespace", ""),
            meta["name"],
            meta["uid"],
        )

    def _collect_dangling(self, key: ResKey, ns: str, name: str, uid: str) -> None:
        obj = self.store.get(key, ns, name)
        if obj is None or obj["metadata"]["uid"] != uid:
            return
        uids = owner_uids(obj)
        if uids and not any(u in self.store.uids for u in uids):
            self.delete_object(key, obj, "Background")

    def _check_foreground(self, uid: str) -> None:
        """Finish a foreground deletion once the owner has no dependents left."""
        ref = self.store.uids.get(uid)
        owner = self.store.get(*ref) if ref else None
        if ref is None or owner is None:
            return
        meta = owner["metadata"]
        finalizers = meta.get("finalizers") or ()
        if FOREGROUND not in finalizers or self.store.dependents.get(uid):
            return
        rest = [f for f in finalizers if f != FOREGROUND]
        new = dict(owner)
        new["metadata"] = {**meta, "finalizers": rest}
        if not rest:
            del new["metadata"]["finalizers"]
            self._remove(ref[0], new, owner)
        else:
            self.store.commit(ref[0], "MODIFIED", new, owner)

    def _orphan(self, uid: str) -> None:
        for dep_key in self.store.dependents_of(uid):
            dep = self.store.get(*dep_key)
            if dep is not None:
                refs = dep["metadata"].get("ownerReferences") or []
                self._set_owner_refs(dep_key, dep, [r for r in refs if r.get("uid") != uid])

    def _set_owner_refs(self, dep_key: ObjKey, dep: dict[str, Any], refs: list[Any]) -> None:
        new = dict(dep)
        meta = dict(dep["metadata"])
        if refs:
            meta["ownerReferences"] = refs
        else:
            meta.pop("ownerReferences", None)
        new["metadata"] = meta
        self.store.commit(dep_key[0], "MODIFIED", new, dep)

    def delete_collection(
        self, res: Resource, ns: str | None, objs: list[dict[str, Any]], options: dict[str, Any]
    ) -> list[dict[str, Any]]:
        """DELETE on a collection: every listed object, as single deletes would."""
        policy = options.get("propagationPolicy") or "Background"
        out = []
        for obj in objs:
            meta = obj["metadata"]
            current = self.store.get(res.key, meta.get("namespace", ""), meta["name"])
            if current is None:
                continue
            if res.key == NAMESPACES and meta["name"] in PROTECTED_NAMESPACES:
                continue
            after = self.delete_object(res.key, current, policy)
            out.append(self._out(res, after if after is not None else current))
        return out

    # ----------------------------------------------------------------- namespaces

    def _delete_namespace(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        name = obj["metadata"]["name"]
        if "deletionTimestamp" not in obj["metadata"]:
            new = dict(obj)
            new["metadata"] = {
                **obj["metadata"],
                "deletionTimestamp": now(),
                "deletionGracePeriodSeconds": 0,
            }
            new["status"] = {**(obj.get("status") or {}), "phase": "Terminating"}
            self.store.commit(NAMESPACES, "MODIFIED", new, obj)
        for key in list(self.store.objects):
            if key == NAMESPACES:
                continue
            names = self.store.objects.get(key, {}).get(name)
            if not names:
                continue
            for child in list(names.values()):
                current = self.store.get(key, name, child["metadata"]["name"])
                if current is not None:
                    self.delete_object(key, current, "Background")
        return self._finish_namespace(name)

    def _finish_namespace(self, name: str) -> dict[str, Any] | None:
        """Remove a Terminating namespace once it is empty and has no finalizers left."""
        obj = self.store.get(NAMESPACES, "", name)
        if obj is None:
            return None
        if "deletionTimestamp" not in obj["metadata"]:
            return obj
        for key, by_ns in self.store.objects.items():
            if key != NAMESPACES and by_ns.get(name):
                return obj
        spec = obj.get("spec") or {}
        if spec.get("finalizers"):
            new = {**obj, "spec": {**spec, "finalizers": []}, "metadata": dict(obj["metadata"])}
            self.store.commit(NAMESPACES, "MODIFIED", new, obj)
            obj = new
        if obj["metadata"].get("finalizers"):
            return obj
        self._remove(NAMESPACES, dict(obj), obj)
        return None

    # ----------------------------------------------------------------- CRDs

    def _validate_crd(self, crd: dict[str, Any]) -> dict[str, Any]:
        name = crd["metadata"]["name"]
        kind, group = "CustomResourceDefinition", "apiextensions.k8s.io"

        def invalid(field: str, why: str) -> APIError:
            return APIError.invalid(kind, name, group, field, why)

        spec = crd.get("spec")
        if not isinstance(spec, dict):
            raise invalid("spec", "Required value")
        crd_group = spec.get("group")
        names = spec.get("names")
        if not isinstance(crd_group, str) or not crd_group:
            raise invalid("spec.group", "Required value")
        if not isinstance(names, dict) or not all(
            isinstance(names.get(k), str) and names[k] for k in ("plural", "kind")
        ):
            raise invalid("spec.names", "Required value: plural and kind are required")
        if name != f"{names['plural']}.{crd_group}":
            raise invalid(
                "metadata.name",
                f'Invalid value: "{name}": must be spec.names.plural+"."+spec.group',
            )
        if spec.get("scope") not in ("Namespaced", "Cluster"):
            raise invalid(
                "spec.scope",
                f'Unsupported value: "{spec.get("scope")}": supported '
                'values: "Cluster", "Namespaced"',
            )
        versions = spec.get("versions")
        if not isinstance(versions, list) or not versions:
            raise invalid(
                "spec.versions",
                "Required value: must have exactly one version marked as storage version",
            )
        for i, v in enumerate(versions):
            field = f"spec.versions[{i}]"
            if not isinstance(v, dict) or not isinstance(v.get("name"), str) or not v["name"]:
                raise invalid(f"{field}.name", "Required value: every version needs a name")
            if not isinstance(v.get("subresources") or {}, dict):
                raise invalid(f"{field}.subresources", "Invalid value: must be an object")
            if not isinstance(v.get("selectableFields") or [], list):
                raise invalid(f"{field}.selectableFields", "Invalid value: must be a list")
            schema = v.get("schema")
            if schema is not None:
                if not isinstance(schema, dict):
                    raise invalid(f"{field}.schema", "Invalid value: must be an object")
                if schema.get("openAPIV3Schema") is not None:
                    why = check_schema(schema["openAPIV3Schema"])
                    if why:
                        raise invalid(
                            f"{field}.schema.{why.split(':', 1)[0]}",
                            "Invalid value: " + why.split(": ", 1)[1],
                        )
        for field in ("shortNames", "categories"):
            value = names.get(field)
            if value is not None and not (
                isinstance(value, list) and all(isinstance(x, str) for x in value)
            ):
                raise invalid(f"spec.names.{field}", "Invalid value: must be a list of strings")
        if sum(1 for v in versions if v.get("storage")) != 1:
            raise invalid(
                "spec.versions",
                "Invalid value: must have exactly one version marked as storage version",
            )
        names = {**names}
        names.setdefault("singular", names["kind"].lower())
        names.setdefault("listKind", names["kind"] + "List")
        return {
            **spec,
            "names": names,
            "conversion": spec.get("conversion") or {"strategy": "None"},
        }

    def _crd_status(self, crd: dict[str, Any], old: dict[str, Any] | None) -> dict[str, Any]:
        spec = crd["spec"]
        storage = next(v["name"] for v in spec["versions"] if v.get("storage"))
        stored = list((old or {}).get("storedVersions") or [])
        if storage not in stored:
            stored.append(storage)
        ts = now()
        return {
            "conditions": [
                {
                    "type": "NamesAccepted",
                    "status": "True",
                    "reason": "NoConflicts",
                    "message": "no conflicts found",
                    "lastTransitionTime": ts,
                },
                {
                    "type": "Established",
                    "status": "True",
                    "reason": "InitialNamesAccepted",
                    "message": "the initial names have been accepted",
                    "lastTransitionTime": ts,
                },
            ],
            "acceptedNames": spec["names"],
            "storedVersions": stored,
        }

    def _serve_crd(self, crd: dict[str, Any]) -> None:
        spec = crd["spec"]
        names = spec["names"]
        out = []
        for v in spec["versions"]:
            if not v.get("served", True):
                continue
            subs = v.get("subresources") or {}
            selectable = {
                f["jsonPath"].lstrip(".")
                for f in v.get("selectableFields") or ()
                if isinstance(f, dict) and isinstance(f.get("jsonPath"), str)
            }
            out.append(
                Resource(
                    group=spec["group"],
                    version=v["name"],
                    plural=names["plural"],
                    singular=names.get("singular") or names["kind"].lower(),
                    kind=names["kind"],
                    namespaced=spec["scope"] == "Namespaced",
                    short_names=tuple(names.get("shortNames") or ()),
                    has_status="status" in subs,
                    generation=True,
                    custom=True,
                    fields=BASE_FIELDS | selectable,
                    categories=tuple(names.get("categories") or ()),
                    schema=(v.get("schema") or {}).get("openAPIV3Schema"),
                )
            )
        self.registry.set_crd(crd["metadata"]["name"], out)

    def _unserve_crd(self, crd: dict[str, Any]) -> None:
        spec = crd.get("spec") or {}
        key = (spec.get("group", ""), (spec.get("names") or {}).get("plural", ""))
        for obj in list(self.store.iter(key, None)):
            self._remove(key, dict(obj), obj)
        for w in list(self.store.watchers.get(key, ())):
            w.close()
        self.store.drop_resource(key)
        self.registry.drop_crd(crd["metadata"]["name"])
