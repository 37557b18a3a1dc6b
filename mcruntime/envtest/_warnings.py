"""Warnings of one request, sent back as ``Warning`` headers, and its field validation.

kube-apiserver tells a client what it did not refuse but should know: a deprecated
version was used, a field the schema does not know was dropped (``fieldValidation=Warn``,
the default), a webhook had something to say. Code deep in a write adds them with
`warn`; the request's handler sends them. ``fieldValidation=Strict`` refuses what would
have been a warning about an unknown field, ``Ignore`` says nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

__all__ = [
    "DIRECTIVES",
    "RequestWarnings",
    "collecting",
    "field_validation",
    "lenient",
    "warn",
]

#: the values of ``fieldValidation`` (the empty string is ``Warn``)
DIRECTIVES = ("Ignore", "Strict", "Warn")


@dataclass
class RequestWarnings:
    """What one request has been warned about, each message once, in order."""

    directive: str = "Warn"
    messages: list[str] = field(default_factory=list)

    def headers(self) -> list[tuple[str, str]]:
        """The ``Warning`` headers, as kube-apiserver writes them (code 299, no agent)."""
        return [("Warning", f'299 - "{_quoted(m)}"') for m in self.messages]


_current: ContextVar[RequestWarnings | None] = ContextVar("envtest_request_warnings", default=None)


@contextmanager
def collecting(directive: str = "Warn") -> Iterator[RequestWarnings]:
    """Collect the warnings of the request served inside the block."""
    warnings = RequestWarnings(directive or "Warn")
    token = _current.set(warnings)
    try:
        yield warnings
    finally:
        _current.reset(token)


@contextmanager
def lenient() -> Iterator[None]:
    """Inside the block, a write drops the fields its kind does not have silently, whatever
    the request's ``fieldValidation``: the object a mutating webhook returned, which
    kube-apiserver decodes without checking fields (they are the webhook's, not the client's)."""
    current = _current.get()
    if current is None:
        yield
        return
    before, current.directive = current.directive, "Ignore"
    try:
        yield
    finally:
        current.directive = before


def warn(message: str) -> None:
    """Warn the current request's client (nothing outside a request)."""
    current = _current.get()
    if current is not None and message not in current.messages:
        current.messages.append(message)


def field_validation() -> str:
    """The current request's ``fieldValidation`` (``Ignore`` outside a request: a server's
    own writes are never refused for a field)."""
    current = _current.get()
    return current.directive if current is not None else "Ignore"


def _quoted(message: str) -> str:
    return message.replace("\\", "\\\\").replace('"', '\\"')
