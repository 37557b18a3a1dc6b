"""Defaulting: a mutating admission handler built from a function or a ``Defaulter``."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from mcruntime._patch import PatchError, copy_json, create_json_patch, json_patch
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
    freely). Only the defaulter's changes are patched: what the typed view alone would
    change (a URL normalised, a field it does not declare) stays as sent.
    ``request.cluster_name`` names the cluster. Must be thread-safe;
    raise [`Denied`][mcruntime.webhook.Denied] to refuse the object.
    """

    def default(self, request: AdmissionRequest, obj: Any, /) -> Any: ...


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
        # a typed view's own round trip is not the defaulter's doing: what the type
        # normalises or leaves out (a URL's slash, a field it does not declare) is kept as
        # sent, as controller-runtime's defaulter_custom.go drops the removals that come
        # from the type (dropSchemeRemovals); only the defaulter's changes are patched
        before = from_view(view) if self._cls is not None else None
        result = self._fn(request, view)
        after = from_view(view if result is None else result)
        if before is None:
            return patched(request.obj, after)
        return patched(request.obj, _with_changes(request.obj, before, after))


def _with_changes(obj: dict[str, Any], before: dict[str, Any], after: dict[str, Any]) -> Any:
    """``obj`` with the changes from ``before`` to ``after``: a value the defaulter replaced
    where ``obj`` has none is added; a removal of what ``obj`` does not hold is moot."""
    out = copy_json(obj)
    for op in create_json_patch(before, after):
        try:
            out = json_patch(out, [op])
        except PatchError:
            if op["op"] == "replace":
                with contextlib.suppress(PatchError):
                    out = json_patch(out, [{**op, "op": "add"}])
    return out
