"""Callables the user hands over, checked when they are given rather than at their first call."""

from __future__ import annotations

import inspect

__all__ = ["one_argument_mismatch", "takes_go_ctx"]


def one_argument_mismatch(fn: object) -> inspect.Signature | None:
    """The signature of ``fn`` when it cannot be called with one positional argument; None
    when it can, or when its signature cannot be read (a builtin or C callable)."""
    try:
        signature = inspect.signature(fn)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    try:
        signature.bind(None)
    except TypeError:
        return signature
    return None


def takes_go_ctx(signature: inspect.Signature) -> bool:
    """Whether the first parameter is Go's ``ctx`` (a port of ``func(ctx, x)``)."""
    return next(iter(signature.parameters), "") in ("ctx", "context")
