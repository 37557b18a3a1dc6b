"""Request routing: auth, discovery, and the REST verbs on resource paths."""

from __future__ import annotations

import asyncio
import base64
import binascii
import hmac
import inspect
import logging
import re
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import unquote

from mcruntime import _json
from mcruntime.envtest import _csr, _field_labels, _openapi, _protobuf, _rbac
from mcruntime.envtest._admission import Admission
from mcruntime.envtest._apply import APPLY, applied_configuration
from mcruntime.envtest._binding import BINDING_KIND, bind, binding_body, check_binding
from mcruntime.envtest._conversion import Conversion
from mcruntime.envtest._crds import CRDS
from mcruntime.envtest._discovery import aggregated_discovery, aggregated_version, content_type
from mcruntime.envtest._ephemeral import EPHEMERAL
from mcruntime.envtest._eviction import Evictions, delete_options, eviction_body
from mcruntime.envtest._gofmt import go_string
from mcruntime.envtest._health import health
from mcruntime.envtest._http import Connection, HTTPRequest, Response, Stream
from mcruntime.envtest._kubelet import CONNECTED, answer, connect_options
from mcruntime.envtest._kubelet import SUBRESOURCES as KUBELET_SUBRESOURCES
from mcruntime.envtest._metrics import metrics
from mcruntime.envtest._names import name_problems, now, rfc3339
from mcruntime.envtest._namespaces import FINALIZE
from mcruntime.envtest._objects import (
    Objects,
    WriteCheck,
    json_patch,
    non_apply_force,
    patch_failed,
)
from mcruntime.envtest._outage import needs_storage, request_deadline, timed_out
from mcruntime.envtest._registry import (
    BASE_FIELDS,
    EVICTION_KIND,
    STATUS_SUBRESOURCES,
    Registry,
    ServedResource,
)
from mcruntime.envtest._scale import (
    apply_scale,
    replicas_paths,
    requested_replicas,
    scale_managed_fields,
    to_scale,
    with_replicas,
)
from mcruntime.envtest._schema import in_version
from mcruntime.envtest._status import StatusError
from mcruntime.envtest._storage import ObjectStore
from mcruntime.envtest._table import include_policy, scale_table, to_table
from mcruntime.envtest._tokens import ISSUER, Issuer
from mcruntime.envtest._transform import (
    PARTIAL,
    TABLE,
    Target,
    negotiate,
    transform,
    transform_body,
)
from mcruntime.envtest._views import View, view_of
from mcruntime.envtest._warnings import DIRECTIVES, collecting, warn
from mcruntime.envtest._watch import Watcher, event_line

if TYPE_CHECKING:
    from mcruntime._selectors import FieldSelector, LabelSelector

__all__ = ["API", "VERSION_INFO", "READ_ONLY_USER", "ADMIN_GROUP"]

log = logging.getLogger("mcruntime.envtest")

VERSION_INFO: dict[str, str] = {
    "major": "1",
    "minor": "31",
    "gitVersion": "v1.31.0-mcruntime",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "python3",
    "compiler": "cpython",
    "platform": "linux/amd64",
}
READ_ONLY_USER = "system:serviceaccount:envtest:read-only"
ADMIN_GROUP = "system:masters"
ADMIN_USER = "kubernetes-admin"
#: what a read-only user may do (the admin, and users in ADMIN_GROUP, may do anything)
READ_VERBS = frozenset({"get", "list", "watch"})
_REVIEWS = frozenset(
    {
        ("authentication.k8s.io", "selfsubjectreviews"),
        ("authorization.k8s.io", "selfsubjectaccessreviews"),
        ("authorization.k8s.io", "selfsubjectrulesreviews"),
    }
)
#: reviews of another subject (a token, a user's rights): answered, never stored, and
#: created only by whom RBAC allows (``system:auth-delegator``)
_SUBJECT_REVIEWS = frozenset(
    {
        ("authentication.k8s.io", "tokenreviews"),
        ("authorization.k8s.io", "subjectaccessreviews"),
        ("authorization.k8s.io", "localsubjectaccessreviews"),
    }
)
_SERVICE_ACCOUNTS = ("", "serviceaccounts")
#: the older ``bindings`` resource: a Binding naming its pod in its body
_BINDINGS = ("", "bindings")
_IMPERSONATE_EXTRA = "impersonate-extra-"
#: a TokenRequest's lifetime when it asks for none, and the shortest it may ask for
TOKEN_SECONDS, MIN_TOKEN_SECONDS = 3600, 600
#: the kinds a token may be bound to (kube-apiserver 1.31: ServiceAccountTokenNodeBinding)
_BINDABLE = {"Pod": ("", "pods"), "Secret": ("", "secrets"), "Node": ("", "nodes")}
_HEALTH = ("/healthz", "/readyz", "/livez")
_TRUE = frozenset({"true", "1"})
_NOT_OLDER = "NotOlderThan"
#: kube-apiserver's watch cache: how long a read waits for a resourceVersion it has not
#: reached (``blockTimeout``), and the ``Retry-After`` of its 504 then
#: (``resourceVersionTooHighRetrySeconds``)
FRESH_WAIT = 3.0
_TOO_LARGE_RETRY = 1
_DIGITS = re.compile(r"[0-9]+")


def _parsed_rv(text: str) -> int:
    """``APIObjectVersioner.ParseResourceVersion``: a uint64, "" and "0" being 0; a
    ValueError in kube-apiserver's words for anything else."""
    if text in ("", "0"):
        return 0
    digits = _DIGITS.fullmatch(text) is not None
    if digits and int(text) < 2**64:
        return int(text)
    raise ValueError(
        f"resourceVersion: Invalid value: {go_string(text)}: strconv.ParseUint: parsing "
        f"{go_string(text)}: {'value out of range' if digits else 'invalid syntax'}"
    )


def _list_rv(q: Mapping[str, str]) -> int:
    """A list's ``resourceVersion`` (storage's ``ValidateListOptions``: a 400 for one that
    is not a number, from kube-apiserver 1.33; a 500 before)."""
    try:
        return _parsed_rv(q.get("resourceVersion", ""))
    except ValueError as e:
        raise StatusError.bad_request(f"invalid resource version: {e}") from None


def _at_revision(q: Mapping[str, str], rv: int) -> bool:
    """Whether a list is read from etcd at its resourceVersion ``rv`` (``Exact``, or a
    page of the legacy match), not from the watch cache."""
    match = q.get("resourceVersionMatch", "")
    return match == "Exact" or (not match and rv > 0 and _limit(q) > 0)


def _watch_list_rv(q: Mapping[str, str]) -> int:
    """The resourceVersion a watch waits for before it starts (0: none): only a watch that
    sends its initial events (``sendInitialEvents=true``) waits, as kube-apiserver's
    cacher does (``waitUntilWatchCacheFreshAndForceAllEvents``)."""
    if q.get("sendInitialEvents", "").lower() not in _TRUE:
        return 0
    _check_list_options(q, watch=True)
    try:
        return _parsed_rv(q.get("resourceVersion", ""))
    except ValueError:
        return 0  # refused by the watch itself


def _limit(q: Mapping[str, str]) -> int:
    try:
        return int(q.get("limit") or 0)
    except ValueError:
        raise StatusError.bad_request(f"invalid limit: {q.get('limit')!r}") from None


async def _served(
    serve: Callable[[], Response | Stream | Awaitable[Response | Stream]],
) -> Response | Stream:
    result = serve()
    return await result if inspect.isawaitable(result) else result


def _check_list_options(q: Mapping[str, str], watch: bool) -> None:
    """kube-apiserver's ``ValidateListOptions`` (apimachinery ``internalversion/validation``):
    a 422 ``ListOptions.meta.k8s.io "" is invalid`` naming each option that conflicts."""
    causes: list[tuple[str, str, str]] = []

    def refuse(field: str, why: str, reason: str = "FieldValueForbidden") -> None:
        causes.append((reason, field, f"{field}: {why}"))

    match = q.get("resourceVersionMatch", "")
    initial = "sendInitialEvents" in q
    if watch:
        if initial and match != _NOT_OLDER:
            refuse(
                "resourceVersionMatch",
                f"Forbidden: sendInitialEvents requires setting resourceVersionMatch to {_NOT_OLDER}",
            )
        if match:
            if not initial:
                refuse(
                    "resourceVersionMatch",
                    "Forbidden: resourceVersionMatch is forbidden for watch unless "
                    "sendInitialEvents is provided",
                )
            if match != _NOT_OLDER:
                refuse(
                    "resourceVersionMatch",
                    f'Unsupported value: "{match}": supported values: "{_NOT_OLDER}"',
                    "FieldValueNotSupported",
                )
            if q.get("continue"):
                refuse(
                    "resourceVersionMatch",
                    "Forbidden: resourceVersionMatch is forbidden when continue is provided",
                )
    else:
        if match:
            if not q.get("resourceVersion"):
                refuse(
                    "resourceVersionMatch",
                    "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is "
                    "provided",
                )
            if q.get("continue"):
                refuse(
                    "resourceVersionMatch",
                    "Forbidden: resourceVersionMatch is forbidden when continue is provided",
                )
            if match not in ("Exact", _NOT_OLDER):
                refuse(
                    "resourceVersionMatch",
                    f'Unsupported value: "{match}": supported values: "Exact", "{_NOT_OLDER}", ""',
                    "FieldValueNotSupported",
                )
            if match == "Exact" and q.get("resourceVersion") == "0":
                refuse(
                    "resourceVersionMatch",
                    'Forbidden: resourceVersionMatch "exact" is forbidden for resourceVersion "0"',
                )
        if initial:
            refuse("sendInitialEvents", "Forbidden: sendInitialEvents is forbidden for list")
    if causes:
        raise StatusError.invalid_causes("ListOptions", "", "meta.k8s.io", causes)


#: the request bodies envtest decodes, in kube-apiserver's order (it adds protobuf for built-ins)
BODY_MEDIA_TYPES = ("application/json", "application/yaml")
#: the patch types of built-in kinds that envtest applies (scale, events.k8s.io)
BUILTIN_PATCH_TYPES = (
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
)
#: the patch types of a built-in kind's scale (False) and a custom resource's (True)
_SCALE_PATCH_TYPES = {
    False: (*BUILTIN_PATCH_TYPES, APPLY),
    True: ("application/json-patch+json", "application/merge-patch+json", APPLY),
}


def _json_response(code: int, obj: Any) -> Response:
    return Response(code, _json.dumps(obj))


def _error(e: StatusError) -> Response:
    """``e``'s Status; with a ``Retry-After`` header when it suggests one (a 429 of an
    eviction), as kube-apiserver writes errors."""
    retry = (e.details or {}).get("retryAfterSeconds")
    headers = [("Retry-After", str(retry))] if isinstance(retry, int) and retry > 0 else []
    return Response(e.code, _json.dumps(e.status()), headers=headers)


_METHOD_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


@dataclass(frozen=True, slots=True)
class _User:
    """An authenticated user, and what decides its rights."""

    name: str
    groups: tuple[str, ...]
    #: "all" (the admin, ``system:masters``), "read" (get, list and watch) or "rbac"
    #: (the server's Roles and bindings: service accounts with a TokenRequest's token)
    rights: Literal["all", "read", "rbac"]
    uid: str = ""
    #: the audiences its token was checked for (a TokenReview's answer)
    audiences: tuple[str, ...] = (ISSUER,)
    #: its extra attributes (an impersonated user's ``Impersonate-Extra-*``): (key, values)
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


_ADMIN = _User(ADMIN_USER, (ADMIN_GROUP, "system:authenticated"), "all")
_READER = _User(READ_ONLY_USER, ("system:authenticated",), "read")


def _subject(
    name: str,
    groups: tuple[str, ...],
    uid: str = "",
    extra: tuple[tuple[str, tuple[str, ...]], ...] = (),
) -> _User:
    """A user named by a review or impersonation, with the rights envtest gives that user."""
    if ADMIN_GROUP in groups:
        return _User(name, groups, "all", uid, extra=extra)
    if name == READ_ONLY_USER:
        return _User(name, groups, "read", uid, extra=extra)
    return _User(name, groups, "rbac", uid, extra=extra)


def _service_account_name(user: str) -> tuple[str, str] | None:
    """(namespace, name) of a ``system:serviceaccount:<namespace>:<name>`` user name."""
    parts = user.split(":")
    if len(parts) == 4 and parts[:2] == ["system", "serviceaccount"] and all(parts[2:]):
        return parts[2], parts[3]
    return None


@dataclass(slots=True)
class _Target:
    res: ServedResource
    namespace: str | None  # None: all namespaces of a namespaced resource
    name: str | None
    subresource: str | None
    watch_path: bool


class _ErrorStream:
    """A watch that answers with one ERROR event (e.g. 410 Expired) and ends."""

    def __init__(self, err: StatusError) -> None:
        self.line = event_line("ERROR", _json.dumps(err.status()))

    async def run(self, conn: Connection) -> None:
        await conn.start_chunked()
        await conn.chunk(self.line)
        await conn.end_chunked()


#: kube-apiserver's ``--max-request-body-bytes`` default (``MaxRequestBodyBytes``): the
#: most a create, update, patch or delete request's body may have
MAX_REQUEST_BODY_BYTES = 3 * 1024 * 1024


def _limit_body(req: HTTPRequest) -> None:
    """Refuse (413) a body over `MAX_REQUEST_BODY_BYTES`, as the handlers'
    ``limitedReadBody`` does once the request is authorized."""
    if len(req.body) > MAX_REQUEST_BODY_BYTES:
        raise StatusError(
            413,
            "RequestEntityTooLarge",
            f"Request entity too large: limit is {MAX_REQUEST_BODY_BYTES}",
        )


class API:
    """The HTTP handler of one server."""

    def __init__(
        self, server: Any, store: ObjectStore, registry: Registry, objects: Objects
    ) -> None:
        self.server = server
        self.store = store
        self.registry = registry
        self.objects = objects
        self.admission = Admission(self)
        self.tokens = Issuer()
        self.conversion = Conversion(self)
        self.evictions = Evictions(store, registry, objects)

    async def handle(self, req: HTTPRequest) -> Response | Stream:
        latency = self.server.latency
        if latency > 0:
            await asyncio.sleep(latency)
        try:
            directive = req.query.get("fieldValidation", "")
            if directive not in ("", *DIRECTIVES) and req.method in ("POST", "PUT", "PATCH"):
                raise StatusError.invalid(
                    "CreateOptions",
                    "",
                    "meta.k8s.io",
                    "fieldValidation",
                    f'Unsupported value: "{directive}": supported values: '
                    + ", ".join(f'"{d}"' for d in DIRECTIVES),
                )
            with collecting(directive) as warnings:
                try:
                    result = self._handle(req)
                    if inspect.isawaitable(result):  # a write that calls webhooks
                        result = await result
                except StatusError as e:
                    result = _error(e)  # with the warnings so far (a webhook's, say)
            if isinstance(result, Response) and warnings.messages:
                headers = [*result.headers, *warnings.headers()]
                return Response(result.status, result.body, result.content_type, headers)
            return result
        except StatusError as e:
            return _error(e)
        except Exception:
            log.exception(
                "envtest %s: internal error serving %s %s", self.server.name, req.method, req.path
            )
            return _error(
                StatusError(
                    500,
                    "InternalError",
                    "an error on the server has prevented the request from succeeding",
                )
            )

    # ----------------------------------------------------------------- routing

    def _handle(
        self, req: HTTPRequest
    ) -> Response | Stream | Awaitable[Response] | Awaitable[Response | Stream]:
        path = req.path.rstrip("/") or "/"
        if path.startswith(_HEALTH):
            answer = health(path, req.raw_query, self.server._outage.down)
            if answer is not None:
                self._authorize_health(req, path)
                return answer
        if path == "/version":
            return _json_response(200, VERSION_INFO)
        user = self._impersonate(req, self._authenticate(req))
        if path == "/metrics":
            verb = "get" if req.method in ("GET", "HEAD") else req.method.lower()
            if not self._path_allowed(user, verb, path):
                raise StatusError.forbidden(
                    f"forbidden: User {go_string(user.name)} cannot {verb} path {go_string(path)}"
                )
            return metrics(self.store, VERSION_INFO)
        segs = path.strip("/").split("/")
        if segs[0] == "openapi":
            return self._openapi(req, segs[1:])
        if segs[0] == "api":
            if len(segs) == 1:
                return self._discovery(
                    req,
                    self.registry.api_versions(f"{self.server.host}:{self.server.port}"),
                    core=True,
                )
            if segs[1] != "v1":
                raise StatusError.no_route()
            if len(segs) == 2:
                return self._discovery(req, self.registry.resource_list("", "v1"))
            group, version, rest = "", "v1", segs[2:]
        elif segs[0] == "apis":
            if len(segs) == 1:
                return self._discovery(req, self.registry.api_group_list(), core=False)
            if len(segs) == 2:
                return self._discovery(req, self.registry.api_group(segs[1]))
            if len(segs) == 3:
                return self._discovery(req, self.registry.resource_list(segs[1], segs[2]))
            group, version, rest = segs[1], segs[2], segs[3:]
        else:
            raise StatusError.no_route()
        target = self._target(group, version, rest)
        if target.res.warning:  # a deprecated version of a custom resource
            warn(target.res.warning)
        if target.res.key in _REVIEWS:  # anyone may ask who they are and what they may do
            _limit_body(req)
            return self._review(req, target, user)
        verb = _request_verb(req, target)
        if user.rights != "all":
            attrs = _attributes(target, verb, req.query.get("fieldSelector"))
            if not self._allowed(user, attrs):
                raise _denied(attrs, user.name)
        _limit_body(req)
        if target.res.key in _SUBJECT_REVIEWS:
            return self._subject_review(req, target)
        check = self._write_check(user, target)
        if self.server._outage.down and needs_storage(req, verb, target.subresource):
            return self._after_storage(req, lambda: self._verb(req, target, check))
        return self._verb(req, target, check)

    async def _after_storage(
        self,
        req: HTTPRequest,
        serve: Callable[[], Response | Stream | Awaitable[Response | Stream]],
    ) -> Response | Stream:
        """``serve()`` once storage is back, or kube's 504 when the request's deadline passes
        first (a storage outage: `APIServer.storage_outage()`)."""
        if not await self.server._outage.wait(request_deadline(req, self.server.request_timeout)):
            return timed_out()
        return await _served(serve)

    async def _when_fresh(
        self,
        rv: int,
        serve: Callable[[], Response | Stream | Awaitable[Response | Stream]],
        *,
        watch: bool = False,
    ) -> Response | Stream:
        """``serve()`` once the resourceVersion reaches ``rv``: kube-apiserver's watch cache
        waits for it up to 3 s, then answers 504 ``Too large resource version`` (a watch: 200
        and that Status as its one ERROR event)."""
        if not await self.store.wait_for(rv, FRESH_WAIT):
            e = StatusError.too_large_resource_version(rv, self.store.rv, _TOO_LARGE_RETRY)
            if watch:
                return _ErrorStream(e)
            raise e
        return await _served(serve)

    def _awaited_rv(self, req: HTTPRequest, t: _Target) -> int:
        """The resourceVersion a get or list waits for, as kube-apiserver's watch cache serves
        it (0: none); 400 for a list's that is not a number, 500 for a get's (its storage's
        error passed on as it is)."""
        q = req.query
        if q.get("resourceVersion", "") in ("", "0"):
            return 0
        if t.name is None:
            # the handler's refusals come first
            _check_list_options(q, watch=False)
            self._selectors(req, t.res)
            if q.get("continue"):
                return 0
            rv = _list_rv(q)
            return 0 if _at_revision(q, rv) else rv
        if t.subresource not in (None, "status"):
            return 0
        try:
            return _parsed_rv(q.get("resourceVersion", ""))
        except ValueError as e:
            raise StatusError(500, "", str(e)) from None

    def _authorize_health(self, req: HTTPRequest, path: str) -> None:
        """403 for a service account whose RBAC does not let it get the health ``path``.

        kube-apiserver authorizes health paths like any other; its bootstrap roles
        (``system:public-info-viewer``, ``system:discovery``) grant them to every user,
        so envtest answers them to anyone, but a service account whose roles were
        changed: then kube's ``forbidden: User "..." cannot get path "/readyz"``.
        """
        scheme, _, token = req.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return
        user = self._token_user(token.strip())
        if user is not None and user.rights == "rbac" and not self._path_allowed(user, "get", path):
            raise StatusError.forbidden(f'forbidden: User "{user.name}" cannot get path "{path}"')

    def _authenticate(self, req: HTTPRequest) -> _User:
        """Who sent the request; 401 for nobody.

        A bearer token, when sent, decides (as kube-apiserver's union
        authenticator tries it alongside the certificate, and a wrong token is
        a 401): the server's admin or read-only token, or a service account's
        from a TokenRequest; else a client certificate verified against the
        envtest CA.
        """
        auth = req.headers.get("authorization", "")
        scheme, _, token = auth.partition(" ")
        if scheme.lower() == "bearer" and token:
            bearer = self._token_user(token.strip())
            if bearer is None:
                raise StatusError.unauthorized()
            return bearer
        if req.peer is not None:
            user, groups = req.peer
            every = () if "system:authenticated" in groups else ("system:authenticated",)
            rights: Literal["all", "read", "rbac"] = (
                "all" if ADMIN_GROUP in groups else "read" if user == READ_ONLY_USER else "rbac"
            )
            return _User(user, (*groups, *every), rights)
        raise StatusError.unauthorized()

    def _impersonate(self, req: HTTPRequest, requester: _User) -> _User:
        """The user the request acts as: ``requester``, or whom its ``Impersonate-*`` headers
        name when ``requester`` may impersonate each of them (``kubectl --as``), as
        kube-apiserver's impersonation filter decides."""
        name = req.headers.get("impersonate-user", "")
        groups = req.header_values("impersonate-group")
        uid = req.headers.get("impersonate-uid", "")
        extra = [
            (unquote(k.removeprefix(_IMPERSONATE_EXTRA)), v)
            for k, v in req.header_lines
            if k.startswith(_IMPERSONATE_EXTRA)
        ]
        if not (name or groups or uid or extra):
            return requester
        if not name:
            raise StatusError.bad_request(
                "requested groups, extra or a uid without impersonating a user"
            )
        account = _service_account_name(name)
        checks = [
            _rbac.Attributes("impersonate", "", "serviceaccounts", "", *account)
            if account
            else _rbac.Attributes("impersonate", "", "users", name=name)
        ]
        checks += [_rbac.Attributes("impersonate", "", "groups", name=g) for g in groups]
        checks += [
            _rbac.Attributes("impersonate", "authentication.k8s.io", "userextras", key, name=value)
            for key, value in extra
        ]
        if uid:
            checks.append(
                _rbac.Attributes("impersonate", "authentication.k8s.io", "uids", name=uid)
            )
        for a in checks:
            if not self._allowed(requester, a):
                raise _denied(a, requester.name)
        if not groups and account:
            groups = ["system:serviceaccounts", f"system:serviceaccounts:{account[0]}"]
        if not {"system:authenticated", "system:unauthenticated"} & set(groups):
            groups.append("system:authenticated")
        extras: dict[str, list[str]] = {}
        for key, value in extra:
            extras.setdefault(key, []).append(value)
        return _subject(name, tuple(groups), uid, tuple((k, tuple(v)) for k, v in extras.items()))

    def _token_user(self, token: str, audiences: Collection[str] = (ISSUER,)) -> _User | None:
        """Who a bearer token authenticates for one of ``audiences`` (None: nobody): the
        server's admin or read-only token (meant for the API server only), or a service
        account's token from a TokenRequest while it is valid."""
        if ISSUER in audiences:
            presented = token.encode("latin-1", "replace")
            if hmac.compare_digest(presented, self.server.token.encode()):
                return _ADMIN
            if hmac.compare_digest(presented, self.server.read_only_token.encode()):
                return _READER
        claims = self.tokens.verify(token, audiences)
        if claims is None:
            return None
        ns = claims.namespace
        sa = self.store.get(_SERVICE_ACCOUNTS, ns, claims.service_account)
        if sa is None or sa["metadata"]["uid"] != claims.uid:
            return None
        if claims.bound is not None:
            kind, name, uid = claims.bound
            obj = self.store.get(_BINDABLE[kind], "" if kind == "Node" else ns, name)
            if obj is None or obj["metadata"]["uid"] != uid:
                return None
        return _User(
            f"system:serviceaccount:{ns}:{claims.service_account}",
            ("system:serviceaccounts", f"system:serviceaccounts:{ns}", "system:authenticated"),
            "rbac",
            uid=claims.uid,
            audiences=tuple(a for a in claims.audiences if a in audiences),
        )

    def _write_check(self, user: _User, t: _Target) -> WriteCheck | None:
        """What a write of ``user`` goes through before it is stored: RBAC's escalation
        check, or a CertificateSigningRequest's strategy and admission (``_csr``)."""
        if t.res.key != _csr.CSRS:
            return self._escalation_check(user, t)
        res = t.res
        return _csr.write_check(
            t.subresource or "",
            (user.name, user.uid, user.groups, {}),
            lambda a: self._allowed(user, a),
            lambda name: self.store.get(res.key, "", name),
        )

    def _escalation_check(self, user: _User, t: _Target) -> WriteCheck | None:
        """For a service account's write of a role or binding: refuse (403) what would grant
        rights it does not hold, as kube-apiserver's RBAC storage does."""
        res = t.res
        if user.rights != "rbac" or res.key not in _rbac.RBAC_KEYS:
            return None

        def check(obj: dict[str, Any]) -> None:
            why = _rbac.escalation(
                self.store, user.name, user.groups, res.key, t.namespace or "", obj
            )
            if why is not None:
                name = obj["metadata"].get("name", "")
                raise StatusError.forbidden(
                    f'{res.qualified} "{name}" is forbidden: {why}', name, res.group, res.plural
                )

        return check

    def _allowed(self, user: _User, a: _rbac.Attributes) -> bool:
        if user.rights == "all":
            return True
        if user.rights == "read":
            return a.verb in READ_VERBS
        return _rbac.allows(self.store, user.name, user.groups, a)

    def _review(self, req: HTTPRequest, t: _Target, user: _User) -> Response:
        """SelfSubjectReview (who am I), SelfSubjectAccessReview (may I) and
        SelfSubjectRulesReview (what may I, ``kubectl auth can-i --list``): answered, not stored.

        The answer is the one a request would get: the admin may do anything,
        a read-only user get, list and watch, a service account what RBAC allows.
        """
        res = t.res
        body = self._review_body(req, t)
        meta = {"creationTimestamp": now()}
        if res.plural == "selfsubjectreviews":
            info: dict[str, Any] = {"username": user.name}
            if user.uid:
                info["uid"] = user.uid
            info["groups"] = list(user.groups)
            if user.extra:
                info["extra"] = {k: list(v) for k, v in user.extra}
            status: dict[str, Any] = {"userInfo": info}
            return _json_response(201, {**_kind_of(res), "metadata": meta, "status": status})
        spec = body.get("spec") or {}
        if res.plural == "selfsubjectrulesreviews":
            if not spec.get("namespace"):  # kube's REST handler: the rules of one namespace
                raise StatusError.bad_request("no namespace on request")
            status = self._rules_review(user, spec["namespace"])
            return _json_response(
                201, {**_kind_of(res), "metadata": meta, "spec": spec, "status": status}
            )
        status = self._decide(user, spec)
        return _json_response(
            201, {**_kind_of(res), "metadata": meta, "spec": spec, "status": status}
        )

    def _decide(self, user: _User, spec: dict[str, Any]) -> dict[str, Any]:
        """An access review's status: whether ``user`` may do what ``spec`` asks, on a
        resource (``resourceAttributes``) or a path (``nonResourceAttributes``)."""
        attrs = spec.get("resourceAttributes")
        if attrs:
            allowed = self._allowed(
                user,
                _rbac.Attributes(
                    attrs.get("verb") or "",
                    attrs.get("group") or "",
                    attrs.get("resource") or "",
                    attrs.get("subresource") or "",
                    attrs.get("namespace") or "",
                    attrs.get("name") or "",
                ),
            )
        else:
            path_attrs = spec.get("nonResourceAttributes") or {}
            allowed = self._path_allowed(
                user, path_attrs.get("verb") or "", path_attrs.get("path") or ""
            )
        status: dict[str, Any] = {"allowed": allowed}
        if not allowed and user.rights == "read":
            status["reason"] = f"envtest: {user.name} may only get, list and watch"
        return status

    def _path_allowed(self, user: _User, verb: str, path: str) -> bool:
        """Whether ``user`` may ``verb`` the non-resource URL ``path``. envtest serves its
        paths (discovery, OpenAPI, health) to every authenticated user (but health paths
        to a service account RBAC forbids them); this answers for a review, as
        kube-apiserver's RBAC would (its bootstrap roles bind discovery, health and
        version to everyone authenticated)."""
        if user.rights == "all":
            return True
        if user.rights == "read" and verb in READ_VERBS:
            return True
        return _rbac.allows_path(self.store, user.name, user.groups, verb, path)

    def _review_body(self, req: HTTPRequest, t: _Target) -> dict[str, Any]:
        """The body of a review: created (POST to the collection) and nothing else."""
        if req.method != "POST" or t.name is not None:
            raise StatusError.method_not_supported(t.res.qualified, req.method.lower())
        body = self._body(req)
        if not isinstance(body, dict):
            raise StatusError.bad_request("the request body is not an object")
        return body

    def _subject_review(self, req: HTTPRequest, t: _Target) -> Response:
        """TokenReview (who a token is), SubjectAccessReview and LocalSubjectAccessReview
        (what a user may do): what a server that delegates authentication and
        authorization to the API server asks; answered, not stored."""
        res = t.res
        spec = self._review_body(req, t).get("spec") or {}
        if not isinstance(spec, dict):
            raise StatusError.bad_request("spec is not an object")
        if res.plural == "tokenreviews":
            status = self._token_review(spec)
        else:
            status = self._access_review(res, t.namespace or "", spec)
        meta = {"creationTimestamp": None}
        return _json_response(
            201, {**_kind_of(res), "metadata": meta, "spec": spec, "status": status}
        )

    def _token_review(self, spec: dict[str, Any]) -> dict[str, Any]:
        """Who ``spec.token`` authenticates for ``spec.audiences`` (default: the API server)."""
        token = spec.get("token")
        if not isinstance(token, str) or not token:
            raise StatusError.bad_request("token is required for TokenReview in authentication")
        wanted = [a for a in spec.get("audiences") or () if isinstance(a, str)] or [ISSUER]
        user = self._token_user(token, wanted)
        if user is None:
            return {"authenticated": False, "user": {}, "error": "invalid bearer token"}
        info: dict[str, Any] = {"username": user.name, "groups": list(user.groups)}
        if user.uid:
            info["uid"] = user.uid
        return {
            "authenticated": True,
            "user": info,
            "audiences": [a for a in wanted if a in user.audiences],
        }

    def _access_review(
        self, res: ServedResource, namespace: str, spec: dict[str, Any]
    ) -> dict[str, Any]:
        """A (Local)SubjectAccessReview's status, after kube-apiserver's checks of its spec."""
        local = res.plural == "localsubjectaccessreviews"
        attrs, path_attrs = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
        causes: list[tuple[str, str, str]] = []

        def invalid(field: str, value: str, why: str) -> None:
            causes.append(("FieldValueInvalid", field, f"{field}: Invalid value: {value}: {why}"))

        if attrs is not None and path_attrs is not None:
            invalid(
                "spec.nonResourceAttributes",
                '"object"',
                "cannot be specified in combination with resourceAttributes",
            )
        elif attrs is None and path_attrs is None:
            invalid(
                "spec.resourceAttributes",
                '"null"',
                "exactly one of nonResourceAttributes or resourceAttributes must be specified",
            )
        elif local and path_attrs is not None:
            invalid("spec.nonResourceAttributes", '"object"', "disallowed on this kind of request")
        user, groups = spec.get("user") or "", spec.get("groups") or []
        if not user and not groups:
            invalid("spec.user", '""', "at least one of user or group must be specified")
        if causes:
            raise StatusError.invalid_causes(res.kind, "", res.group, causes)
        if local and ((attrs or {}).get("namespace") or "") != namespace:
            raise StatusError.bad_request(
                f"spec.resourceAttributes.namespace must match namespace: {namespace}"
            )
        return self._decide(_subject(str(user), tuple(str(g) for g in groups)), spec)

    def _rules_review(self, user: _User, namespace: str) -> dict[str, Any]:
        """A SelfSubjectRulesReview's status: the rules that apply to ``user`` in ``namespace``."""
        if user.rights == "all":
            star = {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}
            return {
                "resourceRules": [star],
                "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
                "incomplete": False,
            }
        rules = _rbac.rules_for(self.store, user.name, user.groups, namespace)
        if user.rights == "read":
            rules.insert(0, {"verbs": sorted(READ_VERBS), "apiGroups": ["*"], "resources": ["*"]})
        resource_rules = [
            {k: r[k] for k in ("verbs", "apiGroups", "resources", "resourceNames") if r.get(k)}
            for r in rules
            if r.get("resources")
        ]
        non_resource = [
            {"verbs": r.get("verbs") or [], "nonResourceURLs": r["nonResourceURLs"]}
            for r in rules
            if r.get("nonResourceURLs")
        ]
        return {
            "resourceRules": resource_rules,
            "nonResourceRules": non_resource,
            "incomplete": False,
        }

    def _openapi(self, req: HTTPRequest, segs: list[str]) -> Response:
        """``/openapi/v2`` (JSON, or protobuf when asked) and ``/openapi/v3[/<group-version>]``."""
        if req.method != "GET":
            raise StatusError.method_not_supported("openapi", req.method.lower())
        served = self.registry.served()
        if segs == ["v2"]:
            doc = _openapi.v2_document(served)
            if _openapi.V2_PROTOBUF_ACCEPT in req.headers.get("accept", ""):
                return Response(200, _openapi.encode_v2(doc), _openapi.V2_PROTOBUF)
            return _json_response(200, doc)
        if segs == ["v3"]:
            return _json_response(200, _openapi.v3_index(served))
        if len(segs) in (3, 4) and segs[0] == "v3":
            if segs[1] == "api" and len(segs) == 3:
                group, version = "", segs[2]
            elif segs[1] == "apis" and len(segs) == 4:
                group, version = segs[2], segs[3]
            else:
                raise StatusError.no_route()
            if not self.registry.has_group_version(group, version):
                raise StatusError.no_route()
            return _json_response(200, _openapi.v3_document(served, group, version))
        raise StatusError.no_route()

    def _discovery(
        self, req: HTTPRequest, doc: dict[str, Any] | None, *, core: bool | None = None
    ) -> Response:
        """A discovery document; ``/api`` (``core`` True) and ``/apis`` (False) aggregated
        when ``Accept`` asks for that first (see `mcruntime.envtest._discovery`)."""
        if doc is None:
            raise StatusError.no_route()
        if req.method != "GET":
            raise StatusError.method_not_supported("discovery", req.method.lower())
        version = None if core is None else aggregated_version(req.headers.get("accept", ""))
        if version is None or core is None:
            return _json_response(200, doc)
        body = aggregated_discovery(self.registry, version, core=core)
        return Response(200, _json.dumps(body), content_type=content_type(version))

    def _target(self, group: str, version: str, rest: list[str]) -> _Target:
        if not self.registry.has_group_version(group, version):
            raise StatusError.no_route()
        watch_path = False
        if rest and rest[0] == "watch":
            watch_path, rest = True, rest[1:]
        if not rest or not all(rest):
            raise StatusError.no_route()
        if len(rest) >= 3 and rest[0] == "namespaces":
            res = self.registry.get(group, version, rest[2])
            if res is not None and res.namespaced:
                if len(rest) > 5:
                    raise StatusError.no_route()
                return self._with_sub(_Target(res, rest[1], _at(rest, 3), _at(rest, 4), watch_path))
        res = self.registry.get(group, version, rest[0])
        if res is None or len(rest) > 3:
            raise StatusError.no_route()
        name = _at(rest, 1)
        if res.namespaced:
            if name is not None:
                raise StatusError.no_route()
            return _Target(res, None, None, None, watch_path)
        return self._with_sub(_Target(res, "", name, _at(rest, 2), watch_path))

    @staticmethod
    def _with_sub(t: _Target) -> _Target:
        sub = t.subresource
        if sub is None or (sub == "status" and t.res.has_status):
            return t
        if sub == "scale" and t.res.scale is not None:
            return t
        if sub == "token" and t.res.token_request:
            return t
        if sub == "approval" and t.res.approval:
            return t
        if sub == "eviction" and t.res.eviction:
            return t
        if sub == "binding" and t.res.binding:
            return t
        if sub in KUBELET_SUBRESOURCES and t.res.kubelet:
            return t
        if sub == EPHEMERAL and t.res.ephemeral_containers:
            return t
        if sub == FINALIZE and t.res.finalize:
            return t
        raise StatusError.no_route()

    # ----------------------------------------------------------------- verbs

    def _verb(
        self, req: HTTPRequest, t: _Target, check: WriteCheck | None = None
    ) -> Response | Stream | Awaitable[Response | Stream]:
        """Serve an authorized request on a resource path (``check``: see each write's result)."""
        res, name, method = t.res, t.name, req.method
        if t.subresource == "scale":
            return self._scale(req, t)
        if t.subresource == "token":
            return self._token_request(req, t)
        if t.subresource == "eviction":
            return self._evict(req, t)
        if t.subresource == "binding" or res.key == _BINDINGS:
            return self._bind(req, t)
        if t.subresource in KUBELET_SUBRESOURCES:
            return self._kubelet(req, t)
        if t.subresource == FINALIZE and method != "PUT":
            raise StatusError.method_not_supported(f"{res.qualified}/{FINALIZE}", method.lower())
        watching = t.watch_path or req.query.get("watch", "").lower() in _TRUE
        asked = negotiate(req.headers.get("accept", ""))
        if watching and method == "GET" and name is None:
            if (wanted := _watch_list_rv(req.query)) > self.store.rv:
                return self._when_fresh(wanted, lambda: self._watch(req, t, asked), watch=True)
            return self._watch(req, t, asked)
        if method == "GET" and (wanted := self._awaited_rv(req, t)) > self.store.rv:
            return self._when_fresh(wanted, lambda: self._verb(req, t, check))
        if self.conversion.wanted(req, res, watching):
            served = self.conversion.serve(req, t)
            if method == "GET" and asked is not None and asked.kind == TABLE:
                return self._converted_table(req, t, served, asked.api_version)
            return _metadata_only(served, asked, res.kind)
        if method != "GET":
            return _metadata_only(self._write(req, t, check), asked, res.kind)
        return self._read(req, t, asked)

    async def _converted_table(
        self, req: HTTPRequest, t: _Target, served: Awaitable[Response], api_version: str
    ) -> Response:
        """A get or list in a version the CRD's webhook converts to, as a Table: the
        converted objects in that version's printer columns, as kube-apiserver's table
        convertor prints them."""
        resp = await served
        body = _json.loads(resp.body)
        listed = t.name is None
        objs = body["items"] if listed else [body]
        meta = body.get("metadata") or {}
        list_meta = meta if listed else {"resourceVersion": meta.get("resourceVersion", "")}
        return _json_response(
            200,
            to_table(
                t.res,
                objs,
                api_version=api_version,
                include=include_policy(req.query),
                list_meta=list_meta,
            ),
        )

    def _read(self, req: HTTPRequest, t: _Target, asked: Target | None) -> Response:
        """A get or a list, as ``asked`` (a Table, metadata only, or None: the objects)."""
        res, ns, name = t.res, t.namespace, t.name
        table = asked.api_version if asked is not None and asked.kind == TABLE else None
        partial = asked if asked is not None and asked.kind != TABLE else None
        if name is None:
            listed = self._list(req, t)
            if table is not None:
                return _json_response(
                    200,
                    to_table(
                        res,
                        listed["items"],
                        api_version=table,
                        include=include_policy(req.query),
                        list_meta=listed["metadata"],
                    ),
                )
            if partial is not None:
                listed = transform(listed, partial, res.kind)
            return _json_response(200, listed)
        if t.watch_path:
            raise StatusError.method_not_supported(res.qualified, "watch")
        obj = self.store.get(res.key, ns or "", name)
        if obj is None:
            raise StatusError.not_found(res.qualified, name, res.group, res.plural)
        if table is not None and t.subresource in (None, "status"):  # status: the kind's columns
            return _json_response(
                200,
                to_table(
                    res,
                    [self._out(res, obj)],
                    api_version=table,
                    include=include_policy(req.query),
                    list_meta={"resourceVersion": obj["metadata"].get("resourceVersion", "")},
                ),
            )
        out = self._out(res, obj)
        return _json_response(200, out if partial is None else transform(out, partial, res.kind))

    def _write(
        self, req: HTTPRequest, t: _Target, check: WriteCheck | None
    ) -> Response | Awaitable[Response]:
        """A create, update, patch, delete or deletecollection."""
        res, ns, name, method = t.res, t.namespace, t.name, req.method
        verb = _METHOD_VERBS.get(method)
        if verb is None or t.watch_path:
            raise StatusError.method_not_supported(res.qualified, method.lower())
        if verb == "delete" and name is None:
            verb = "deletecollection"
        status = t.subresource in STATUS_SUBRESOURCES
        sub = t.subresource or ""
        if sub == EPHEMERAL and verb not in ("update", "patch"):
            raise StatusError.method_not_supported(f"{res.qualified}/{sub}", verb)
        dry_run = self._dry_run(req)
        view = view_of(res)
        if view is not None:
            return self._view_write(req, t, verb, dry_run, view)
        if (
            ns is not None
            and (name is None) == (verb == "create")
            and not (status and verb == "delete")
            and verb != "deletecollection"
            and self.admission.wanted(res)
        ):
            return self.admission.admit(req, res, verb, ns, name, sub, check)
        manager = _field_manager(req)
        if verb == "create":
            if name is not None or ns is None:
                raise StatusError.method_not_supported(res.qualified, "create")
            obj = self.objects.create(
                res, ns, self._body(req), dry_run=dry_run, manager=manager, check=check
            )
            return _json_response(201, self._out(res, obj))
        if verb == "deletecollection":
            if ns is None or verb not in res.verbs:
                raise StatusError.method_not_supported(res.qualified, "deletecollection")
            objs = list(self._matching(req, res, ns))
            if self.admission.wanted(res):
                return self.admission.admit_collection(req, res, objs)
            deleted = self.objects.delete_collection(
                res, ns, objs, self._delete_options(req), dry_run=dry_run
            )
            return _json_response(
                200,
                {
                    "kind": res.list_kind,
                    "apiVersion": res.api_version,
                    "metadata": {"resourceVersion": str(self.store.rv)},
                    "items": deleted,
                },
            )
        assert name is not None and ns is not None
        if verb == "update":
            # one that creates the absent object (CREATE_ON_UPDATE) answers 201
            existed = self.store.get(res.key, ns if res.namespaced else "", name) is not None
            obj = self.objects.update(
                res,
                ns,
                name,
                self._body(req),
                subresource=sub,
                dry_run=dry_run,
                manager=manager,
                check=check,
            )
            return _json_response(200 if existed else 201, self._out(res, obj))
        if verb == "patch":
            ct = req.headers.get("content-type", "")
            is_apply = req.media_type == APPLY
            existed = is_apply and self.store.get(res.key, ns, name) is not None
            obj = self.objects.patch(
                res,
                ns,
                name,
                ct,
                req.body,
                subresource=sub,
                dry_run=dry_run,
                manager=req.query.get("fieldManager") if is_apply else manager,
                force=_force(req),
                check=check,
            )
            return _json_response(201 if is_apply and not existed else 200, self._out(res, obj))
        if status:
            raise StatusError.method_not_supported(f"{res.qualified}/{t.subresource}", "delete")
        code, body = self.objects.delete(res, ns, name, self._delete_options(req), dry_run=dry_run)
        return _json_response(code, body)

    def _view_write(
        self, req: HTTPRequest, t: _Target, verb: str, dry_run: bool, view: View
    ) -> Response:
        """A write through a view (events.k8s.io/v1, autoscaling/v1 HPAs): done on the stored
        resource's objects, shown converted."""

        res, ns, name = t.res, t.namespace, t.name
        stored = self.registry.get(*view.storage)
        assert stored is not None
        manager, status = _field_manager(req), t.subresource == "status"
        if verb == "deletecollection":
            if ns is None:
                raise StatusError.method_not_supported(res.qualified, "deletecollection")
            objs = list(self._matching(req, res, ns))
            deleted = self.objects.delete_collection(stored, ns, objs, self._delete_options(req))
            return _json_response(
                200,
                {
                    "kind": res.list_kind,
                    "apiVersion": res.api_version,
                    "metadata": {"resourceVersion": str(self.store.rv)},
                    "items": [view.to_view(o) for o in deleted],
                },
            )
        if verb == "create":
            if name is not None or ns is None:
                raise StatusError.method_not_supported(res.qualified, "create")
            body = self._body(req)
            if not isinstance(body, dict):
                raise StatusError.bad_request("the body of the request must be a JSON object")
            self._check_api_version(res, body)
            obj = self.objects.create(
                stored,
                ns,
                view.to_storage(body),
                dry_run=dry_run,
                manager=manager,
                check=_view_check(view, None),
            )
            return _json_response(201, view.to_view(obj))
        assert name is not None and ns is not None
        if verb == "delete":
            code, out = self.objects.delete(
                stored, ns, name, self._delete_options(req), dry_run=dry_run
            )
            return _json_response(code, view.to_view(out) if out.get("kind") == res.kind else out)
        if verb == "update":
            body = self._body(req)
            if not isinstance(body, dict):
                raise StatusError.bad_request("the body of the request must be a JSON object")
            self._check_api_version(res, body)
        else:
            old = self.store.get(res.key, ns, name)
            if old is None:
                raise StatusError.not_found(res.qualified, name, res.group, res.plural)
            body = _builtin_patch(req, view.to_view(old), res.kind, name, res.group)
        before = self.store.get(stored.key, ns, name)
        obj = self.objects.update(
            stored,
            ns,
            name,
            view.to_storage(body),
            subresource="status" if status else "",
            dry_run=dry_run,
            manager=manager,
            check=_view_check(view, before),
        )
        return _json_response(200 if before is not None else 201, view.to_view(obj))

    @staticmethod
    def _check_api_version(res: ServedResource, body: dict[str, Any]) -> None:
        api_version = body.get("apiVersion")
        if api_version not in (None, "", res.api_version):
            raise StatusError.bad_request(
                f"the API version in the data ({api_version}) does not match the expected "
                f"API version ({res.api_version})"
            )

    def _scale(self, req: HTTPRequest, t: _Target) -> Response:
        """GET, PUT or PATCH ``.../{name}/scale`` (autoscaling/v1 Scale)."""

        res, ns, name = t.res, t.namespace or "", t.name
        assert name is not None
        verb = {"GET": "get", "PUT": "update", "PATCH": "patch"}.get(req.method)
        if verb is None or t.watch_path:
            raise StatusError.method_not_supported(res.qualified + "/scale", req.method.lower())
        obj = self.store.get(res.key, ns, name)
        if obj is None:
            raise StatusError.not_found(res.qualified, name, res.group, res.plural)
        current = to_scale(res, obj)
        if verb == "get":
            asked = negotiate(req.headers.get("accept", ""))
            if asked is not None and asked.kind == TABLE:  # kubectl get --subresource=scale
                include = include_policy(req.query)
                return _json_response(
                    200, scale_table(current, api_version=asked.api_version, include=include)
                )
            return _json_response(200, current)
        crd = self.store.get(CRDS, "", f"{res.plural}.{res.group}") if res.custom else None
        paths = replicas_paths(res, crd)
        if verb == "patch" and req.media_type == APPLY:
            manager = req.query.get("fieldManager")
            body = applied_configuration(req.body, name, manager)
            assert manager
            replicas, managed = apply_scale(res, paths, obj, body, manager, _force(req))
        else:
            if verb == "update":
                body = self._body(req)
            else:
                if _force(req):
                    raise non_apply_force()
                # a custom resource's scale takes no strategic merge patch, as its object
                accepted = _SCALE_PATCH_TYPES[res.custom]
                body = _builtin_patch(req, current, "Scale", name, "autoscaling", accepted)
            replicas = requested_replicas(res, name, body)
            managed = scale_managed_fields(res, paths, obj, replicas, _field_manager(req))
        rv = ((body.get("metadata") or {}) if isinstance(body, dict) else {}).get("resourceVersion")
        new = with_replicas(res, obj, replicas)
        new["metadata"] = {
            **obj["metadata"],
            "resourceVersion": rv or obj["metadata"]["resourceVersion"],
        }
        updated = self.objects.update(
            res, ns, name, new, dry_run=self._dry_run(req), managed_fields=managed
        )
        return _json_response(200, to_scale(res, updated))

    def _token_request(self, req: HTTPRequest, t: _Target) -> Response:
        """``POST .../serviceaccounts/{name}/token``: a token for the service account (TokenRequest)."""
        ns, name = t.namespace or "", t.name
        assert name is not None
        if req.method != "POST":
            raise StatusError.method_not_supported("serviceaccounts/token", req.method.lower())
        body = self._body(req)
        if not isinstance(body, dict) or body.get("kind") not in (None, "", "TokenRequest"):
            raise StatusError.bad_request("the request body is not a TokenRequest")
        spec = dict(body.get("spec") or {})
        seconds = spec.get("expirationSeconds")
        seconds = TOKEN_SECONDS if seconds is None else seconds
        field = "spec.expirationSeconds"
        if not isinstance(seconds, int) or isinstance(seconds, bool):
            raise StatusError.bad_request(f"{field}: the value {seconds!r} is not an integer")
        if seconds < MIN_TOKEN_SECONDS:
            why = "may not specify a duration less than 10 minutes"
        elif seconds > 1 << 32:
            why = "may not specify a duration larger than 2^32 seconds"
        else:
            why = ""
        if why:
            raise StatusError.invalid(
                "TokenRequest",
                "",
                "authentication.k8s.io",
                field,
                f"Invalid value: {seconds}: {why}",
            )
        sa = self.store.get(_SERVICE_ACCOUNTS, ns, name)
        if sa is None:
            raise StatusError.not_found("serviceaccounts", name, "", "serviceaccounts")
        bound = self._bound_object(name, ns, spec.get("boundObjectRef"))
        spec["audiences"] = list(spec.get("audiences") or [ISSUER])
        spec["expirationSeconds"] = seconds
        token, expires = self.tokens.issue(sa, spec["audiences"], seconds, bound)
        out = {
            "kind": "TokenRequest",
            "apiVersion": "authentication.k8s.io/v1",
            "metadata": {**(body.get("metadata") or {}), "name": name, "namespace": ns},
            "spec": spec,
            "status": {"token": token, "expirationTimestamp": rfc3339(expires)},
        }
        return _json_response(201, out)

    def _evict(self, req: HTTPRequest, t: _Target) -> Response | Awaitable[Response]:
        """``POST .../pods/{name}/eviction``: a policy/v1 Eviction of the pod (`_eviction`),
        admitted as a CREATE of ``pods/eviction`` when webhooks are registered."""
        res, ns, name = t.res, t.namespace or "", t.name
        assert name is not None
        if req.method != "POST" or t.watch_path:
            raise StatusError.method_not_supported("pods/eviction", req.method.lower())
        eviction = eviction_body(ns, self._body(req))
        dry_run = self._dry_run(req)
        if not self.admission.wanted(res):
            options = delete_options(name, eviction, dry_run)
            return _json_response(201, self.evictions.evict(ns, name, options))
        admission = self.admission

        async def admitted() -> Response:
            options = await admission.admit_create(
                res,
                "eviction",
                EVICTION_KIND,
                ns,
                name,
                eviction,
                dry_run,
                lambda body: delete_options(name, body, dry_run),
            )
            return _json_response(201, self.evictions.evict(ns, name, options))

        return admitted()

    def _kubelet(self, req: HTTPRequest, t: _Target) -> Response | Awaitable[Response]:
        """``.../pods/{name}/log``, ``exec``, ``attach`` and ``portforward``: what
        kube-apiserver answers before it would reach the pod's kubelet (`_kubelet`); the
        connected ones admitted as a CONNECT when webhooks are registered."""
        sub, ns, name = t.subresource or "", t.namespace or "", t.name
        assert name is not None
        if req.method not in (("GET", "POST") if sub in CONNECTED else ("GET",)) or t.watch_path:
            raise StatusError.method_not_supported(f"pods/{sub}", req.method.lower())
        opts = connect_options(sub, req.raw_query)
        store = self.store

        def answered() -> Response:
            answer(store, ns, name, sub, opts)  # raises unless the log is empty
            return Response(204, b"", content_type="")

        if sub not in CONNECTED or not self.admission.wanted(t.res):
            return answered()
        admission = self.admission

        async def admitted() -> Response:
            await admission.admit_connect(t.res, sub, ns, name, opts)
            return answered()

        return admitted()

    def _bind(self, req: HTTPRequest, t: _Target) -> Response | Awaitable[Response]:
        """``POST .../pods/{name}/binding``, or the older ``POST .../bindings`` naming the pod
        in its body: a v1 Binding assigns the pod to a node (`_binding`), admitted as a CREATE
        of ``pods/binding`` (``bindings``) when webhooks are registered."""
        res, ns, name = t.res, t.namespace or "", t.name
        if req.method != "POST" or t.watch_path or (name is None) != (res.key == _BINDINGS):
            raise StatusError.method_not_supported(
                "bindings" if res.key == _BINDINGS else "pods/binding", req.method.lower()
            )
        binding = binding_body(ns, self._body(req))
        if name is None:
            name = str((binding.get("metadata") or {}).get("name") or "")
        dry_run = self._dry_run(req)
        if not self.admission.wanted(res):
            return _json_response(201, bind(self.store, ns, check_binding(name, binding), dry_run))
        admission = self.admission

        async def admitted() -> Response:
            checked = await admission.admit_create(
                res,
                "" if res.key == _BINDINGS else "binding",
                BINDING_KIND,
                ns,
                name,
                binding,
                dry_run,
                lambda mutated: check_binding(name, mutated),
            )
            return _json_response(201, bind(self.store, ns, checked, dry_run))

        return admitted()

    def _bound_object(
        self, sa_name: str, ns: str, ref: dict[str, Any] | None
    ) -> dict[str, Any] | None:
        """The Pod, Secret or Node a TokenRequest binds its token to, checked as kube-apiserver does."""
        if not ref:
            return None
        kind, api_version = ref.get("kind") or "", ref.get("apiVersion") or ""
        key = _BINDABLE.get(kind) if api_version in ("", "v1") else None
        if key is None:
            raise StatusError.bad_request(
                f"cannot bind token to object of type {api_version}, Kind={kind}"
            )
        name = ref.get("name") or ""
        obj = self.store.get(key, "" if kind == "Node" else ns, name)
        if obj is None:
            raise StatusError.not_found(key[1], name, "", key[1])
        if kind == "Pod" and (obj.get("spec") or {}).get("serviceAccountName") != sa_name:
            raise StatusError.bad_request(
                f'cannot bind token for serviceaccount "{sa_name}" to pod running with '
                "different serviceaccount name."
            )
        uid = ref.get("uid")
        if uid and uid != obj["metadata"]["uid"]:
            raise StatusError.conflict(
                kind,
                name,
                "",
                key[1],
                f"the UID in the bound object reference ({uid}) does not match the UID in "
                "record. The object might have been deleted and then recreated",
            )
        return {**obj, "kind": kind}

    @staticmethod
    def _out(res: ServedResource, obj: dict[str, Any]) -> dict[str, Any]:
        view = view_of(res)
        if view is not None:
            return view.to_view(obj)
        return in_version(obj, res.api_version, res.schema, res.custom, res.read_defaults)

    @staticmethod
    def _body(req: HTTPRequest) -> Any:
        ct = req.media_type
        if ct not in ("application/json", "", "*/*", "application/yaml", _protobuf.CONTENT_TYPE):
            raise StatusError.unsupported_media_type(BODY_MEDIA_TYPES)
        if not req.body:
            raise StatusError.bad_request("the request body is empty")
        if ct == _protobuf.CONTENT_TYPE:
            try:
                return _protobuf.decode(req.body)
            except _protobuf.UnsupportedKind:
                # custom resources are JSON and YAML only, as on kube-apiserver
                raise StatusError.unsupported_media_type(BODY_MEDIA_TYPES) from None
            except ValueError as e:
                raise StatusError.bad_request(
                    f"error decoding protobuf request body: {e}"
                ) from None
        if ct == "application/yaml":
            import yaml

            try:
                return yaml.safe_load(req.body)
            except yaml.YAMLError as e:
                raise StatusError.bad_request(f"error decoding YAML request body: {e}") from None
        try:
            return _json.loads(req.body)
        except _json.JSONDecodeError as e:
            raise StatusError.bad_request(f"error decoding request body: {e}") from None

    @classmethod
    def _dry_run(cls, req: HTTPRequest) -> bool:
        """``dryRun=All`` in the query, or for a DELETE in its DeleteOptions body (as kubectl
        ``delete --dry-run=server`` sends it)."""
        value = req.query.get("dryRun")
        values = [value] if value else []
        if req.method == "DELETE":
            body = cls._delete_options(req).get("dryRun") or []
            values += [body] if isinstance(body, str) else list(body)
        for v in values:
            if v != "All":
                raise StatusError.bad_request(
                    f'dryRun: Unsupported value: "{v}": supported values: "All"'
                )
        return bool(values)

    @staticmethod
    def _delete_options(req: HTTPRequest) -> dict[str, Any]:
        opts: dict[str, Any] = {}
        ct = req.media_type
        if req.body and ct == _protobuf.CONTENT_TYPE:
            try:
                opts.update(_protobuf.decode(req.body))
            except ValueError as e:
                raise StatusError.bad_request(f"error decoding DeleteOptions: {e}") from None
        elif req.body and req.body.strip():
            try:
                body = _json.loads(req.body)
            except _json.JSONDecodeError as e:
                raise StatusError.bad_request(f"error decoding DeleteOptions: {e}") from None
            if isinstance(body, dict):
                opts.update(body)
        q = req.query
        if "propagationPolicy" in q:
            opts["propagationPolicy"] = q["propagationPolicy"]
        if q.get("orphanDependents", "").lower() in _TRUE:
            opts["orphanDependents"] = True
        if "gracePeriodSeconds" in q:
            try:
                opts["gracePeriodSeconds"] = int(q["gracePeriodSeconds"])
            except ValueError:
                raise StatusError.bad_request(
                    f"invalid gracePeriodSeconds: {q['gracePeriodSeconds']!r}"
                ) from None
        return opts

    # ----------------------------------------------------------------- list / watch

    def _selectors(
        self, req: HTTPRequest, res: ServedResource
    ) -> tuple[LabelSelector | None, FieldSelector | None]:
        from mcruntime import _selectors

        q = req.query
        labels = fields = None
        try:
            if q.get("labelSelector"):
                labels = _selectors.LabelSelector.parse(q["labelSelector"])
        except _selectors.SelectorError as e:  # the parser's error, in kube-apiserver's words
            raise StatusError.bad_request(e.kube) from None
        if q.get("fieldSelector"):
            try:
                terms = _selectors.field_terms_as_kube(q["fieldSelector"])
            except _selectors.SelectorError as e:
                raise StatusError.bad_request(e.kube) from None
            for field, _op, _value in terms:
                if field not in res.fields:
                    raise StatusError.bad_request(_field_not_supported(res, field))
            if terms:
                fields = _field_labels.converted(res, _selectors.FieldSelector(terms))
        return labels, fields

    def _matching(self, req: HTTPRequest, res: ServedResource, ns: str | None) -> Any:
        labels, fields = self._selectors(req, res)
        store_ns = ns if res.namespaced else ""
        for obj in self.store.iter(res.key, store_ns):
            if labels is not None and not labels.matches(obj["metadata"].get("labels") or {}):
                continue
            out = self._out(res, obj)
            if fields is not None and not fields.matches(_field_labels.selectable(res, out)):
                continue
            yield obj

    def _list(self, req: HTTPRequest, t: _Target) -> dict[str, Any]:
        res, q = t.res, req.query
        _check_list_options(q, watch=False)
        labels, fields = self._selectors(req, res)
        limit = _limit(q)
        list_rv = self.store.rv
        after: tuple[str, str] | None = None
        token = q.get("continue")
        if token:
            list_rv, after = self._decode_continue(token)
        elif _at_revision(q, rv := _list_rv(q)):
            # read from etcd at that revision (etcd3 store's GetList ranges at it and stamps
            # the list with it), also a page of the legacy match (a limit, no match)
            if rv > self.store.rv:  # etcd's answer (kube-apiserver 1.34 and later)
                raise StatusError.too_large_resource_version(rv, self.store.rv, 0)
            if rv < self.store.rv:
                if self.store.events_since(rv) is None:  # compacted (etcd3's ErrCompacted)
                    raise StatusError.expired(
                        "The resourceVersion for the provided list is too old."
                    )
                list_rv = rv
        elif q.get("resourceVersion") == "0":
            # the watch cache serves it whole: it ignores a limit at resourceVersion 0
            # (cacher's computeListLimit), so no page and no continue token
            limit = 0
        items: list[dict[str, Any]] = []
        more = False
        store_ns = t.namespace if res.namespaced else ""
        snapshot = iter(self._snapshot(res, store_ns, list_rv))
        for obj in snapshot:
            meta = obj["metadata"]
            if after is not None and (meta.get("namespace", ""), meta["name"]) <= after:
                continue
            if labels is not None and not labels.matches(meta.get("labels") or {}):
                continue
            obj = self._out(res, obj)
            if fields is not None and not fields.matches(_field_labels.selectable(res, obj)):
                continue
            if limit and len(items) == limit:
                more = True
                break
            items.append(obj)
        meta_out: dict[str, Any] = {"resourceVersion": str(list_rv)}
        if more:
            last = items[-1]["metadata"]
            raw = _json.dumps([list_rv, last.get("namespace", ""), last["name"]])
            meta_out["continue"] = base64.urlsafe_b64encode(raw).decode()
            if labels is None and fields is None:
                # the etcd3 store counts what follows the page when nothing is filtered out
                meta_out["remainingItemCount"] = 1 + sum(1 for _ in snapshot)
        return {
            "kind": res.list_kind,
            "apiVersion": res.api_version,
            "metadata": meta_out,
            "items": items,
        }

    def _snapshot(
        self, res: ServedResource, store_ns: str | None, rv: int
    ) -> Iterable[dict[str, Any]]:
        """The objects as they were at ``rv`` (sorted), rebuilt by undoing later events."""
        if rv >= self.store.rv:
            return self.store.iter(res.key, store_ns)
        events = self.store.events_since(rv)
        if events is None:
            raise StatusError.expired(
                "The provided continue parameter is too old to display a consistent list result. "
                "You can start a new list without the continue parameter."
            )
        relevant = [
            ev
            for ev in events
            if ev.key == res.key and (store_ns is None or ev.namespace == store_ns)
        ]
        if not relevant:
            return self.store.iter(res.key, store_ns)
        snap = {
            (o["metadata"].get("namespace", ""), o["metadata"]["name"]): o
            for o in self.store.iter(res.key, store_ns)
        }
        for ev in reversed(relevant):
            k = (ev.namespace, ev.obj["metadata"]["name"])
            if ev.type == "ADDED" or ev.old is None:
                snap.pop(k, None)
            else:
                snap[k] = ev.old
        return [snap[k] for k in sorted(snap)]

    def _decode_continue(self, token: str) -> tuple[int, tuple[str, str]]:
        try:
            rv, ns, name = _json.loads(base64.urlsafe_b64decode(token.encode()))
            rv = int(rv)
            if not isinstance(ns, str) or not isinstance(name, str):
                raise ValueError
        except (ValueError, TypeError, binascii.Error, _json.JSONDecodeError):
            raise StatusError.bad_request("continue key is not valid") from None
        if rv < self.store.compacted_rv:
            raise StatusError.expired(
                "The provided continue parameter is too old to display a consistent list result. "
                "You can start a new list without the continue parameter."
            )
        return rv, (ns, name)

    def _watch(self, req: HTTPRequest, t: _Target, asked: Target | None = None) -> Stream:
        res, q = t.res, req.query
        _check_list_options(q, watch=True)
        table = asked.api_version if asked is not None and asked.kind == TABLE else None
        metadata = asked.api_version if asked is not None and asked.kind == PARTIAL else None
        # metadata is the same in every version: a metadata-only watch converts nothing
        watcher = Watcher if metadata is not None else self.conversion.watcher_class(res)
        labels, fields = self._selectors(req, res)
        try:
            timeout = float(q["timeoutSeconds"]) if q.get("timeoutSeconds") else None
        except ValueError:
            raise StatusError.bad_request(
                f"invalid timeoutSeconds: {q['timeoutSeconds']!r}"
            ) from None
        if timeout is not None and timeout <= 0:
            timeout = None
        bookmarks = q.get("allowWatchBookmarks", "").lower() in _TRUE
        rv = q.get("resourceVersion", "")
        send_initial = q.get("sendInitialEvents", "").lower() in _TRUE
        w = watcher(
            self.store,
            res,
            t.namespace if res.namespaced else None,
            labels,
            fields,
            bookmarks=bookmarks,
            bookmark_interval=self.server.bookmark_interval,
            timeout=timeout,
            table=_table_rows(res, table, include_policy(q)) if table is not None else None,
            metadata=metadata,
            view=view.to_view if (view := view_of(res)) is not None else None,
        )
        if send_initial or (rv in ("", "0") and "sendInitialEvents" not in q):
            store_ns = t.namespace if res.namespaced else ""
            w.initial(list(self.store.iter(res.key, store_ns)))
            if send_initial and bookmarks:
                w.buf.append(w.bookmark({"k8s.io/initial-events-end": "true"}))
        elif rv in ("", "0"):
            pass  # sendInitialEvents=false: from now on, no synthetic ADDED events
        else:
            try:
                since = int(rv)
            except ValueError:
                raise StatusError.bad_request(f"invalid resource version: {rv!r}") from None
            events = self.store.events_since(since)
            if events is None:
                return _ErrorStream(
                    StatusError.expired(
                        f"too old resource version: {since} ({self.store.compacted_rv})"
                    )
                )
            for ev in events:
                if ev.key == res.key:
                    w.offer(ev)
            w.after = since
        self.store.add_watcher(w)
        return w


def _field_manager(req: HTTPRequest) -> str:
    """The ``fieldManager`` of a write; by default the user agent up to its first "/"."""
    manager = req.query.get("fieldManager")
    if manager:
        if len(manager) > 128:
            raise StatusError.invalid(
                "PatchOptions",
                "",
                "meta.k8s.io",
                "fieldManager",
                f'Too long: may not be more than 128 bytes: "{manager}"',
            )
        return manager
    agent = req.headers.get("user-agent", "")
    return agent.split("/", 1)[0][:128] or "unknown"


def _force(req: HTTPRequest) -> bool:
    value = req.query.get("force", "")
    if value and value.lower() not in ("true", "false", "1", "0"):
        raise StatusError.bad_request(f'force: Invalid value: "{value}"')
    return value.lower() in _TRUE


def _builtin_patch(
    req: HTTPRequest,
    current: Any,
    kind: str,
    name: str,
    group: str,
    accepted: tuple[str, ...] = BUILTIN_PATCH_TYPES,
) -> Any:
    """``current`` with the request's JSON, merge or strategic merge patch applied: the writes
    through a /scale subresource or a view, which the object layer's patch does not serve
    (415 naming ``accepted``, kube-apiserver's list for the resource, for any other type)."""
    from mcruntime import _patch

    ct = req.media_type
    if ct not in accepted:
        raise StatusError.unsupported_patch_type(list(accepted))
    try:
        patch = _json.loads(req.body)
    except _json.JSONDecodeError as e:
        raise StatusError.bad_request(f"error decoding patch: {e}") from None
    if ct == "application/json-patch+json":
        return json_patch(current, patch)
    try:
        if ct == "application/merge-patch+json" and isinstance(patch, dict):
            return _patch.merge_patch(current, patch)
        if ct == "application/strategic-merge-patch+json" and isinstance(patch, dict):
            return _patch.strategic_merge_patch(current, patch)
    except _patch.PatchError as e:
        raise patch_failed(e, kind, name, group) from None
    raise StatusError.unsupported_patch_type(list(accepted))


def _field_not_supported(res: ServedResource, field: str) -> str:
    """kube-apiserver's refusal of a field selector on ``field``: a kind with field labels
    of its own (a custom resource too) refuses it in its conversion function's words, any
    other kind in those of apimachinery's default conversion."""
    if res.custom or res.fields != BASE_FIELDS:
        return f"field label not supported: {field}"
    return (
        f"{go_string(field)} is not a known field selector: only "
        f"{go_string('metadata.name')}, {go_string('metadata.namespace')}"
    )


def _denied(a: _rbac.Attributes, user: str) -> StatusError:
    """403 for ``user`` asking what ``a`` describes, in kube-apiserver's words."""
    qualified = f"{a.resource}.{a.group}" if a.group else a.resource
    scope = f'in the namespace "{a.namespace}"' if a.namespace else "at the cluster scope"
    resource = f"{a.resource}/{a.subresource}" if a.subresource else a.resource
    subject = f'{qualified} "{a.name}"' if a.name else qualified
    return StatusError.forbidden(
        f'{subject} is forbidden: User "{user}" cannot {a.verb} resource "{resource}" '
        f'in API group "{a.group}" {scope}',
        a.name,
        a.group,
        a.resource,
    )


def _request_verb(req: HTTPRequest, t: _Target) -> str:
    """The authorizer's verb of a request: get, list, watch, create, update, patch, delete, ..."""
    method = req.method
    if method == "GET":
        if t.watch_path or (t.name is None and req.query.get("watch", "").lower() in _TRUE):
            return "watch"
        return "get" if t.name is not None else "list"
    if method == "DELETE" and t.name is None:
        return "deletecollection"
    return _METHOD_VERBS.get(method, method.lower())


def _attributes(t: _Target, verb: str, field_selector: str | None = None) -> _rbac.Attributes:
    """What the authorizer is asked; a list or watch whose field selector requires one
    ``metadata.name`` is asked for that name, as kube-apiserver's request info does, so a
    rule's ``resourceNames`` can allow it (an informer of one object)."""
    name = t.name or ""
    if not name and verb in ("list", "watch") and field_selector:
        name = _selected_name(field_selector)
    return _rbac.Attributes(
        verb, t.res.group, t.res.plural, t.subresource or "", t.namespace or "", name
    )


def _selected_name(field_selector: str) -> str:
    """The name a field selector requires (``metadata.name=x``), "" when none or unparsable."""
    from mcruntime._selectors import EQUALS, FieldSelector, SelectorError

    try:
        requirements = FieldSelector.parse(field_selector).requirements
    except SelectorError:
        return ""  # the request itself answers 400
    for field, op, value in requirements:
        if field == "metadata.name" and op == EQUALS and not name_problems(value, "path"):
            return value
    return ""


def _metadata_only(
    result: Response | Awaitable[Response], asked: Target | None, type_name: str
) -> Response | Awaitable[Response]:
    """``result``'s object or list as ``asked`` (PartialObjectMetadata or its list), once it is there."""
    if asked is None or asked.kind == TABLE:
        return result
    if inspect.isawaitable(result):
        pending = result

        async def transformed() -> Response:
            return _transformed(await pending, asked, type_name)

        return transformed()
    return _transformed(result, asked, type_name)


def _transformed(resp: Response, asked: Target, type_name: str) -> Response:
    if not 200 <= resp.status < 300 or not resp.body or resp.content_type != "application/json":
        return resp
    body = transform_body(resp.body, asked, type_name)
    return Response(resp.status, body, resp.content_type, resp.headers)


def _table_rows(res: ServedResource, api_version: str, include: str) -> Any:
    """A watch's object transform into one-row Tables; only the first carries the columns."""
    first = [True]

    def transform(obj: dict[str, Any]) -> dict[str, Any]:
        headers, first[0] = first[0], False
        return to_table(res, [obj], api_version=api_version, include=include, headers=headers)

    return transform


def _at(seq: list[str], i: int) -> str | None:
    return seq[i] if len(seq) > i else None


def _kind_of(res: ServedResource) -> dict[str, str]:
    return {"kind": res.kind, "apiVersion": res.api_version}


def _view_check(view: View, old: dict[str, Any] | None) -> WriteCheck | None:
    """The check of a write through ``view`` of an object (``old``: the one it updates)."""
    check = view.check
    if check is None:
        return None
    return lambda new: check(new, old)
