"""Field labels: the names a field selector may use for a kind, and the values it compares.

kube-apiserver renames old labels (the kind's field label conversion), then matches the
selector against the kind's *selectable fields*, which its registry computes for Pods and
core/v1 Events; `mcruntime._selectors` holds those rules, shared with the cache.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mcruntime._selectors import FieldSelector, selectable_fields, with_field_labels_converted

if TYPE_CHECKING:
    from mcruntime.envtest._registry import ServedResource

__all__ = ["converted", "selectable"]


def converted(res: ServedResource, fields: FieldSelector) -> FieldSelector:
    """``fields`` with the labels the kind's conversion function renames renamed."""
    if res.custom:
        return fields
    return with_field_labels_converted(res.group, res.kind, fields)


def selectable(res: ServedResource, obj: dict[str, Any]) -> Mapping[str, Any]:
    """What a field selector reads of ``obj``: the kind's selectable fields where its
    registry computes them (Pods, Events), else ``obj`` itself."""
    if res.custom:
        return obj
    return selectable_fields(res.group, res.kind, obj)
