"""Regular expressions a user gives the server (a CRD's ``pattern``, CEL's ``matches``,
``find`` and ``findAll``), compiled and matched as Go's ``regexp`` does: with RE2, the
engine Go's ``regexp`` follows (no lookaround nor backreferences; ``$`` is the end of the
text, ``\\d`` ASCII digits; ``\\z``, ``\\pL``, ``\\Q..\\E`` and flags mid-pattern taken).

A pattern RE2 refuses raises `GoRegexpError`, worded as Go's ``regexp/syntax`` words it
(``error parsing regexp: missing closing ): `a(b```). Not followed: the few patterns
RE2 takes and Go refuses (``\\C``, a capture name given twice, ``[\\d-z]``).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

import re2

__all__ = ["GoRegexpError", "compile_go", "find_all"]


class GoRegexpError(ValueError):
    """A pattern Go's ``regexp.Compile`` refuses; ``str()`` is Go's error text."""


#: RE2's words for an error (``RE2::ErrorCode``) -> Go's (``syntax.ErrorCode``)
_GO_CODES = {
    "unexpected error": "regexp/syntax: internal error",
    "invalid escape sequence": "invalid escape sequence",
    "invalid character class": "invalid character class",
    "invalid character class range": "invalid character class range",
    "missing ]": "missing closing ]",
    "missing )": "missing closing )",
    "unexpected )": "unexpected )",
    "trailing \\": "trailing backslash at end of expression",
    "no argument for repetition operator": "missing argument to repetition operator",
    "invalid repetition size": "invalid repeat count",
    "bad repetition operator": "invalid nested repetition operator",
    "invalid perl operator": "invalid or unsupported Perl syntax",
    "invalid UTF-8": "invalid UTF-8",
    "invalid named capture group": "invalid named capture",
    "pattern too large - compile failed": "expression too large",
}


def _go_error(text: str) -> str:
    code, arg = text, ""
    if code not in _GO_CODES:
        code, _, arg = text.partition(": ")
    return f"error parsing regexp: {_GO_CODES.get(code, code)}: `{arg}`"


@functools.lru_cache(maxsize=1024)
def compile_go(pattern: str) -> Any:
    """``pattern`` compiled (an ``re2`` regexp, with ``search`` and ``finditer`` as
    Python's ``re``; positions count code points); `GoRegexpError` when Go refuses it."""
    options = re2.Options()
    options.log_errors = False  # RE2 would print its refusals to stderr
    try:
        return re2.compile(pattern, options)
    except re2.error as e:
        detail = e.args[0] if e.args else ""
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        raise GoRegexpError(_go_error(str(detail))) from None


def find_all(pattern: str, text: str, n: int = -1) -> list[str]:
    """Go's ``FindAllString(text, n)``: successive non-overlapping matches, an empty match
    right after a previous match left out (Python's ``findall`` keeps it)."""
    return [text[start:end] for start, end in _all(compile_go(pattern), text, n)]


def _all(regexp: Any, text: str, n: int) -> Iterator[tuple[int, int]]:
    pos, found, previous_end = 0, 0, -1
    while (n < 0 or found < n) and pos <= len(text):
        m = regexp.search(text, pos)
        if m is None:
            return
        start, end = m.span()
        accept = not (end == start and start == previous_end)
        pos = end if end > start else end + 1
        previous_end = end
        if accept:
            found += 1
            yield start, end
