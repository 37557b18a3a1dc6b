"""A pod's conditions as kube-apiserver's writes set them (``podutil.UpdatePodCondition``)."""

from __future__ import annotations

from typing import Any

from mcruntime.envtest._names import now

__all__ = ["update_pod_condition"]


def update_pod_condition(conditions: list[Any], wanted: dict[str, Any]) -> list[Any]:
    """``conditions`` with the one of ``wanted``'s type replaced by ``wanted`` (or added): its
    ``lastTransitionTime`` is kept when its status does not change, else now."""
    out, found = [], False
    for c in conditions:
        if isinstance(c, dict) and c.get("type") == wanted["type"]:
            found = True
            same = c.get("status") == wanted["status"] and c.get("lastTransitionTime")
            c = {**wanted, "lastTransitionTime": c["lastTransitionTime"] if same else now()}
        out.append(c)
    if not found:
        out.append({**wanted, "lastTransitionTime": now()})
    return out
