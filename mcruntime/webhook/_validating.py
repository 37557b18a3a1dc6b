"""Validation: a validating admission handler built from a ``Validator``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from mcruntime.webhook._admission import AdmissionRequest, AdmissionResponse, allowed
from mcruntime.webhook._views import to_view, typed_class

if TYPE_CHECKING:
    from mcruntime.client import KindLike

__all__ = ["Validator", "ValidatingHandler"]


@runtime_checkable
class Validator(Protocol):
    """Validates objects of one kind; each method returns warnings (or None) or raises ``Denied``.

    Objects are typed views when the kind is a pydantic
    [`Resource`][mcruntime.client.Resource], else dicts; ``request.cluster_name``
    names the cluster. Raise [`Denied`][mcruntime.webhook.Denied] with the
    message the API server shows to its client. Must be thread-safe.
    """

    def validate_create(self, request: AdmissionRequest, obj: Any) -> list[str] | None: ...

    def validate_update(
        self, request: AdmissionRequest, old: Any, new: Any
    ) -> list[str] | None: ...

    def validate_delete(self, request: AdmissionRequest, obj: Any) -> list[str] | None: ...


class ValidatingHandler:
    """Calls the validator method of the request's operation; its warnings reach the client."""

    def __init__(self, kind: KindLike, validator: Validator) -> None:
        missing = [
            m
            for m in ("validate_create", "validate_update", "validate_delete")
            if not callable(getattr(validator, m, None))
        ]
        if missing:
            raise TypeError(
                f"{type(validator).__name__} is not a validator: it lacks {', '.join(missing)}"
            )
        self._cls = typed_class(kind)
        self._validator = validator

    def handle(self, request: AdmissionRequest) -> AdmissionResponse:
        v, cls = self._validator, self._cls
        if request.operation == "CREATE":
            warnings = v.validate_create(request, to_view(cls, request.obj))
        elif request.operation == "UPDATE":
            warnings = v.validate_update(
                request, to_view(cls, request.old_object), to_view(cls, request.obj)
            )
        elif request.operation == "DELETE":
            warnings = v.validate_delete(request, to_view(cls, request.old_object))
        else:
            return allowed()
        return allowed(warnings=warnings or ())
