"""Values as Go's ``%#v`` prints them in kube-apiserver's ``Invalid value: ...`` messages
(``field.Error.ErrorBody``): the few shapes envtest's refusals need."""

from __future__ import annotations

from typing import Any

__all__ = ["go_map", "go_selector", "go_string"]


def go_string(value: Any) -> str:
    """A Go string literal (``%q``)."""
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def go_map(labels: Any) -> str:
    """A ``map[string]string`` (keys sorted, as ``fmt`` prints maps; nil when not a dict)."""
    if not isinstance(labels, dict):
        return "map[string]string(nil)"
    pairs = ", ".join(f"{go_string(k)}:{go_string(labels[k])}" for k in sorted(labels))
    return f"map[string]string{{{pairs}}}"


def go_selector(selector: Any) -> str:
    """A ``v1.LabelSelector``."""
    sel = selector if isinstance(selector, dict) else {}
    exprs = sel.get("matchExpressions")
    if isinstance(exprs, list):
        items = []
        for e in exprs:
            e = e if isinstance(e, dict) else {}
            values = e.get("values")
            shown = (
                "[]string{" + ", ".join(go_string(v) for v in values) + "}"
                if isinstance(values, list)
                else "[]string(nil)"
            )
            items.append(
                f"v1.LabelSelectorRequirement{{Key:{go_string(e.get('key', ''))}, "
                f"Operator:{go_string(e.get('operator', ''))}, Values:{shown}}}"
            )
        match_exprs = "[]v1.LabelSelectorRequirement{" + ", ".join(items) + "}"
    else:
        match_exprs = "[]v1.LabelSelectorRequirement(nil)"
    return (
        f"v1.LabelSelector{{MatchLabels:{go_map(sel.get('matchLabels'))}, "
        f"MatchExpressions:{match_exprs}}}"
    )
