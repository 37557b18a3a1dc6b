"""Callables the user hands over, checked when they are given rather than at their first call."""

from __future__ import annotations

import inspect

__all__ = [
    "is_coroutine_function",
    "one_argument_mismatch",
    "refuse_coroutine_function",
    "takes_go_ctx",
]


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


def takes_keyword(fn: object, name: str) -> bool:
    """Whether ``fn`` can be called with the keyword argument ``name`` (by name, or in its
    ``**kwargs``)."""
    try:
        params = inspect.signature(fn).parameters.values()  # type: ignore[arg-type]
    except (TypeError, ValueError):  # (no signature to read: a builtin)
        return False
    return any(
        p.kind is inspect.Parameter.VAR_KEYWORD
        or (p.name == name and p.kind is not inspect.Parameter.POSITIONAL_ONLY)
        for p in params
    )


def is_coroutine_function(fn: object) -> bool:
    """Whether calling ``fn`` makes a coroutine: an ``async def`` function or method, a
    ``functools.partial`` of one, or an object whose ``__call__`` is one."""
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004
    )


def refuse_coroutine_function(fn: object, what: str, instead: str) -> None:
    """Raise `TypeError` when ``fn`` is a coroutine function where a plain one is called:
    its coroutine would never be awaited (a truthy value, a value of the wrong type, at
    every call). ``what`` names the role (``the map function``), ``instead`` says what to
    pass."""
    if is_coroutine_function(fn):
        name = getattr(fn, "__qualname__", None) or repr(fn)
        raise TypeError(
            f"{what} {name} is a coroutine function (async def): it is called, not awaited, "
            f"so its coroutine would never run; {instead}"
        )
