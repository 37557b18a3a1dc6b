"""The mcruntime error hierarchy: every error the library raises derives from [`MCRuntimeError`][mcruntime.errors.MCRuntimeError].

API errors are values with helpers (``is_not_found``, ``ignore_not_found``), so
callers branch on types, never on message strings.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import Any, NamedTuple, overload

from mcruntime import _json
from mcruntime._local import display_name

__all__ = [
    "MCRuntimeError",
    "APIError",
    "NotFound",
    "AlreadyExists",
    "Conflict",
    "FieldConflict",
    "Invalid",
    "Gone",
    "Forbidden",
    "Unauthorized",
    "BadRequest",
    "MethodNotSupported",
    "UnsupportedMediaType",
    "TooManyRequests",
    "ServerError",
    "Unreachable",
    "DeadlineExceeded",
    "ClusterNotAnswering",
    "NoKindMatch",
    "ObjectNotTyped",
    "SelectorError",
    "ConfigError",
    "CredentialError",
    "NotKubernetesAnswer",
    "ClusterNotFound",
    "ClusterLeft",
    "FleetNotKnown",
    "ListenError",
    "GracePeriodExceeded",
    "ignore_not_found",
    "is_not_found",
    "is_conflict",
    "is_already_exists",
    "has_status_cause",
    "NAMESPACE_TERMINATING",
]


class MCRuntimeError(Exception):
    """Root of every error mcruntime raises.

    ``parts`` are the errors one made of several is made of (a
    [`FinalizeError`][mcruntime.finalizer.FinalizeError]'s cleanups'), each its own
    failure, as an ``ExceptionGroup``'s: a reconcile failing with one whose parts each
    are of a cluster not answering waits for those clusters, as it would for them alone.
    """

    #: the errors it is made of (none: it is one failure)
    parts: tuple[BaseException, ...] = ()


class APIError(MCRuntimeError):
    """The API server answered with an error ``Status``.

    ``status`` is the HTTP code, ``reason``/``message``/``details`` come from
    the Status body; ``cluster_name`` names the cluster when known.
    """

    default_status: int = 500

    def __init__(
        self,
        message: str = "",
        *,
        status: int | None = None,
        reason: str = "",
        details: dict[str, Any] | None = None,
        cluster_name: str | None = None,
    ) -> None:
        self.status: int = self.default_status if status is None else status
        self.reason: str = reason
        self.message: str = message
        self.details: dict[str, Any] | None = details
        self.cluster_name: str | None = cluster_name
        prefix = f"[cluster {display_name(cluster_name)}] " if cluster_name is not None else ""
        text = message or reason or f"HTTP {self.status}"
        super().__init__(f"{prefix}{text}")

    @property
    def kind(self) -> str:
        """The kind named in the Status details (e.g. ``configmaps``), or ``""``."""
        return str((self.details or {}).get("kind") or "")

    @property
    def name(self) -> str:
        """The object name named in the Status details, or ``""``."""
        return str((self.details or {}).get("name") or "")

    @property
    def group(self) -> str:
        """The API group named in the Status details, or ``""``."""
        return str((self.details or {}).get("group") or "")

    @property
    def retry_after(self) -> float | None:
        """Seconds the server asked to wait before retrying, if it said.

        None also when ``details.retryAfterSeconds`` is no number of seconds (a string, a
        list, a negative or infinite number: a gateway's own Status): a malformed detail is
        ignored, as client-go ignores a ``Retry-After`` that does not parse
        (k8s.io/client-go rest/request.go ``retryAfterSeconds``), and the Status is still
        the error it says.
        """
        value = (self.details or {}).get("retryAfterSeconds")
        if not isinstance(value, int | float) or isinstance(value, bool):
            return None  # (the API's field is an int32: JSON's number, nothing else)
        seconds = float(value)
        return seconds if 0 <= seconds < math.inf else None

    @classmethod
    def from_response(
        cls, status: int, body: bytes | str | None, *, cluster_name: str | None = None
    ) -> APIError:
        """Build the subclass matching the HTTP ``status`` and the Status ``reason`` in ``body``."""
        reason, message, details = "", "", None
        if body:
            try:
                doc = _json.loads(body)
            except _json.JSONDecodeError:
                doc = None
            if isinstance(doc, dict) and (
                doc.get("kind") == "Status"
                # kube-apiserver's timeout filter writes its 504 Status with no kind
                or ("kind" not in doc and doc.get("status") == "Failure" and "code" in doc)
            ):
                reason = str(doc.get("reason") or "")
                message = _patch_value_left_out(str(doc.get("message") or ""), _PATCH_INVALID)
                details = doc.get("details") if isinstance(doc.get("details"), dict) else None
                if details is not None:
                    details = _patch_causes_left_out(details)
            elif not doc:
                text = body.decode(errors="replace") if isinstance(body, bytes) else body
                message = _plain_message(text)
        klass = _class_for(status, reason)
        return klass(
            message, status=status, reason=reason, details=details, cluster_name=cluster_name
        )

    @classmethod
    def from_status(cls, status: Mapping[str, Any]) -> APIError:
        """The error a watch's ``ERROR`` event carries (a Status object): its ``code``
        (500 when it has none), 410 for ``Expired`` and ``Gone`` (what an old version's
        watch ends with)."""
        code = status.get("code")
        try:
            code = int(code) if code is not None else 500
        except (TypeError, ValueError):
            code = 500
        if status.get("reason") in ("Expired", "Gone"):
            code = 410
        return cls.from_response(code, _json.dumps(status))


#: how kube-apiserver says a patch's result does not decode (apiserver/pkg/endpoints/
#: handlers/patch.go: ``field.Invalid(field.NewPath("patch"), ...)``), before the value it
#: quotes: the whole patched object (a merge or JSON patch) or the patch (a strategic merge
#: patch), a Secret's data with them
_PATCH_INVALID = 'patch: Invalid value: "'
_CAUSE_INVALID = 'Invalid value: "'
#: what an error says in its place
_NOT_QUOTED = "<not quoted: it may hold a Secret's data>"


def _patch_value_left_out(text: str, marker: str, *, at_start: bool = False) -> str:
    """``text`` with the Go-quoted value after each ``marker`` (only at its start with
    ``at_start``) replaced by `_NOT_QUOTED`; the cause after it is kept."""
    out: list[str] = []
    done = 0
    while (found := text.find(marker, done)) >= 0 and not (at_start and found):
        begin = found + len(marker)  # just inside the opening quote
        end = begin
        while end < len(text) and text[end] != '"':
            end += 2 if text[end] == "\\" else 1  # (an escaped quote is no end)
        out.append(f"{text[done:begin]}{_NOT_QUOTED}")
        done = min(end, len(text))  # the closing quote, kept
        if at_start:
            break
    out.append(text[done:])
    return "".join(out)


def _patch_causes_left_out(details: dict[str, Any]) -> dict[str, Any]:
    """``details`` with the value of its ``patch`` causes left out (`_patch_value_left_out`)."""
    causes = details.get("causes")
    if not isinstance(causes, list):
        return details
    kept: list[Any] = []
    for cause in causes:
        if isinstance(cause, dict) and cause.get("field") == "patch":
            said = cause.get("message")
            if isinstance(said, str):
                cause = {
                    **cause,
                    "message": _patch_value_left_out(said, _CAUSE_INVALID, at_start=True),
                }
        kept.append(cause)
    return {**details, "causes": kept}


def _plain_message(text: str) -> str:
    """The message of a plain-text error body, at most 500 characters.

    A failed health check of kube-apiserver (``/readyz``, ``/livez``, ``/healthz``)
    answers a line per check, ``[+]ping ok`` ... ``[-]etcd failed: reason withheld``,
    some forty of them: only its failed lines are kept, so a check that fails late in
    the list is still named.
    """
    lines = text.strip().splitlines()
    failed = [line for line in lines if line.startswith("[-]")]
    return "\n".join(failed if failed else lines)[:500]


class BadRequest(APIError):
    """400: the request was malformed."""

    default_status = 400


class Unauthorized(APIError):
    """401: the credentials were missing or rejected."""

    default_status = 401


class Forbidden(APIError):
    """403: the credentials are not allowed to do this."""

    default_status = 403


class NotFound(APIError):
    """404: the object (or the resource type) does not exist."""

    default_status = 404


class MethodNotSupported(APIError):
    """405: the resource does not support this verb."""

    default_status = 405


class AlreadyExists(APIError):
    """409 AlreadyExists: create of an object whose name is taken."""

    default_status = 409


_QUOTED_MANAGER = re.compile(r'^conflict with ("(?:[^"\\]|\\.)*")')
#: what kube-apiserver's ``printManager`` adds after the quoted manager: `` with subresource
#: "scale"`` for a write through a subresource, `` using apps/v1`` for an Update
_MANAGER_TAIL = re.compile(
    r'^(?: with subresource ("(?:[^"\\]|\\.)*"))?(?: using (\S+)(?: at \S+)?)?$'
)


class FieldConflict(NamedTuple):
    """One field a server-side apply would take from another manager."""

    field: str
    """The field path as the server prints it, e.g. ``.spec.replicas``."""
    manager: str
    """The field manager that owns the field."""
    message: str
    """The server's description, e.g. ``conflict with "kubectl" using apps/v1``."""

    def _tail(self) -> re.Match[str] | None:
        m = _QUOTED_MANAGER.match(self.message)
        return _MANAGER_TAIL.match(self.message[m.end() :]) if m else None

    @property
    def operation(self) -> str:
        """How the manager wrote the field: ``"Apply"`` (a server-side apply) or
        ``"Update"`` (create, update, patch; the server names its API version), ``""``
        when the message is not worded as kube-apiserver words it."""
        tail = self._tail()
        if tail is None:
            return ""
        return "Update" if tail.group(2) else "Apply"

    @property
    def subresource(self) -> str:
        """The subresource the manager wrote through (``"scale"`` for ``kubectl scale`` or
        an autoscaler, ``"status"``), ``""`` for the object itself."""
        tail = self._tail()
        return str(_json.loads(tail.group(1))) if tail is not None and tail.group(1) else ""

    @property
    def api_version(self) -> str:
        """The API version an ``Update`` manager wrote in (``"apps/v1"``), else ``""``."""
        tail = self._tail()
        return tail.group(2) if tail is not None and tail.group(2) else ""


class Conflict(APIError):
    """409 Conflict: the object changed since it was read (stale resourceVersion), or a
    server-side apply would change fields other managers own (see
    [`field_conflicts`][mcruntime.errors.Conflict.field_conflicts])."""

    default_status = 409

    @property
    def field_conflicts(self) -> list[FieldConflict]:
        """The fields of a refused server-side apply and who owns them (else empty)."""
        out = []
        for cause in (self.details or {}).get("causes") or ():
            if not isinstance(cause, dict) or cause.get("reason") != "FieldManagerConflict":
                continue
            message = str(cause.get("message") or "")
            m = _QUOTED_MANAGER.match(message)
            manager = _json.loads(m.group(1)) if m else message.removeprefix("conflict with ")
            out.append(FieldConflict(str(cause.get("field") or ""), str(manager), message))
        return out


class Gone(APIError):
    """410: the requested resourceVersion is too old (Expired); relist."""

    default_status = 410


class UnsupportedMediaType(APIError):
    """415: the content type (e.g. a patch type) is not supported for this resource."""

    default_status = 415


class Invalid(APIError):
    """422: the object failed validation."""

    default_status = 422


class TooManyRequests(APIError):
    """429: throttled; see [`APIError.retry_after`][mcruntime.errors.APIError.retry_after]."""

    default_status = 429


class ServerError(APIError):
    """5xx or any unexpected status."""

    default_status = 500


_BY_STATUS: dict[int, type[APIError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    405: MethodNotSupported,
    410: Gone,
    415: UnsupportedMediaType,
    422: Invalid,
    429: TooManyRequests,
}


def _class_for(status: int, reason: str) -> type[APIError]:
    if status == 409:
        return AlreadyExists if reason == "AlreadyExists" else Conflict
    return _BY_STATUS.get(status, ServerError)


class Unreachable(MCRuntimeError):
    """The cluster could not be reached (connection refused/reset, timeout, TLS failure)."""

    def __init__(self, message: str, *, cluster_name: str | None = None, address: str = "") -> None:
        self.cluster_name = cluster_name
        self.address = address
        super().__init__(message)


class CredentialError(Unreachable):
    """The cluster's credential could not be had: its kubeconfig user's exec plugin was not
    found, failed, or wrote no credential.

    Names the plugin by its command's file name, the user, context and kubeconfig (and the
    cluster once a client raises it), never its arguments or environment; a plugin that fails
    is quoted by the last line of its standard error.
    An [`Unreachable`][mcruntime.errors.Unreachable]: without a credential no call reaches
    the cluster, and callers that wait for a cluster to come back wait for this too.
    """


class NotKubernetesAnswer(Unreachable):
    """A call that must answer with a Kubernetes object (a read or write of an object, a
    list, a watch) got something else with a success status: a proxy's or a portal's
    HTML login page (``answered 200 with text/html``), an empty body, a JSON list.

    Names the cluster, the method, the path, the status and the content type, never the
    body (a login page may carry tokens). An [`Unreachable`][mcruntime.errors.Unreachable]:
    what answered is not the cluster's API server (most often a proxy in front of it whose
    session expired), so the API server was not reached, and callers that wait for a
    cluster to come back wait for this too. ``status`` is the HTTP status,
    ``content_type`` the media type of the answer (``""`` when it named none).
    """

    def __init__(
        self,
        message: str,
        *,
        cluster_name: str | None = None,
        address: str = "",
        status: int = 200,
        content_type: str = "",
    ) -> None:
        super().__init__(message, cluster_name=cluster_name, address=address)
        self.status = status
        self.content_type = content_type


class NoKindMatch(MCRuntimeError):
    """The kind is not served by the cluster (per its discovery)."""

    def __init__(
        self, kind: str, *, suggestions: list[str] | None = None, cluster_name: str | None = None
    ) -> None:
        self.kind = kind
        self.suggestions = list(suggestions or [])
        self.cluster_name = cluster_name
        where = (
            f"cluster {display_name(cluster_name)}" if cluster_name is not None else "the cluster"
        )
        text = f"no kind {kind!r} is served by {where}"
        if self.suggestions:
            text += "; did you mean " + " or ".join(repr(s) for s in self.suggestions) + "?"
        elif _group(kind) in _AGGREGATED_GROUPS:
            text += ": is the API server that serves it (its APIService) installed and available?"
        elif _custom_group(kind):
            text += ": is its CustomResourceDefinition installed (and Established)?"
        super().__init__(text)


#: the API groups of kube-apiserver itself (every other group is a CRD's or an aggregated API's)
_BUILTIN_GROUPS = frozenset(
    {"apps", "batch", "autoscaling", "policy", "extensions"}
    | {
        f"{g}.k8s.io"
        for g in [
            "admissionregistration",
            "apiextensions",
            "apiregistration",
            "authentication",
            "rbac.authorization",
            "authorization",
            "certificates",
            "coordination",
            "discovery",
            "events",
            "flowcontrol.apiserver",
            "internal.apiserver",
            "networking",
            "node",
            "resource",
            "scheduling",
            "storage",
            "storagemigration",
        ]
    }
)


#: well-known groups of aggregated API servers (metrics-server, metrics adapters), not CRDs
_AGGREGATED_GROUPS = frozenset(
    {"metrics.k8s.io", "custom.metrics.k8s.io", "external.metrics.k8s.io"}
)


def _group(kind: str) -> str | None:
    """The group of ``group/version/Kind`` (None for ``version/Kind`` or a bare kind)."""
    parts = kind.split("/")
    return parts[0] if len(parts) == 3 else None


def _custom_group(kind: str) -> bool:
    """Whether ``group/version/Kind`` names a group kube-apiserver does not serve itself."""
    group = _group(kind)
    return group is not None and group not in _BUILTIN_GROUPS


class ObjectNotTyped(MCRuntimeError, ValueError):
    """An object the cluster sent does not fit the typed class it was read as (the
    pydantic `Resource`'s validation failed): written by another client or another
    version of the model. The message names the object, the class and each field's
    problem; ``errors`` has pydantic's list."""

    def __init__(
        self, message: str, *, errors: list[Any] | None = None, cluster_name: str | None = None
    ) -> None:
        self.errors = errors or []
        self.cluster_name = cluster_name
        super().__init__(message)


class SelectorError(MCRuntimeError, ValueError):
    """A label or field selector refused before anything is sent: it does not parse, or a
    dict selector names an invalid label key or value (or a field path with an operator in
    it). The cache and the API reader refuse the same selector with this same error.

    ``str()`` says what is wrong and where, for whoever wrote the selector; ``kube`` is how
    kube-apiserver words the same refusal of a ``labelSelector`` (what envtest answers).
    """

    def __init__(self, message: str, kube: str | None = None) -> None:
        super().__init__(message)
        self.kube: str = message if kube is None else kube


class ConfigError(MCRuntimeError):
    """A kubeconfig (or in-cluster config) is unusable; names the file and context, never content."""

    def __init__(
        self, message: str, *, path: str | None = None, context: str | None = None
    ) -> None:
        self.path = path
        self.context = context
        super().__init__(message)


class DeadlineExceeded(Unreachable):
    """A call did not complete within its deadline (all attempts included).

    The deadline is the call's ``timeout=`` or the reconcile's deadline
    (`ControllerOptions.reconcile_timeout`, `mcruntime.client.deadline`),
    whichever ends first. A hung API server (connections accepted, nothing
    answered) shows up as this error.

    ``sent`` is False when the call was not sent at all, its deadline having passed
    before it was made (``not sent: the deadline had passed``), or its caller having cut
    it before it was sent. ``by_caller`` is True when the caller's side ended it: it was
    late, or it cut the call (``cut: ...``: the coroutine awaiting it was cancelled, the
    event of a [`cancelled_by`][mcruntime.client.cancelled_by] block was set). The cluster
    is not at fault then, and a reconcile failing with it is no refusal of its cluster.
    A call cut in flight may have been carried out by the server: ``sent`` stays True.
    """

    #: whether the call was sent (False: its deadline had passed, or it was cut, before it
    #: was made)
    sent: bool = True
    #: whether the caller's side ended it (late, or cut by its caller), not the cluster
    by_caller: bool = False


class ClusterNotAnswering(DeadlineExceeded):
    """A call was cut before its deadline, or not sent: the cluster stopped answering its
    health probes, or answered that its storage is down.

    The manager's health check probes a cluster it has not heard from; when a
    probe gets no answer within its deadline, or `/readyz` says etcd failed (the
    calls that need it wait for the API server's request timeout), the calls to
    that cluster in flight are cut at once (their deadlines could only have
    passed), so they free the threads that made them, and new calls fail at once
    until it answers again. The message names the cluster, the call and why.
    A reconcile that fails with it is retried as soon as the cluster answers
    again, whichever cluster its request is of. A
    [`DeadlineExceeded`][mcruntime.errors.DeadlineExceeded]: code that handles a
    hung cluster's calls handles these too.
    """


class ClusterNotFound(MCRuntimeError):
    """The provider has no cluster of that name."""

    def __init__(self, message: str = "", *, name: str = "") -> None:
        self.name = name
        super().__init__(message or f"cluster {name!r} not found")


class ClusterLeft(ClusterNotFound):
    """The cluster left while a call was in flight or about to start.

    Raised by a disengaged (or stopped) cluster's client and cache: its
    in-flight calls are cut at once. Not a failure of the reconciler: the
    controller drops the request quietly, with no retry.
    """

    def __init__(self, message: str = "", *, name: str = "") -> None:
        super().__init__(message or f"[cluster {display_name(name)}] the cluster left", name=name)


class FleetNotKnown(MCRuntimeError):
    """The manager cannot name every cluster of its fleet yet, or any more.

    Raised by [`Manager.fleet_clusters()`][mcruntime.manager.Manager.fleet_clusters]
    before the provider has reported the clusters it knows at start, and once the manager
    stops. Work that must reach every member (deleting a hub object's copies before its
    finalizer goes) raises it on: the reconcile fails and runs again, instead of deciding
    on a fleet it only partly knows.
    """


class ListenError(MCRuntimeError, OSError):
    """A server of the library (metrics, probes, debug pages, webhooks) cannot listen on its
    address: the port is taken, the host does not resolve, the address is not this
    machine's. The message names the server, the option and the address (``cannot serve
    metrics on :8080 (metrics_bind_address): address already in use``), as
    controller-runtime's ``failed to start metrics server: ... bind: address already in
    use``; ``errno`` is the system's (``errno.EADDRINUSE``...) when it gave one.

    Raised by [`Manager.start()`][mcruntime.manager.Manager.start] (and ``run()``, ``with
    mgr:``) before anything else starts, and by the webhook server's ``start()``. An
    ``OSError``: ``except OSError`` catches it too.
    """


class GracePeriodExceeded(MCRuntimeError):
    """A manager's stop ended with work still running past its ``graceful_shutdown_timeout``
    (a reconcile that does not return, a runnable that does not end at its stop event).

    As controller-runtime's ``Start`` returns ``failed waiting for all runnables to end
    within grace period of 30s: context deadline exceeded``:
    [`Manager.run()`][mcruntime.manager.Manager.run], ``arun()`` and the end of a ``with
    mgr:`` block raise it, and ``cli.run(mgr)`` answers exit status 1, so the process does
    not report a clean exit. ``stop()`` does not raise it: it is
    ``Manager.grace_period_exceeded``.
    ``timeout`` is the grace period (seconds); ``still_running`` says what still ran, one
    item each (``reconcile default/web of controller web in cluster eu-1, for 31.2s``).
    """

    def __init__(self, timeout: float, still_running: tuple[str, ...]) -> None:
        self.timeout = timeout
        self.still_running = still_running
        shown = "; ".join(still_running[:_SHOWN_STILL_RUNNING])
        if len(still_running) > _SHOWN_STILL_RUNNING:
            shown += f"; and {len(still_running) - _SHOWN_STILL_RUNNING} more"
        super().__init__(
            f"failed waiting for everything to end within the grace period of {timeout:g}s "
            f"(graceful_shutdown_timeout), still running: {shown}"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.timeout, self.still_running))


#: how many of what still ran a GracePeriodExceeded's message names
_SHOWN_STILL_RUNNING = 5


class _IgnoreNotFound(AbstractContextManager[None]):
    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> bool:
        return isinstance(exc, NotFound)


@overload
def ignore_not_found() -> AbstractContextManager[None]: ...
@overload
def ignore_not_found(exc: BaseException) -> None: ...
def ignore_not_found(exc: BaseException | None = None) -> AbstractContextManager[None] | None:
    """Swallow [`NotFound`][mcruntime.errors.NotFound], re-raise anything else.

    Use as ``with ignore_not_found(): client.delete(...)`` or inside an
    ``except`` block as ``ignore_not_found(exc)``.
    """
    if exc is None:
        return _IgnoreNotFound()
    if isinstance(exc, NotFound):
        return None
    raise exc


def is_not_found(exc: BaseException | None) -> bool:
    """True if ``exc`` is a [`NotFound`][mcruntime.errors.NotFound]."""
    return isinstance(exc, NotFound)


def is_conflict(exc: BaseException | None) -> bool:
    """True if ``exc`` is a [`Conflict`][mcruntime.errors.Conflict] (stale update)."""
    return isinstance(exc, Conflict)


def is_already_exists(exc: BaseException | None) -> bool:
    """True if ``exc`` is an [`AlreadyExists`][mcruntime.errors.AlreadyExists]."""
    return isinstance(exc, AlreadyExists)


#: the Status cause of a create refused because its namespace is being deleted (client-go's
#: ``corev1.NamespaceTerminatingCause``): see `has_status_cause`
NAMESPACE_TERMINATING = "NamespaceTerminating"


def has_status_cause(exc: BaseException | None, cause: str) -> bool:
    """True if ``exc`` is an [`APIError`][mcruntime.errors.APIError] whose Status lists a cause of
    type ``cause`` (its ``details.causes[].reason``), as apimachinery's ``HasStatusCause``.

    The usual one: `NAMESPACE_TERMINATING`, kube-apiserver's 403 to a create in a namespace
    being deleted (stuck ``Terminating`` on a finalizer, say). Controllers stop retrying such
    a create, as Kubernetes' own do: the namespace and what is in it are going away.
    """
    if not isinstance(exc, APIError):
        return False
    causes = (exc.details or {}).get("causes")
    if not isinstance(causes, list):
        return False
    return any(isinstance(c, dict) and c.get("reason") == cause for c in causes)
