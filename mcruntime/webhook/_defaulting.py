"""Defaulting: a mutating admission handler built from a function or a ``Defaulter``."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from mcruntime.webhook._admission import (
    AdmissionRequest,
    AdmissionResponse,
    allowed,
    patched,
    refuse_async,
)
from mcruntime.webhook._views import from_view, to_view, typed_class

if TYPE_CHECKING:
    from mcruntime.client import KindLike

__all__ = ["Defaulter", "DefaultingHandler"]


@runtime_checkable
class Defaulter(Protocol):
    """Sets defaults: ``default(request, obj)`` changes ``obj`` in place, or returns a new object.

    ``obj`` is a typed view when the kind is a pydantic
    [`Resource`][mcruntime.client.Resource], else a dict (a copy: change it
    freely). ``request.cluster_name`` names the cluster. Must be thread-safe;
    raise [`Denied`][mcruntime.webhook.Denied] to refuse the object.
    """

    def default(self, request: AdmissionRequest, obj: Any) -> Any: ...


class DefaultingHandler:
    """Runs a defaulter on CREATE and UPDATE and answers with a JSON patch of its changes."""

    def __init__(
        self, kind: KindLike, defaulter: Defaulter | Callable[[AdmissionRequest, Any], Any]
    ):
        self._cls = typed_class(kind)
        if isinstance(defaulter, Defaulter):
            self._fn: Callable[[AdmissionRequest, Any], Any] = defaulter.default
        elif callable(defaulter):
            self._fn = defaulter
        else:
            raise TypeError(
                f"{type(defaulter).__name__} is not a defaulter: give a function "
                "(request, obj) or an object with default(request, obj)"
            )
        refuse_async(self._fn, "the defaulter")

    def handle(self, request: AdmissionRequest) -> AdmissionResponse:
        if request.operation not in ("CREATE", "UPDATE") or request.obj is None:
            return allowed()
        view = to_view(self._cls, request.obj)
        result = self._fn(request, view)
        modified = from_view(view if result is None else result)
        return patched(request.obj, modified)
