"""API errors as ``Status`` objects with the reasons and codes of kube-apiserver."""

from __future__ import annotations

from typing import Any

from mcruntime.envtest._gofmt import go_string

__all__ = ["Causes", "StatusError", "status_success"]


class StatusError(Exception):
    """A request failure answered with a ``Status`` body and its HTTP code."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details

    def causes(self) -> list[tuple[str, str, str]]:
        """The causes of a 422 as `invalid_causes` takes them: (reason, field, "field: message")."""
        found = (self.details or {}).get("causes") or ()
        return [
            (
                c["reason"],
                c["field"],
                f"{c['field']}: {c['message']}" if c["field"] else c["message"],
            )
            for c in found
        ]

    def status(self) -> dict[str, Any]:
        """The ``Status`` object sent to the client."""
        st: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if not self.reason:  # an error kube-apiserver passes on as it is: a 500 without reason
            del st["reason"]
        if self.details is not None:
            st["details"] = self.details
        return st

    @classmethod
    def not_found(cls, qualified: str, name: str, group: str, plural: str) -> StatusError:
        return cls(
            404, "NotFound", f'{qualified} "{name}" not found', _details(name, group, plural)
        )

    @classmethod
    def no_route(cls) -> StatusError:
        return cls(404, "NotFound", "the server could not find the requested resource", {})

    @classmethod
    def already_exists(cls, qualified: str, name: str, group: str, plural: str) -> StatusError:
        return cls(
            409,
            "AlreadyExists",
            f'{qualified} "{name}" already exists',
            _details(name, group, plural),
        )

    @classmethod
    def conflict(cls, qualified: str, name: str, group: str, plural: str, why: str) -> StatusError:
        return cls(
            409,
            "Conflict",
            f'Operation cannot be fulfilled on {qualified} "{name}": {why}',
            _details(name, group, plural),
        )

    @classmethod
    def invalid(cls, kind: str, name: str, group: str, field: str, why: str) -> StatusError:
        return cls.invalid_causes(
            kind, name, group, [("FieldValueInvalid", field, f"{field}: {why}")]
        )

    @classmethod
    def invalid_causes(
        cls, kind: str, name: str, group: str, causes: list[tuple[str, str, str]]
    ) -> StatusError:
        """422 Invalid listing ``causes`` as (reason, field, "field: message")."""
        details = _details(name, group, kind)
        details["causes"] = [
            {"reason": reason, "message": msg.removeprefix(f"{field}: "), "field": field}
            for reason, field, msg in causes
        ]
        label = f"{kind}.{group}" if group else kind
        # ``ErrorList.ToAggregate``: a message said twice is printed once
        said = list(dict.fromkeys(c[2] for c in causes))
        text = said[0] if len(said) == 1 else "[" + ", ".join(said) + "]"
        return cls(422, "Invalid", f'{label} "{name}" is invalid: {text}', details)

    @classmethod
    def json_patch_failed(cls) -> StatusError:
        """422 for a JSON patch (RFC 6902) that does not apply: a ``test`` that fails, a path
        that is not there, an unknown op. kube-apiserver answers every such failure with this
        one generic ``Status`` (no causes, empty details), not naming what failed."""
        return cls(
            422, "Invalid", "the server rejected our request due to an error in our request", {}
        )

    @classmethod
    def bad_request(cls, message: str) -> StatusError:
        return cls(400, "BadRequest", message)

    @classmethod
    def expired(cls, message: str) -> StatusError:
        return cls(410, "Expired", message)

    @classmethod
    def too_large_resource_version(cls, rv: int, current: int, retry: int) -> StatusError:
        """A read asking for a resourceVersion the server has not reached (storage's
        ``NewTooLargeResourceVersionError``): a 504 with the ``ResourceVersionTooLarge``
        cause, suggesting a retry after ``retry`` seconds (none when 0)."""
        details: dict[str, Any] = {
            "causes": [
                {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}
            ]
        }
        if retry:
            details["retryAfterSeconds"] = retry
        return cls(
            504,
            "Timeout",
            f"Timeout: Too large resource version: {rv}, current: {current}",
            details,
        )

    @classmethod
    def method_not_supported(cls, qualified: str, verb: str) -> StatusError:
        return cls(
            405,
            "MethodNotAllowed",
            f"{verb} is not supported on resources of kind {qualified!r}",
            _details("", "", qualified),
        )

    @classmethod
    def unsupported_media_type(cls, accepted: list[str] | tuple[str, ...]) -> StatusError:
        """415 for a request body in a type the server does not decode (``accepted``: what it
        does, in kube-apiserver's order), worded as kube-apiserver's negotiation error."""
        return cls.unsupported_patch_type(list(accepted))

    @classmethod
    def unsupported_patch_type(cls, accepted: list[str]) -> StatusError:
        """415 for a PATCH whose content type the resource does not take (custom
        resources take no strategic merge patch), worded as kube-apiserver words it."""
        return cls(
            415,
            "UnsupportedMediaType",
            "the body of the request was in an unknown format - accepted media types include: "
            + ", ".join(accepted),
        )

    @classmethod
    def unauthorized(cls) -> StatusError:
        return cls(401, "Unauthorized", "Unauthorized")

    @classmethod
    def forbidden(
        cls, message: str, name: str = "", group: str = "", plural: str = ""
    ) -> StatusError:
        return cls(403, "Forbidden", message, _details(name, group, plural))


def _details(name: str, group: str, kind: str) -> dict[str, Any]:
    """A ``StatusDetails``: its fields are ``omitempty`` (a core kind's has no group)."""
    d = {"name": name, "group": group, "kind": kind}
    return {k: v for k, v in d.items() if v}


def status_success(name: str, group: str, plural: str, uid: str) -> dict[str, Any]:
    """The ``Status`` a delete answers with once the object is gone."""
    details = _details(name, group, plural)
    details["uid"] = uid
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": details,
    }


class Causes:
    """The field errors of one validation, worded as kube-apiserver's ``field.Error``s;
    ``raise_if_any`` refuses with them all at once, as its ``ErrorList`` does."""

    def __init__(self) -> None:
        self.items: list[tuple[str, str, str]] = []

    def add(self, reason: str, field: str, message: str) -> None:
        self.items.append((reason, field, f"{field}: {message}"))

    def required(self, field: str, detail: str = "") -> None:
        self.add("FieldValueRequired", field, "Required value" + (f": {detail}" if detail else ""))

    def invalid(self, field: str, shown: str, detail: str) -> None:
        self.add("FieldValueInvalid", field, f"Invalid value: {shown}: {detail}")

    def forbidden(self, field: str, detail: str) -> None:
        self.add("FieldValueForbidden", field, f"Forbidden: {detail}")

    def not_supported(self, field: str, value: Any, supported: tuple[str, ...]) -> None:
        values = ", ".join(go_string(s) for s in supported)
        self.add(
            "FieldValueNotSupported",
            field,
            f"Unsupported value: {go_string(value)}: supported values: {values}",
        )

    def raise_if_any(self, kind: str, name: str, group: str) -> None:
        """422 Invalid with every cause collected, if any."""
        if self.items:
            raise StatusError.invalid_causes(kind, name, group, self.items)
