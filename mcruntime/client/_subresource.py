"""`SubResourceClient`: reads and writes one subresource of objects, as controller-runtime's
``client.SubResource`` does.

A subresource is a path under an object (``.../deployments/web/scale``,
``.../pods/web-0/eviction``, ``.../serviceaccounts/builder/token``) whose
body is often another kind than the object's: a ``Scale``, an ``Eviction``,
a ``TokenRequest``. Calls name the object by kind, name and namespace and
send or return the subresource's own body; every call has the deadline,
cancellation and retry rules of [`Client`][mcruntime.client.Client].
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, overload

from mcruntime.client._client import PatchType, _namespace_for
from mcruntime.client._kinds import KindLike, RESTMapping
from mcruntime.client._resource import gvk_of_object, to_dict, to_typed
from mcruntime.client._rest import call_timeout

if TYPE_CHECKING:
    from mcruntime.client._client import Client

__all__ = ["SubResourceClient"]

#: a typed body (a ``kubernetes`` model, a ``Resource``)
_T = TypeVar("_T")


class SubResourceClient:
    """The ``subresource`` of objects of one cluster: from
    [`Client.subresource()`][mcruntime.client.Client.subresource].

    Bodies may be dicts or ``kubernetes`` models (``V1Scale``,
    ``V1Eviction``, ``AuthenticationV1TokenRequest``); a write answers in the
    flavour of its body, ``get`` and ``patch`` with dicts.
    """

    def __init__(self, client: Client, subresource: str) -> None:
        if not subresource or "/" in subresource:
            raise ValueError(f"not a subresource name: {subresource!r} (say 'scale' or 'eviction')")
        self.client = client
        self.subresource = subresource

    def __repr__(self) -> str:
        return f"SubResourceClient({self.subresource!r}, {self.client!r})"

    def _request(
        self, method: str, kind: KindLike, name: str, namespace: str | None, what: str, **kw: Any
    ) -> Any:
        """``method`` on the subresource of ``name``; one the resource does not have is named
        as missing, not reported as a bare NotFound."""
        mapping: RESTMapping = self.client.mapper.mapping(kind)
        ns = _namespace_for(mapping, namespace, f"{what} of {self.subresource}({name!r})")
        return self.client._request_at(mapping, ns, name, self.subresource, method, **kw)

    def get(
        self,
        kind: KindLike,
        name: str,
        namespace: str | None = None,
        *,
        query: Mapping[str, str | int | bool] | None = None,
        timeout: float | None = None,
    ) -> Any:
        """GET the subresource of ``name`` from the API server: a dict for a JSON body
        (a ``Scale``, say), text for a text one.

        ``query`` passes the subresource's options. A pod's ``log`` is text, ``""``
        when the pod has none yet (not on a node), even when its lines are JSON:
        ``subresource("log").get("v1/Pod", "web-0", "prod", query={"container":
        "app", "tailLines": 100})``.
        """
        with call_timeout(timeout):
            data = self._request("GET", kind, name, namespace, "get", query=query)
            if data is None and self.subresource == "log":
                return ""
            return data

    @overload
    def create(
        self,
        kind: KindLike,
        name: str,
        body: dict[str, Any],
        namespace: str | None = None,
        *,
        dry_run: bool = False,
        field_manager: str | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]: ...
    @overload
    def create(
        self,
        kind: KindLike,
        name: str,
        body: _T,
        namespace: str | None = None,
        *,
        dry_run: bool = False,
        field_manager: str | None = None,
        timeout: float | None = None,
    ) -> _T | dict[str, Any]: ...
    def create(
        self,
        kind: KindLike,
        name: str,
        body: Any,
        namespace: str | None = None,
        *,
        dry_run: bool = False,
        field_manager: str | None = None,
        timeout: float | None = None,
    ) -> Any:
        """POST ``body`` to the subresource of ``name``: an ``Eviction`` to ``eviction``, a
        ``TokenRequest`` to ``token``. Returns the server's answer (a ``Status`` for an eviction).

        An eviction that a PodDisruptionBudget forbids raises
        [`TooManyRequests`][mcruntime.errors.TooManyRequests] at once (it is not
        retried: the budget, not the server's load, refused it); one whose budget
        the disruption controller has not caught up with yet is answered with a
        ``Retry-After`` and asked again, within the call's deadline.
        """
        return self._write(
            "POST", "create", kind, name, body, namespace, dry_run, field_manager, timeout
        )

    @overload
    def update(
        self,
        kind: KindLike,
        name: str,
        body: dict[str, Any],
        namespace: str | None = None,
        *,
        dry_run: bool = False,
        field_manager: str | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]: ...
    @overload
    def update(
        self,
        kind: KindLike,
        name: str,
        body: _T,
        namespace: str | None = None,
        *,
        dry_run: bool = False,
        field_manager: str | None = None,
        timeout: float | None = None,
    ) -> _T | dict[str, Any]: ...
    def update(
        self,
        kind: KindLike,
        name: str,
        body: Any,
        namespace: str | None = None,
        *,
        dry_run: bool = False,
        field_manager: str | None = None,
        timeout: float | None = None,
    ) -> Any:
        """PUT ``body`` as the subresource of ``name`` (a ``Scale`` with new ``spec.replicas``);
        Conflict if its ``metadata.resourceVersion`` is stale."""
        return self._write(
            "PUT", "update", kind, name, body, namespace, dry_run, field_manager, timeout
        )

    def patch(
        self,
        kind: KindLike,
        name: str,
        patch: Any,
        namespace: str | None = None,
        *,
        type: PatchType = "merge",
        dry_run: bool = False,
        field_manager: str | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """Patch the subresource of ``name``, as [`Client.patch`][mcruntime.client.Client.patch]
        patches the object (``{"spec": {"replicas": 3}}`` for ``scale``)."""
        with call_timeout(timeout):
            data: dict[str, Any] = self.client._patch(
                kind,
                name,
                patch,
                namespace,
                patch_type=type,
                subresource=self.subresource,
                query=self.client._write_query(dry_run, field_manager),
                what=f"patch of {self.subresource}",
            )
            return data

    def _write(
        self,
        method: str,
        what: str,
        kind: KindLike,
        name: str,
        body: Any,
        namespace: str | None,
        dry_run: bool,
        field_manager: str | None,
        timeout: float | None,
    ) -> Any:
        with call_timeout(timeout):
            payload = to_dict(body)
            gvk = None if isinstance(body, dict) else gvk_of_object(body)
            if gvk is not None and ("apiVersion" not in payload or "kind" not in payload):
                payload = {"apiVersion": gvk.api_version, "kind": gvk.kind, **payload}
            data = self._request(
                method,
                kind,
                name,
                namespace,
                what,
                query=self.client._write_query(dry_run, field_manager),
                body=payload,
            )
            # an answer of the body's kind comes back in its flavour; a Status stays a dict
            if gvk is None or not isinstance(data, dict) or data.get("kind") != gvk.kind:
                return data
            return to_typed(data, type(body))
