"""Validation: a validating admission handler built from a ``Validator``."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from mcruntime.webhook._admission import (
    AdmissionRequest,
    AdmissionResponse,
    allowed,
    refuse_async,
)
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
    message the API server shows to its client (and, in its ``warnings``, the
    warnings to send with the refusal). Must be thread-safe.
    """

    def validate_create(self, request: AdmissionRequest, obj: Any, /) -> list[str] | None: ...

    def validate_update(
        self, request: AdmissionRequest, old: Any, new: Any, /
    ) -> list[str] | None: ...

    def validate_delete(self, request: AdmissionRequest, obj: Any, /) -> list[str] | None: ...


_METHODS = ("validate_create", "validate_update", "validate_delete")


def _is_function(validator: Any) -> bool:
    """Whether ``validator`` is one function ``(request, obj)`` rather than a `Validator`."""
    return callable(validator) and not any(callable(getattr(validator, m, None)) for m in _METHODS)


class _FunctionValidator:
    """A `Validator` from one function ``(request, obj)``: it validates creates and updates
    (``obj`` is then the new object); deletes are not validated."""

    def __init__(self, fn: Any) -> None:
        self._fn = fn

    def validate_create(self, request: AdmissionRequest, obj: Any) -> list[str] | None:
        result: list[str] | None = self._fn(request, obj)
        return result

    def validate_update(self, request: AdmissionRequest, old: Any, new: Any) -> list[str] | None:
        result: list[str] | None = self._fn(request, new)
        return result

    def validate_delete(self, request: AdmissionRequest, obj: Any) -> list[str] | None:
        return None


class ValidatingHandler:
    """Calls the validator method of the request's operation; its warnings reach the client.

    ``validator`` is a [`Validator`][mcruntime.webhook.Validator], or one function
    ``(request, obj)`` for creates and updates (kopf's ``@kopf.on.validate``).
    """

    def __init__(
        self,
        kind: KindLike,
        validator: Validator | Callable[[AdmissionRequest, Any], list[str] | None],
    ) -> None:
        #: the operations it validates (a function validates no delete)
        self.operations: tuple[str, ...] = ("CREATE", "UPDATE", "DELETE")
        given: Any = validator  # what the caller gave, checked here (a type checker may not)
        if _is_function(given):
            refuse_async(given, "the validator")
            given = _FunctionValidator(given)
            self.operations = ("CREATE", "UPDATE")
        missing = [m for m in _METHODS if not callable(getattr(given, m, None))]
        if missing:
            raise TypeError(
                f"{type(given).__name__} is not a validator: it lacks {', '.join(missing)} "
                "(or pass one function (request, obj) for creates and updates)"
            )
        for m in _METHODS:
            refuse_async(getattr(given, m), f"the validator's {m}")
        self._cls = typed_class(kind)
        self._validator: Validator = given

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
        return allowed(warnings=_warnings(warnings, request.operation))


def _warnings(returned: Any, operation: str) -> list[str]:
    """What a validator returned for ``operation``: None or a list of warning strings."""
    if returned is None:
        return []
    if isinstance(returned, list | tuple) and all(isinstance(w, str) for w in returned):
        return list(returned)
    hint = ""
    if isinstance(returned, tuple) and len(returned) == 2:
        hint = " (not Go's (warnings, error) pair: return the warnings, raise Denied to refuse)"
    raise TypeError(
        f"the validator of {operation} returned a {type(returned).__name__}, not a list of "
        f"warnings or None{hint}"
    )
