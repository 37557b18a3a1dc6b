"""What an error tracker records of an exception: the locals of its traceback's frames."""

from __future__ import annotations

import traceback
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["recorded"]


def _strings(value: Any, depth: int = 0) -> Iterator[str]:
    """What a tracker records of ``value``."""
    if depth > 6:
        return
    if isinstance(value, str):
        yield value
    elif isinstance(value, bytes | bytearray):
        yield bytes(value).decode(errors="replace")
    elif isinstance(value, Mapping):
        for k, v in value.items():
            yield from _strings(k, depth + 1)
            yield from _strings(v, depth + 1)
    elif isinstance(value, list | tuple | set | frozenset):
        for v in value:
            yield from _strings(v, depth + 1)
    else:
        try:
            yield repr(value)
        except Exception:  # a tracker shows a failed repr as such
            return


def recorded(exc: BaseException) -> str:
    """The locals of every frame a tracker records of ``exc`` (and the exceptions it
    shows with it), and their rendering with ``capture_locals``."""
    out: list[str] = []
    seen: BaseException | None = exc
    while seen is not None:
        tb = seen.__traceback__
        while tb is not None:
            for name, value in tb.tb_frame.f_locals.items():
                out.append(name)
                out.extend(_strings(value))
            tb = tb.tb_next
        seen = seen.__cause__ or (None if seen.__suppress_context__ else seen.__context__)
    out.extend(traceback.TracebackException.from_exception(exc, capture_locals=True).format())
    return "\n".join(out)
