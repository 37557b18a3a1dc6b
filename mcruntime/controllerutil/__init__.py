"""Helpers controller authors reach for: create-or-update/patch, owner references, finalizers, conditions.

After controller-runtime's ``controllerutil`` package and apimachinery's
``meta`` status-condition helpers. Every helper takes a plain dict, a pydantic
[`Resource`][mcruntime.client.Resource] or a ``kubernetes`` model object.
"""

from mcruntime._exports import publish
from mcruntime.controllerutil._conditions import (
    Condition,
    find_status_condition,
    is_status_condition_false,
    is_status_condition_true,
    remove_status_condition,
    set_status_condition,
)
from mcruntime.controllerutil._create_or_update import (
    OperationResult,
    create_or_patch,
    create_or_update,
)
from mcruntime.controllerutil._finalizers import add_finalizer, contains_finalizer, remove_finalizer
from mcruntime.controllerutil._owner import (
    AlreadyOwnedError,
    has_controller_reference,
    remove_owner_reference,
    set_controller_reference,
    set_owner_reference,
)

__all__ = [
    "AlreadyOwnedError",
    "Condition",
    "OperationResult",
    "add_finalizer",
    "contains_finalizer",
    "create_or_patch",
    "create_or_update",
    "find_status_condition",
    "has_controller_reference",
    "is_status_condition_false",
    "is_status_condition_true",
    "remove_finalizer",
    "remove_owner_reference",
    "remove_status_condition",
    "set_controller_reference",
    "set_owner_reference",
    "set_status_condition",
]

publish(__name__, globals(), __all__)
