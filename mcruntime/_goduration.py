"""Durations written as Go writes them (``30s``, ``1m30s``, ``1.5h``, ``500ms``).

Read where mcruntime meets Go's ``time.ParseDuration`` from the outside: a request's
``?timeout=`` (what an API server gives a webhook, `mcruntime._serving.asked_timeout`)
and the durations of the command line's manager flags, as a kubebuilder ``main.go``
takes them (`mcruntime.cli`).
"""

from __future__ import annotations

import re

__all__ = ["parse_go_duration"]

#: Go's duration units, in seconds (micro as ``us``, ``µs`` U+00B5 or ``μs`` U+03BC)
_UNIT_SECONDS = {
    "ns": 1e-9,
    "us": 1e-6,
    "\u00b5s": 1e-6,
    "\u03bcs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_PART = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|\u00b5s|\u03bcs|ms|s|m|h)")


def parse_go_duration(text: str) -> float | None:
    """Seconds of ``text``, a sequence of numbers each with its unit and no sign; None when
    ``text`` is empty or not such a duration."""
    seconds, at = 0.0, 0
    while at < len(text):
        part = _PART.match(text, at)
        if part is None:
            return None
        seconds += float(part.group(1)) * _UNIT_SECONDS[part.group(2)]
        at = part.end()
    return seconds if text else None
