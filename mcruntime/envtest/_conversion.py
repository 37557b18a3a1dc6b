"""Conversion webhooks: envtest converts custom resources between versions by calling the CRD's webhook.

For a CRD with ``spec.conversion.strategy: Webhook``, objects are stored in
the storage version. A request in another served version is converted like
kube-apiserver does it: the body of a create or update is converted to the
storage version before it is stored (after admission), stored objects are
converted to the requested version for get, list and the answers to writes,
and a patch is applied to the object in the requested version. One
ConversionReview carries all the objects of a list. A failed call, or an answer
kube-apiserver would not take (another uid, a count, version, kind, name,
namespace or uid that does not match, metadata that is not an object, labels or
annotations that are not valid), is worded as its webhook converter words
it (``conversion webhook for shop.example.com/v1, Kind=Backend failed: ...``): a
500 without a reason, the error being no Status. Watch events are converted before
they are sent, all the events of one write to the stream in one review; a
failed conversion ends the watch with an ERROR event. A converted object keeps the
metadata it was sent with, but for the labels and annotations the webhook returned
(kube-apiserver's ``restoreObjectMeta``): a webhook that rebuilds or loses metadata (a
resourceVersion, finalizers, owners) changes nothing of it. Not converted: the
answer to a delete.

Not served (unlike kube-apiserver): a server-side apply in a version other
than the storage version is refused with 415. kube-apiserver merges it in the
requested version and keeps each managedFields entry in the version it was
written in, converting the old and new object through the webhook into every
other entry's version to find that manager's conflicts and removed fields;
envtest's field manager compares every entry in one version, and records the
``Update`` entries of other writes here in the storage version.
"""

from __future__ import annotations

import copy
import dataclasses
import uuid
from typing import TYPE_CHECKING, Any

from mcruntime import _json, _patch
from mcruntime.envtest._http import Response
from mcruntime.envtest._names import annotation_causes, label_causes
from mcruntime.envtest._objects import CRDS, JSON_PATCH, MERGE
from mcruntime.envtest._schema import default_on_read, prune
from mcruntime.envtest._status import StatusError
from mcruntime.envtest._watch import Watcher, event_line
from mcruntime.envtest._webhook_call import WebhookCallError, call_webhook

if TYPE_CHECKING:
    from mcruntime.envtest._api import API
    from mcruntime.envtest._http import HTTPRequest
    from mcruntime.envtest._registry import ServedResource

__all__ = ["Conversion"]

DEFAULT_TIMEOUT = 30.0


class Conversion:
    """The conversion webhooks of one server's CRDs."""

    def __init__(self, api: API) -> None:
        self.api = api

    def _webhook(self, res: ServedResource) -> tuple[dict[str, Any], str] | None:
        """(the CRD's conversion webhook, its storage version) when it converts by webhook."""
        if not res.custom:
            return None
        crd = self.api.store.get(CRDS, "", f"{res.plural}.{res.group}")
        if crd is None:
            return None
        spec = crd.get("spec") or {}
        conv = spec.get("conversion") or {}
        if conv.get("strategy") != "Webhook" or not isinstance(conv.get("webhook"), dict):
            return None
        storage = next((v["name"] for v in spec.get("versions") or () if v.get("storage")), "")
        return conv["webhook"], storage

    def watcher_class(self, res: ServedResource) -> type[Watcher]:
        """The watcher for a watch on ``res``: converting when its CRD converts by webhook."""
        hook = self._webhook(res)
        if hook is None or hook[1] == res.version:
            return Watcher
        conversion = self

        class _Converting(_ConvertingWatcher):
            owner = conversion

        return _Converting

    def wanted(self, req: HTTPRequest, res: ServedResource, watch: bool) -> bool:
        """Whether this request is in a version other than the storage version of a webhook CRD."""
        if watch or req.method == "DELETE":
            return False
        hook = self._webhook(res)
        return hook is not None and hook[1] != res.version

    async def convert(
        self, res: ServedResource, objs: list[dict[str, Any]], to: str
    ) -> list[dict[str, Any]]:
        """``objs`` in apiVersion ``to`` (those already in it are kept), in one review."""
        hook = self._webhook(res)
        if res.read_defaults:
            # decoded as kube-apiserver decodes them: with their own version's defaults
            objs = [default_on_read(o, res.read_defaults) for o in objs]
        todo = [o for o in objs if o.get("apiVersion") != to]
        if hook is None or not todo:
            return objs
        webhook, _storage = hook
        uid = str(uuid.uuid4())
        review = {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "ConversionReview",
            "request": {"uid": uid, "desiredAPIVersion": to, "objects": todo},
        }
        # kube-apiserver names the GroupVersionKind of what it converts (webhook_converter.go)
        gvk = f"{todo[0].get('apiVersion', '')}, Kind={todo[0].get('kind', res.kind)}"
        try:
            answer = await call_webhook(
                webhook.get("clientConfig"), review, DEFAULT_TIMEOUT, self.api.server.name
            )
            out = _converted_objects(answer, uid)
        except WebhookCallError as exc:
            raise _failed(f"conversion webhook for {gvk} failed: {exc}") from None
        if len(out) != len(todo):
            raise _failed(
                f"conversion webhook for {gvk} returned {len(out)} objects, expected {len(todo)}"
            )
        restored = []
        for i, (o, sent) in enumerate(zip(out, todo, strict=True)):
            problem = _invalid(o, sent, to)
            if problem:
                if len(todo) == 1:
                    at = "object at index 0" if problem.startswith("invalid ") else "object"
                else:  # kube-apiserver counts this object in before it checks it
                    at = f"converted object at index {i + 1}"
                raise _failed(f"conversion webhook for {gvk} returned invalid {at}: {problem}")
            meta = _restored_meta(o, sent)
            if isinstance(meta, str):
                at = "" if len(todo) == 1 else f" in object at index {i}"
                raise _failed(f"conversion webhook for {gvk} returned invalid metadata{at}: {meta}")
            restored.append({**o, "metadata": meta})
        # pruned to the schema of the version converted to, as kube-apiserver's
        # schemaCoercingConverter prunes what the webhook returns
        target = self.api.registry.get(res.group, to.rpartition("/")[2], res.plural)
        schema = target.schema if target is not None else None
        converted = iter([prune(o, schema) for o in restored])
        return [next(converted) if o.get("apiVersion") != to else o for o in objs]

    async def serve(self, req: HTTPRequest, t: Any) -> Response:
        """Serve a request in a non-storage version (get, list, create, update, patch)."""
        api = self.api
        res, ns, name, sub = t.res, t.namespace, t.name, t.subresource or ""
        verb = {"POST": "create", "PUT": "update", "PATCH": "patch"}.get(req.method, "")
        if req.method == "GET":
            verb = "list" if name is None else "get"
        elif (verb == "create") != (name is None) or ns is None:
            raise StatusError.method_not_supported(res.qualified, req.method.lower())
        hook = self._webhook(res)
        assert hook is not None
        storage = api.registry.get(res.group, hook[1], res.plural)
        if storage is None:
            raise StatusError(
                500, "InternalError", f"storage version {hook[1]} of {res.qualified} is not served"
            )
        want = res.api_version
        if verb == "get":
            obj = api.store.get(res.key, ns or "", name or "")
            if obj is None:
                raise StatusError.not_found(res.qualified, name or "", res.group, res.plural)
            return Response(200, _json.dumps((await self.convert(res, [obj], want))[0]))
        if verb == "list":
            out = api._list(req, dataclasses.replace(t, res=storage))
            out["apiVersion"] = res.api_version
            out["items"] = await self.convert(res, list(out["items"]), want)
            return Response(200, _json.dumps(out))
        if verb == "patch":
            store_ns = ns if res.namespaced else ""
            old = api.store.get(res.key, store_ns or "", name or "")
            if old is None:
                raise StatusError.not_found(res.qualified, name or "", res.group, res.plural)
            current = (await self.convert(res, [old], want))[0]
            ct = req.media_type
            try:
                patch = _json.loads(req.body)
                if ct == JSON_PATCH and isinstance(patch, list):
                    body = _patch.json_patch(current, patch)
                elif ct == MERGE and isinstance(patch, dict):
                    body = _patch.merge_patch(current, patch)
                else:
                    raise StatusError.unsupported_patch_type([JSON_PATCH, MERGE])
            except (_json.JSONDecodeError, _patch.PatchError) as exc:
                raise StatusError.bad_request(f"error applying patch: {exc}") from None
            body = {
                **body,
                "metadata": {
                    **body["metadata"],
                    "resourceVersion": old["metadata"]["resourceVersion"],
                },
            }
            verb = "update"
        else:
            body = api._body(req)
            if not isinstance(body, dict):
                raise StatusError.bad_request("the body of the request must be a JSON object")
        body = {**body, "apiVersion": want, "kind": res.kind}
        stored_body = (await self.convert(res, [body], storage.api_version))[0]
        req2 = dataclasses.replace(
            req,
            body=_json.dumps(stored_body),
            headers={**req.headers, "content-type": "application/json"},
        )
        if api.admission.wanted(storage):
            resp = await api.admission.admit(req2, storage, verb, ns or "", name, sub)
        else:
            dry_run = api._dry_run(req)
            if verb == "create":
                obj = api.objects.create(storage, ns or "", stored_body, dry_run=dry_run)
                resp = Response(201, _json.dumps(obj))
            else:
                obj = api.objects.update(
                    storage,
                    ns or "",
                    name or "",
                    stored_body,
                    subresource="status" if sub == "status" else "",
                    dry_run=dry_run,
                )
                resp = Response(200, _json.dumps(obj))
        obj = _json.loads(resp.body)
        if isinstance(obj, dict) and obj.get("kind") == res.kind:
            resp.body = _json.dumps((await self.convert(res, [obj], want))[0])
        return resp


def _failed(message: str) -> StatusError:
    """A failed conversion as kube-apiserver answers it: the converter's error is not a
    Status, so it is a 500 without a reason, its message as it is."""
    return StatusError(500, "", message)


def _converted_objects(answer: dict[str, Any], uid: str) -> list[Any]:
    """The ``convertedObjects`` of a ConversionReview answer, worded as kube-apiserver's
    ``getConvertedObjectsFromResponse`` refuses one that is not usable."""
    kind = f"{answer.get('apiVersion', '')}, Kind={answer.get('kind', '')}"
    if kind != "apiextensions.k8s.io/v1, Kind=ConversionReview":
        raise WebhookCallError(
            f"expected webhook response of apiextensions.k8s.io/v1, Kind=ConversionReview, got {kind}"
        )
    resp = answer.get("response")
    if not isinstance(resp, dict):
        raise WebhookCallError("no response provided")
    if resp.get("uid") != uid:
        raise WebhookCallError(f'expected response.uid="{uid}", got "{resp.get("uid", "")}"')
    result = resp.get("result") or {}
    if result.get("status") != "Success":
        # the webhook's message is quoted as it is
        message = result.get("message")
        if message:
            raise WebhookCallError(str(message))
        raise WebhookCallError(
            f"response.result.status was '{result.get('status', '')}', not 'Success'"
        )
    out = resp.get("convertedObjects")
    return out if isinstance(out, list) else []


def _invalid(obj: Any, sent: dict[str, Any], to: str) -> str:
    """Why a converted object is not ``sent`` in ``to`` ("" when it is), as kube-apiserver's
    webhook converter checks it."""
    if not isinstance(obj, dict):
        return "invalid type, expected=Unstructured"
    if obj.get("apiVersion") != to:
        return f"invalid groupVersion (expected {to}, received {obj.get('apiVersion', '')})"
    if obj.get("kind") != sent.get("kind"):
        return f"invalid kind (expected {sent.get('kind', '')}, received {obj.get('kind', '')})"
    meta, sent_meta = obj.get("metadata") or {}, sent.get("metadata") or {}
    for what, got, want in (
        ("name", meta.get("name"), sent_meta.get("name")),
        ("namespace", meta.get("namespace"), sent_meta.get("namespace")),
        ("UID", meta.get("uid"), sent_meta.get("uid")),
    ):
        if (got or "") != (want or ""):
            return f"must have the same {what}: {want or ''} != {got or ''}"
    return ""


#: Go's ``%T`` of a decoded JSON value (bool before int: a bool is an int to Python)
_GO_TYPES: tuple[tuple[type, str], ...] = (
    (dict, "map[string]interface {}"),
    (list, "[]interface {}"),
    (bool, "bool"),
    (int, "int64"),
    (float, "float64"),
    (str, "string"),
)


def _go_type(value: Any) -> str:
    """Go's ``%T`` of a decoded JSON ``value``."""
    return next((name for t, name in _GO_TYPES if isinstance(value, t)), "<nil>")


def _restored_meta(converted: dict[str, Any], sent: dict[str, Any]) -> dict[str, Any] | str:
    """The metadata of ``converted`` as kube-apiserver keeps it (``restoreObjectMeta``): the
    metadata ``sent``, but for the labels and annotations the webhook returned (checked,
    when changed, as labels and annotations are); or why it is refused."""
    response = converted.get("metadata", _MISSING)
    if response is _MISSING:
        return "missing metadata in converted object"
    if not isinstance(response, dict):
        return f"invalid metadata of type {_go_type(response)} in converted object"
    meta = copy.deepcopy(sent.get("metadata") or {})
    for fld in ("labels", "annotations"):
        given = response.get(fld)
        if given is None:
            meta.pop(fld, None)
            continue
        if not isinstance(given, dict):
            return f"invalid metadata.{fld} of type {_go_type(given)} in converted object"
        for k, v in given.items():
            if not isinstance(v, str):
                return f"metadata.{fld}[{k}] must be a string, but is {_go_type(v)} in converted object"
        if given != (meta.get(fld) or {}):
            causes = (
                label_causes(given, "metadata.labels")
                if fld == "labels"
                else annotation_causes(given, "metadata.annotation")  # (sic: kube-apiserver's)
            )
            if causes:
                messages = [message for _, _, message in causes]
                return messages[0] if len(messages) == 1 else f"[{', '.join(messages)}]"
        meta[fld] = given
    return meta


_MISSING: Any = object()


class _ConvertingWatcher(Watcher):
    """A watch in a non-storage version: objects keep their stored version until sent, then are converted."""

    owner: Conversion

    def _encode(self, ev: Any, obj: dict[str, Any]) -> bytes:
        return ev.object_json() if obj is ev.obj else _json.dumps(obj)

    def initial(self, objects: list[dict[str, Any]]) -> None:
        for obj in objects:
            if self.matches(obj):
                self.buf.append(event_line("ADDED", _json.dumps(obj)))

    async def prepare(self, data: bytes) -> bytes:
        events = [_json.loads(line) for line in data.splitlines() if line.strip()]
        res = self.resource
        convertible = [
            e for e in events if e.get("type") != "BOOKMARK" and e.get("type") != "ERROR"
        ]
        try:
            objs = await self.owner.convert(
                res, [e["object"] for e in convertible], res.api_version
            )
        except StatusError as exc:
            self.close()
            return event_line("ERROR", _json.dumps(exc.status()))
        for e, o in zip(convertible, objs, strict=True):
            # as Table rows (kubectl get -w) once converted: the version's printer columns
            e["object"] = self._table(o) if self._table is not None else o
        return b"".join(event_line(e["type"], _json.dumps(e["object"])) for e in events)
