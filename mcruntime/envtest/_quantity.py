"""Resource quantities as kube-apiserver stores them: parsed, and written back canonical.

A ``resource.Quantity`` (a container's ``resources``, a claim's ``storage``, a node's
``capacity``, a quota's ``hard``, ...) is decoded into a number and encoded again, so
what a client reads back is the canonical form of what it wrote: ``1.5Gi`` is stored as
``1536Mi``, ``0.5`` as ``500m``, ``2000m`` as ``2``, ``1024Mi`` as ``1Gi``. A controller
that compares the quantities it rendered with the ones it reads must compare values,
not strings, or it updates forever: on envtest as on a cluster.

The rules are apimachinery's (``pkg/api/resource``): a value is kept to nano precision
(rounded away from zero), in the format its suffix chose (binary ``Ki``..``Ei``, decimal
``n``..``E`` or none, or an exponent ``e3``). On output a binary value below 1024, or not
whole, is written in decimal; a decimal one with the largest exponent that is a multiple
of three and leaves a whole mantissa. A value that is not a quantity is refused as the
decoder refuses it (400).

Where the quantities are comes from the protobuf schema of the built-in kinds (the
``Quantity`` fields and maps of them, through every nested message), so no kind is
listed by hand.
"""

from __future__ import annotations

import re
from decimal import ROUND_UP, Context, Decimal, localcontext
from functools import cache
from typing import Any, Final

from mcruntime.envtest._protobuf import message_name, schema

__all__ = ["FORMAT_ERROR", "canonical", "canonicalize", "parse", "parse_error"]

_SPLIT = r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
#: apimachinery's errors for a string that is not a quantity (``ErrFormatWrong``,
#: ``ErrNumeric``, ``ErrSuffix``): the decoder's, so a request's 400
FORMAT_ERROR: Final = f"quantities must match the regular expression '{_SPLIT}'"
_NUMERIC_ERROR: Final = "unable to parse numeric part of quantity"
_SUFFIX_ERROR: Final = "unable to parse quantity's suffix"

_QUANTITY_MESSAGE = "k8s.io.apimachinery.pkg.api.resource.Quantity"
_SPLIT_RE = re.compile(_SPLIT)
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)")
_EXPONENT = re.compile(r"[eE]([+-]?\d+)")
_BINARY = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
_DECIMAL = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
_EXPONENTS = {s: e for e, s in _DECIMAL.items()}
_NANO = 10**9
#: the largest power of ten a quantity may have here (int64's range is 10**18)
_MAX_EXPONENT = 64
#: enough digits for any such number to the nano, so nothing is rounded but on purpose
_EXACT = Context(prec=2 * _MAX_EXPONENT + 20)

#: the formats a quantity keeps (apimachinery's ``Format``)
BINARY_SI, DECIMAL_SI, DECIMAL_EXPONENT = "BinarySI", "DecimalSI", "DecimalExponent"


def parse(value: object) -> tuple[int, str] | None:
    """``value`` (a quantity string, or a JSON number) as (nanos, format); None when it is
    not a quantity."""
    parsed = _parse(value)
    return None if isinstance(parsed, str) else parsed


def parse_error(value: object) -> str | None:
    """apimachinery's error for ``value`` when it is not a quantity, else None."""
    parsed = _parse(value)
    return parsed if isinstance(parsed, str) else None


def _parse(value: object) -> tuple[int, str] | str:
    """(nanos, format), or the error that says why ``value`` is not a quantity."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return FORMAT_ERROR
    m = _SPLIT_RE.match(str(value).strip())
    if m is None:
        return FORMAT_ERROR
    number, suffix = m.groups()
    if _NUMBER.fullmatch(number) is None:
        return _NUMERIC_ERROR
    n = Decimal(number)
    if suffix in _BINARY[1:]:
        scale, fmt = Decimal(1 << (10 * _BINARY.index(suffix))), BINARY_SI
    elif suffix in _EXPONENTS:
        scale, fmt = Decimal(10) ** _EXPONENTS[suffix], DECIMAL_SI
    elif (e := _EXPONENT.fullmatch(suffix)) is not None:
        if abs(int(e.group(1))) > _MAX_EXPONENT:
            return _NUMERIC_ERROR  # no resource is that large (or small): not a number to build
        scale, fmt = Decimal(10) ** int(e.group(1)), DECIMAL_EXPONENT
    else:
        return _SUFFIX_ERROR
    with localcontext(_EXACT):
        n *= scale
        if n.adjusted() > _MAX_EXPONENT:
            return _NUMERIC_ERROR
        return int(n.scaleb(9).to_integral_value(ROUND_UP)), fmt


def canonical(value: object) -> str | None:
    """The canonical text of quantity ``value`` (None when it is not a quantity)."""
    parsed = parse(value)
    return None if parsed is None else _text(*parsed)


def _text(nanos: int, fmt: str) -> str:
    if nanos == 0:
        return "0"
    sign, a = ("-", -nanos) if nanos < 0 else ("", nanos)
    if fmt == BINARY_SI:
        if a < 1024 * _NANO or a % _NANO:  # small, or not whole: written in decimal
            fmt = DECIMAL_SI
        else:
            m, e = a // _NANO, 0
            while m % 1024 == 0 and e < len(_BINARY) - 1:
                m, e = m // 1024, e + 1
            return f"{sign}{m}{_BINARY[e]}"
    m, e = a, -9
    while m % 10 == 0:
        m, e = m // 10, e + 1
    shift = e % 3  # down to a multiple of three, the mantissa stays whole
    m, e = m * 10**shift, e - shift
    if fmt == DECIMAL_EXPONENT:
        return f"{sign}{m}" + (f"e{e}" if e else "")
    if e > 18:  # beyond E: the mantissa takes the rest
        m, e = m * 10 ** (e - 18), 18
    return f"{sign}{m}{_DECIMAL[e]}"


# -- where the quantities are --------------------------------------------------------------

#: a field's plan: its label (0 one value, 1 a list, 2 a map) and what is in it: a
#: quantity (None) or the plan of a message
_Plan = dict[str, tuple[int, "dict[str, Any] | None"]]


@cache
def _plans() -> dict[str, _Plan]:
    """The plan of every message that holds a quantity somewhere (others have none)."""
    messages = schema()
    done: dict[str, _Plan | None] = {}

    def plan(message: str, path: frozenset[str]) -> _Plan | None:
        if message in done:
            return done[message]
        if message in path:  # recursive types (JSON schemas) hold no quantity
            return None
        out: _Plan = {}
        for spec in messages[message].values():
            name, typ, label, inline = spec[0], spec[1], spec[2], spec[5]
            if typ == _QUANTITY_MESSAGE:
                out[name] = (label, None)
            elif typ in messages:
                sub = plan(typ, path | {message})
                if sub is None:
                    continue
                if inline and label == 0:
                    out.update(sub)  # an embedded struct: its fields sit beside these
                else:
                    out[name] = (label, sub)
        done[message] = out or None
        return done[message]

    plans = {m: plan(m, frozenset()) for m in messages}
    return {m: p for m, p in plans.items() if p}


@cache
def _plan_of(api_version: str, kind: str) -> _Plan | None:
    return _plans().get(message_name(api_version, kind))


def canonicalize(obj: dict[str, Any], api_version: str, kind: str) -> dict[str, Any]:
    """``obj`` (a built-in ``kind``) with its quantities canonical: a copy where one
    changed, ``obj`` itself where none did. Raises ValueError (apimachinery's words, e.g.
    `FORMAT_ERROR`) for a value that is not a quantity."""
    plan = _plan_of(api_version, kind)
    return obj if plan is None else _apply(obj, plan)


def _apply(value: Any, plan: _Plan) -> Any:
    if not isinstance(value, dict):
        return value
    out = value
    for name, (label, sub) in plan.items():
        v = value.get(name)
        if v is None:
            continue
        if label == 2:
            new: Any = _each(v, sub, dict) if isinstance(v, dict) else v
        elif label == 1:
            new = _each(v, sub, list) if isinstance(v, list) else v
        else:
            new = _one(v, sub)
        if new is not v:
            if out is value:
                out = dict(value)
            out[name] = new
    return out


def _each(values: Any, sub: _Plan | None, kind: type) -> Any:
    items = values.items() if kind is dict else enumerate(values)
    changed = {k: n for k, v in items if (n := _one(v, sub)) is not v}
    if not changed:
        return values
    copy = dict(values) if kind is dict else list(values)
    for k, n in changed.items():
        copy[k] = n
    return copy


def _one(value: Any, sub: _Plan | None) -> Any:
    if sub is not None:
        return _apply(value, sub)
    if value is None:
        return value
    parsed = _parse(value)
    if isinstance(parsed, str):
        raise ValueError(parsed)
    text = _text(*parsed)
    return value if text == value else text
