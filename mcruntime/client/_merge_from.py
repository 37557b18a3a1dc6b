"""The merge patch between two states of an object (controller-runtime's ``client.MergeFrom``)."""

from __future__ import annotations

from typing import Any

from mcruntime import _patch
from mcruntime.client._resource import to_dict

__all__ = ["merge_from"]


def merge_from(original: Any, modified: Any, *, optimistic_lock: bool = False) -> dict[str, Any]:
    """The JSON merge patch that turns ``original`` into ``modified``, for `Client.patch`.

    controller-runtime's ``client.MergeFrom(original)``: copy the object before
    changing it, change it, then send what changed:

    ```python
    before = copy.deepcopy(deployment)
    deployment["spec"]["replicas"] = 3
    client.patch("apps/v1/Deployment", name, merge_from(before, deployment), namespace)
    ```

    A removed key becomes ``null``; a list is replaced whole; ``{}`` when nothing
    changed. ``optimistic_lock=True`` (``MergeFromWithOptimisticLock``) adds the
    original's ``metadata.resourceVersion``, so the server refuses the patch with
    [`Conflict`][mcruntime.errors.Conflict] when the object changed since it was
    read. Takes dicts, typed resources and ``kubernetes`` models.
    """
    before, after = to_dict(original), to_dict(modified)
    patch: dict[str, Any] = _patch.create_merge_patch(before, after)
    if optimistic_lock:
        version = (before.get("metadata") or {}).get("resourceVersion")
        if not version:
            raise ValueError(
                "merge_from(optimistic_lock=True) needs the original's metadata.resourceVersion "
                "(an object read from the API)"
            )
        metadata = patch.get("metadata")
        patch["metadata"] = {
            **(metadata if isinstance(metadata, dict) else {}),
            "resourceVersion": version,
        }
    return patch
