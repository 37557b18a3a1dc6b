"""What Go's ``encoding/json`` says of bytes it cannot unmarshal into a
``map[string]interface{}``: kube-apiserver's ``ValidateSecret`` quotes that error for a
``kubernetes.io/dockerconfigjson`` or ``kubernetes.io/dockercfg`` Secret whose
configuration is not a JSON object.

``json.Unmarshal`` first scans the whole input (``checkValid``, the state machine of
``encoding/json/scanner.go``, ported step by step here), so a syntax error anywhere wins;
then a document that is not an object (``null`` is fine) cannot be stored in the map.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["unmarshal_object_error"]

_SPACE = frozenset(b" \t\r\n")
_DIGITS = frozenset(b"0123456789")
_HEX = frozenset(b"0123456789abcdefABCDEF")
_ESCAPES = frozenset(b'bfnrt\\/"')
_OBJECT_KEY, _OBJECT_VALUE, _ARRAY_VALUE = 0, 1, 2
#: ``encoding/json``'s ``maxNestingDepth``
_MAX_DEPTH = 10000
#: what a top-level value that is not an object is called when it cannot be a map
_KINDS = {ord("["): "array", ord('"'): "string", ord("t"): "bool", ord("f"): "bool"}
_MAP = "map[string]interface {}"


class _SyntaxError(Exception):
    pass


def _quote_char(c: int) -> str:
    """``quoteChar``: a byte as the scanner's errors show it (``strconv.Quote`` of the rune
    with that value, in single quotes)."""
    if c == ord("'"):
        return "'\\''"
    if c == ord('"'):
        return "'\"'"
    named = {7: "\\a", 8: "\\b", 12: "\\f", 10: "\\n", 13: "\\r", 9: "\\t", 11: "\\v", 92: "\\\\"}
    if c in named:
        return f"'{named[c]}'"
    if c < 0x20 or c == 0x7F:
        return f"'\\x{c:02x}'"
    if 0x80 <= c <= 0xA0 or c == 0xAD:  # not printable (strconv.IsPrint)
        return f"'\\u{c:04x}'"
    return f"'{chr(c)}'"


_Step = Callable[[int], None]


class _Scanner:
    """``encoding/json``'s scanner: ``step`` takes one byte; an error raises."""

    def __init__(self) -> None:
        self.stack: list[int] = []
        self.end_top = False
        self.step: _Step = self._begin_value

    def _error(self, c: int, context: str) -> None:
        raise _SyntaxError(f"invalid character {_quote_char(c)} {context}")

    def _push(self, c: int, state: int) -> None:
        self.stack.append(state)
        if len(self.stack) > _MAX_DEPTH:
            self._error(c, "exceeded max depth")

    def _pop(self) -> None:
        self.stack.pop()
        if not self.stack:
            self.step, self.end_top = self._end_top, True
        else:
            self.step = self._end_value

    def _begin_value_or_empty(self, c: int) -> None:
        if c in _SPACE:
            return
        if c == ord("]"):
            self._end_value(c)
            return
        self._begin_value(c)

    def _begin_value(self, c: int) -> None:
        if c in _SPACE:
            return
        if c == ord("{"):
            self.step = self._begin_string_or_empty
            self._push(c, _OBJECT_KEY)
        elif c == ord("["):
            self.step = self._begin_value_or_empty
            self._push(c, _ARRAY_VALUE)
        elif c == ord('"'):
            self.step = self._in_string
        elif c == ord("-"):
            self.step = self._neg
        elif c == ord("0"):
            self.step = self._zero
        elif c in b"123456789":
            self.step = self._one
        elif c == ord("t"):
            self.step = self._literal("true", 1)
        elif c == ord("f"):
            self.step = self._literal("false", 1)
        elif c == ord("n"):
            self.step = self._literal("null", 1)
        else:
            self._error(c, "looking for beginning of value")

    def _begin_string_or_empty(self, c: int) -> None:
        if c in _SPACE:
            return
        if c == ord("}"):
            self.stack[-1] = _OBJECT_VALUE
            self._end_value(c)
            return
        self._begin_string(c)

    def _begin_string(self, c: int) -> None:
        if c in _SPACE:
            return
        if c == ord('"'):
            self.step = self._in_string
            return
        self._error(c, "looking for beginning of object key string")

    def _end_value(self, c: int) -> None:
        if not self.stack:
            self.step, self.end_top = self._end_top, True
            self._end_top(c)
            return
        if c in _SPACE:
            self.step = self._end_value
            return
        state = self.stack[-1]
        if state == _OBJECT_KEY:
            if c == ord(":"):
                self.stack[-1] = _OBJECT_VALUE
                self.step = self._begin_value
                return
            self._error(c, "after object key")
        elif state == _OBJECT_VALUE:
            if c == ord(","):
                self.stack[-1] = _OBJECT_KEY
                self.step = self._begin_string
                return
            if c == ord("}"):
                self._pop()
                return
            self._error(c, "after object key:value pair")
        else:
            if c == ord(","):
                self.step = self._begin_value
                return
            if c == ord("]"):
                self._pop()
                return
            self._error(c, "after array element")

    def _end_top(self, c: int) -> None:
        if c not in _SPACE:
            self._error(c, "after top-level value")

    def _in_string(self, c: int) -> None:
        if c == ord('"'):
            self.step = self._end_value
        elif c == ord("\\"):
            self.step = self._in_string_escape
        elif c < 0x20:
            self._error(c, "in string literal")

    def _in_string_escape(self, c: int) -> None:
        if c in _ESCAPES:
            self.step = self._in_string
        elif c == ord("u"):
            self.step = self._unicode_escape(4)
        else:
            self._error(c, "in string escape code")

    def _unicode_escape(self, left: int) -> _Step:
        def step(c: int) -> None:
            if c not in _HEX:
                self._error(c, "in \\u hexadecimal character escape")
            self.step = self._in_string if left == 1 else self._unicode_escape(left - 1)

        return step

    def _neg(self, c: int) -> None:
        if c == ord("0"):
            self.step = self._zero
        elif c in b"123456789":
            self.step = self._one
        else:
            self._error(c, "in numeric literal")

    def _one(self, c: int) -> None:
        if c in _DIGITS:
            return
        self._zero(c)

    def _zero(self, c: int) -> None:
        if c == ord("."):
            self.step = self._dot
        elif c in b"eE":
            self.step = self._exponent
        else:
            self._end_value(c)

    def _dot(self, c: int) -> None:
        if c in _DIGITS:
            self.step = self._dot_digits
            return
        self._error(c, "after decimal point in numeric literal")

    def _dot_digits(self, c: int) -> None:
        if c in _DIGITS:
            return
        if c in b"eE":
            self.step = self._exponent
            return
        self._end_value(c)

    def _exponent(self, c: int) -> None:
        if c in b"+-":
            self.step = self._exponent_sign
            return
        self._exponent_sign(c)

    def _exponent_sign(self, c: int) -> None:
        if c in _DIGITS:
            self.step = self._exponent_digits
            return
        self._error(c, "in exponent of numeric literal")

    def _exponent_digits(self, c: int) -> None:
        if c in _DIGITS:
            return
        self._end_value(c)

    def _literal(self, word: str, at: int) -> _Step:
        def step(c: int) -> None:
            want = word[at]
            if c != ord(want):
                self._error(c, f"in literal {word} (expecting '{want}')")
            self.step = self._end_value if at == len(word) - 1 else self._literal(word, at + 1)

        return step

    def eof(self) -> None:
        """``scanner.eof``: the input ended; a value cut short is an error."""
        if self.end_top:
            return
        self.step(ord(" "))
        if not self.end_top:
            raise _SyntaxError("unexpected end of JSON input")


def unmarshal_object_error(data: bytes) -> str | None:
    """The error ``json.Unmarshal(data, &map[string]interface{}{})`` returns, None when it
    returns none."""
    scanner = _Scanner()
    try:
        for c in data:
            scanner.step(c)
        scanner.eof()
    except _SyntaxError as e:
        return str(e)
    first = data.lstrip(bytes(_SPACE))[:1]
    if first in (b"{", b"n"):
        return None
    kind = _KINDS.get(first[0], "number")
    return f"json: cannot unmarshal {kind} into Go value of type {_MAP}"
