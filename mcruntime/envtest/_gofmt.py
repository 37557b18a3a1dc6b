"""Values as kube-apiserver prints them in its ``Invalid value: ...`` messages
(``field.Error.ErrorBody``: Go's ``%#v``, ``null`` for a nil pointer): the few shapes
envtest's refusals need."""

from __future__ import annotations

import json
from typing import Any

__all__ = [
    "go_int_or_string",
    "go_map",
    "go_plain",
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
