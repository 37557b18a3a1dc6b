"""Values as kube-apiserver prints them in its ``Invalid value: ...`` messages
(``field.Error.ErrorBody``: Go's ``%#v``, ``null`` for a nil pointer): the few shapes
envtest's refusals need."""

from __future__ import annotations

import json
import re
from decimal import Decimal
from typing import Any

from mcruntime import _json

__all__ = [
    "go_syntax",
    "go_float_v",
    "go_int_or_string",
    "go_json",
    "go_map",
    "go_plain",
    "go_pointer",
    "go_selector",
    "go_string",
    "go_strings",
    "go_value",
]


def go_string(value: Any) -> str:
    """A Go string literal (``%q``: quotes, backslashes and control characters escaped)."""
    return json.dumps(str(value), ensure_ascii=False)


def go_strings(values: Any) -> str:
    """A ``[]string`` (nil when not a list)."""
    if not isinstance(values, list):
        return "[]string(nil)"
    return "[]string{" + ", ".join(go_string(v) for v in values) + "}"


def go_map(labels: Any) -> str:
    """A ``map[string]string`` (keys sorted, as ``fmt`` prints maps; nil when not a dict)."""
    if not isinstance(labels, dict):
        return "map[string]string(nil)"
    pairs = ", ".join(f"{go_string(k)}:{go_string(v)}" for k, v in sorted(labels.items()))
    return f"map[string]string{{{pairs}}}"


def go_selector(selector: Any) -> str:
    """A ``*v1.LabelSelector`` (``null`` when there is none)."""
    if not isinstance(selector, dict):
        return "null"
    exprs = selector.get("matchExpressions")
    if isinstance(exprs, list):
        items = ", ".join(
            f"v1.LabelSelectorRequirement{{Key:{go_string(e.get('key', ''))}, "
            f"Operator:{go_string(e.get('operator', ''))}, Values:{go_strings(e.get('values'))}}}"
            for e in exprs
            if isinstance(e, dict)
        )
        match_exprs = f"[]v1.LabelSelectorRequirement{{{items}}}"
    else:
        match_exprs = "[]v1.LabelSelectorRequirement(nil)"
    return (
        f"v1.LabelSelector{{MatchLabels:{go_map(selector.get('matchLabels'))}, "
        f"MatchExpressions:{match_exprs}}}"
    )


def go_pointer(value: Any) -> str:
    """A pointer as ``%#v`` shows it after its type: ``(nil)``, or the address of what it
    points to (a made-up one: Go's differs from run to run)."""
    return "(nil)" if value is None else "(0xc000100000)"


def go_int_or_string(value: Any) -> str:
    """An ``intstr.IntOrString`` (a JSON number or string): its ``String`` method has a
    pointer receiver, so ``%#v`` prints the struct."""
    if isinstance(value, str):
        return f"intstr.IntOrString{{Type:1, IntVal:0, StrVal:{go_string(value)}}}"
    return f'intstr.IntOrString{{Type:0, IntVal:{value}, StrVal:""}}'


def go_value(value: Any) -> str:
    """A scalar as Go prints it (``null`` for none); a structure as JSON."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return go_string(value)
    return json.dumps(value, sort_keys=True)


def go_plain(value: Any) -> str:
    """An unstructured JSON value as Go's ``%+v`` prints it (``map[a:1 b:[x y]]``: map keys
    sorted, strings bare, ``<nil>`` for null, a whole float without a fraction)."""
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 1e21 else repr(value)
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{go_plain(v)}" for k, v in sorted(value.items())) + "]"
    if isinstance(value, list):
        return "[" + " ".join(go_plain(v) for v in value) + "]"
    return str(value)


_HTML: dict[str, str] = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}


def _go_float(value: float) -> str:
    """A float64 as ``encoding/json`` prints it: ``3``, ``1.5``, ``1e+21``, ``1e-7``."""
    text = repr(value)
    if value != 0 and not 1e-6 <= abs(value) < 1e21:
        return re.sub(r"e-0(\d)$", r"e-\1", text)
    return format(Decimal(text), "f").removesuffix(".0")


def go_json(value: Any) -> str:
    """``value`` as Go's ``json.NewEncoder(w).Encode`` writes it (kube-apiserver's
    ``runtime.Encode(unstructured.UnstructuredJSONScheme, ...)`` of an object decoded from
    YAML): compact, map keys sorted, ``<``, ``>``, ``&``, U+2028 and U+2029 escaped, other
    characters as they are, and a newline at the end. Numbers as kube-apiserver decodes a
    YAML body (``k8s.io/apimachinery/pkg/util/yaml.Unmarshal``): an int64 when the number
    is one, else a float64."""
    return _go_json(value) + "\n"


def _go_json(value: Any) -> str:
    if isinstance(value, dict):
        items = (f"{_go_json(str(k))}:{_go_json(v)}" for k, v in sorted(value.items()))
        return "{" + ",".join(items) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_go_json(v) for v in value) + "]"
    if isinstance(value, str):
        text = json.dumps(value, ensure_ascii=False)
        return re.sub("[<>&\u2028\u2029]", lambda m: _HTML[m.group()], text)
    if isinstance(value, int) and not isinstance(value, bool) and -(2**63) <= value < 2**63:
        return str(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return _go_float(float(value))
    return json.dumps(value)


def go_syntax(value: Any) -> str:
    """Go's ``%#v`` of a value decoded from JSON into ``interface{}``."""
    if value is None:
        return "interface {}(nil)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return _json.dumps(value).decode()
    if isinstance(value, float):
        return go_float_v(value)
    if isinstance(value, dict):
        inner = ", ".join(f"{go_syntax(k)}:{go_syntax(value[k])}" for k in sorted(value))
        return f"map[string]interface {{}}{{{inner}}}"
    if isinstance(value, list):
        return "[]interface {}{" + ", ".join(go_syntax(v) for v in value) + "}"
    return str(value)


def go_float_v(value: float) -> str:
    """Go's ``%v`` of a float64: the shortest digits, in ``e`` form when the exponent is
    below -4 or 6 and more (strconv's ``%g`` at the shortest precision)."""
    if value == 0:
        return "0"
    sign, digits, exp = Decimal(repr(value)).normalize().as_tuple()
    text = "".join(map(str, digits))
    point = len(text) + int(exp)  # digits before the decimal point
    e = point - 1
    minus = "-" if sign else ""
    if e < -4 or e >= 6:
        mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
        return f"{minus}{mantissa}e{'-' if e < 0 else '+'}{abs(e):02d}"
    if point <= 0:
        return f"{minus}0.{'0' * -point}{text}"
    if point >= len(text):
        return f"{minus}{text}{'0' * (point - len(text))}"
    return f"{minus}{text[:point]}.{text[point:]}"
