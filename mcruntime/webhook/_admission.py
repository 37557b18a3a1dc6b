"""Admission: the ``admission.k8s.io/v1`` AdmissionReview, requests, responses and the handler protocol.

An [`AdmissionHandler`][mcruntime.webhook.AdmissionHandler] takes an
[`AdmissionRequest`][mcruntime.webhook.AdmissionRequest] (which names the
cluster that sent it) and returns an
[`AdmissionResponse`][mcruntime.webhook.AdmissionResponse]; the server turns it
into the review the API server reads. Mutations travel as an RFC 6902 JSON
patch computed from the handler's changes ([`patched`][mcruntime.webhook.patched]).
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from mcruntime import _json, _patch
from mcruntime._callables import refuse_coroutine_function

__all__ = [
    "ADMISSION_API_VERSION",
    "AdmissionHandler",
    "AdmissionRequest",
    "AdmissionResponse",
    "Denied",
    "allowed",
    "denied",
    "errored",
    "patched",
]

ADMISSION_API_VERSION = "admission.k8s.io/v1"


class Denied(Exception):  # noqa: N818 (a verdict, named as controller-runtime's admission.Denied)
    """Raise from a validator or defaulter to refuse the request; the API server shows ``message``.

    ``code`` is the HTTP status reported to the client (403 Forbidden by
    default; 422 for invalid objects is common); ``reason`` a machine-readable
    reason such as ``"Invalid"``, by default ``"Forbidden"`` for a 403 as
    controller-runtime's ``admission.Denied`` gives (kubectl then says
    `Error from server (Forbidden)`). ``warnings`` reach the client with the refusal
    (kubectl prints each as `Warning: ...`), as a controller-runtime validator's warnings
    returned with its error do.
    """

    def __init__(
        self,
        message: str,
        *,
        code: int = 403,
        reason: str = "",
        warnings: Sequence[str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.reason = _reason(code, reason)
        self.warnings = list(warnings or ())


@dataclass(frozen=True)
class AdmissionRequest:
    """One admission request, as the API server sent it, plus the cluster that sent it.

    ``cluster_name`` is ``""`` for the manager's own (local) cluster. ``obj`` is
    the object being admitted (``None`` for DELETE), ``old_object`` the stored
    one (UPDATE and DELETE). ``raw`` is the whole ``request`` member.

    ``kind`` and ``resource`` are the version the object is sent in: the
    webhook's own. With ``matchPolicy: Equivalent`` the request may have been
    made in another version of the same resource, which ``request_kind``,
    ``request_resource`` and ``request_sub_resource`` name (the same as ``kind``,
    ``resource`` and ``sub_resource`` otherwise).
    """

    cluster_name: str
    uid: str
    operation: str  # CREATE, UPDATE, DELETE, CONNECT
    kind: dict[str, str]
    resource: dict[str, str]
    name: str = ""
    namespace: str = ""
    sub_resource: str = ""
    obj: dict[str, Any] | None = None
    old_object: dict[str, Any] | None = None
    dry_run: bool = False
    user_info: dict[str, Any] = field(default_factory=dict)
    options: dict[str, Any] | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False)
    request_kind: dict[str, str] = field(default_factory=dict)
    request_resource: dict[str, str] = field(default_factory=dict)
    request_sub_resource: str = ""

    @classmethod
    def from_review(cls, review: Any, cluster_name: str = "") -> AdmissionRequest:
        """Read an AdmissionReview; ValueError names what is missing or malformed."""
        if not isinstance(review, dict):
            raise ValueError("the body is not a JSON object")
        if review.get("apiVersion") != ADMISSION_API_VERSION or review.get("kind") != (
            "AdmissionReview"
        ):
            raise ValueError(
                f"expected apiVersion {ADMISSION_API_VERSION} kind AdmissionReview, got "
                f"{review.get('apiVersion')!r} {review.get('kind')!r}"
            )
        req = review.get("request")
        if not isinstance(req, dict):
            raise ValueError("the AdmissionReview has no request")
        uid = req.get("uid")
        if not isinstance(uid, str) or not uid:
            raise ValueError("the AdmissionReview request has no uid")
        op = req.get("operation")
        if op not in ("CREATE", "UPDATE", "DELETE", "CONNECT"):
            raise ValueError(f"unknown operation {op!r}")
        for member in ("object", "oldObject", "kind", "resource", "requestKind"):
            if req.get(member) is not None and not isinstance(req[member], dict):
                raise ValueError(f"request.{member} is not a JSON object")
        for member in ("requestResource", "userInfo", "options"):
            if req.get(member) is not None and not isinstance(req[member], dict):
                raise ValueError(f"request.{member} is not a JSON object")
        for member in ("name", "namespace", "subResource", "requestSubResource"):
            if req.get(member) is not None and not isinstance(req[member], str):
                raise ValueError(f"request.{member} is not a string")
        if req.get("dryRun") is not None and not isinstance(req["dryRun"], bool):
            raise ValueError("request.dryRun is not a boolean")
        kind = dict(req.get("kind") or {})
        resource = dict(req.get("resource") or {})
        sub_resource = req.get("subResource") or ""
        return cls(
            cluster_name=cluster_name,
            uid=uid,
            operation=op,
            kind=kind,
            resource=resource,
            name=req.get("name") or "",
            namespace=req.get("namespace") or "",
            sub_resource=sub_resource,
            obj=req.get("object"),
            old_object=req.get("oldObject"),
            dry_run=bool(req.get("dryRun")),
            user_info=dict(req.get("userInfo") or {}),
            options=req.get("options"),
            raw=req,
            request_kind=dict(req.get("requestKind") or kind),
            request_resource=dict(req.get("requestResource") or resource),
            request_sub_resource=req.get("requestSubResource") or sub_resource,
        )


@dataclass
class AdmissionResponse:
    """The verdict on one request: allowed or not, why, warnings, and a JSON patch for mutations."""

    allowed: bool
    message: str = ""
    code: int = 0
    reason: str = ""
    patch: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def review(self, uid: str) -> dict[str, Any]:
        """The AdmissionReview answering request ``uid``."""
        resp: dict[str, Any] = {"uid": uid, "allowed": self.allowed}
        if self.message or self.code or not self.allowed:
            status: dict[str, Any] = {"code": self.code or (200 if self.allowed else 403)}
            if self.message:
                status["message"] = self.message
            if self.reason:
                status["reason"] = self.reason
            if not self.allowed:
                status["status"] = "Failure"
            resp["status"] = status
        if self.patch and self.allowed:
            resp["patchType"] = "JSONPatch"
            resp["patch"] = base64.b64encode(_json.dumps(self.patch)).decode()
        if self.warnings:
            resp["warnings"] = list(self.warnings)
        return {"apiVersion": ADMISSION_API_VERSION, "kind": "AdmissionReview", "response": resp}


def allowed(message: str = "", warnings: Sequence[str] | None = None) -> AdmissionResponse:
    """Allow the request unchanged."""
    return AdmissionResponse(True, message, warnings=list(warnings or ()))


def denied(
    message: str, *, code: int = 403, reason: str = "", warnings: Sequence[str] | None = None
) -> AdmissionResponse:
    """Refuse the request; the API server returns ``message`` (and ``code``) to its client
    (``reason`` as for `Denied`)."""
    return AdmissionResponse(
        False, message, code, _reason(code, reason), warnings=list(warnings or ())
    )


def _reason(code: int, reason: str) -> str:
    return reason or ("Forbidden" if code == 403 else "")


def errored(code: int, message: str) -> AdmissionResponse:
    """Refuse because the request could not be handled (bad request, handler failure, timeout)."""
    return AdmissionResponse(False, message, code)


def patched(
    original: dict[str, Any], modified: dict[str, Any], warnings: Sequence[str] | None = None
) -> AdmissionResponse:
    """Allow the request with the changes from ``original`` to ``modified`` as a JSON patch."""
    return AdmissionResponse(
        True, patch=_patch.create_json_patch(original, modified), warnings=list(warnings or ())
    )


@runtime_checkable
class AdmissionHandler(Protocol):
    """Decides on admission requests: ``handle(request) -> AdmissionResponse``.

    Called from the webhook server's handler threads, concurrently for
    different requests, for every cluster the handler is served for; it must
    be thread-safe and should return within the server's request timeout.
    Raising [`Denied`][mcruntime.webhook.Denied] refuses the request with its
    message; any other exception refuses it with an internal error (logged).
    """

    def handle(self, request: AdmissionRequest, /) -> AdmissionResponse: ...


def refuse_async(fn: Any, what: str) -> None:
    """Refuse an ``async def`` where the webhook server calls a function for its answer."""
    refuse_coroutine_function(
        fn,
        what,
        "the webhook server calls it on a thread of its own and answers with what it "
        "returns: pass a plain function (def)",
    )


class FuncHandler:
    """An [`AdmissionHandler`][mcruntime.webhook.AdmissionHandler] made of a function."""

    def __init__(self, fn: Callable[[AdmissionRequest], AdmissionResponse]) -> None:
        refuse_async(fn, "the admission handler")
        self.fn = fn

    def handle(self, request: AdmissionRequest) -> AdmissionResponse:
        return self.fn(request)


def as_handler(handler: Any) -> AdmissionHandler:
    """An AdmissionHandler from a handler object or a plain function."""
    if isinstance(handler, AdmissionHandler):
        refuse_async(handler.handle, "the admission handler's handle")
        return handler
    if callable(handler):
        return FuncHandler(handler)
    raise TypeError(
        f"{type(handler).__name__} is not an admission handler: give an object with "
        "handle(request) or a function taking the request"
    )
