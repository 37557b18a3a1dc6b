"""Helpers controller authors reach for: create-or-update/patch, owner references, finalizers, conditions;
cross-cluster ownership and its garbage collector.

After controller-runtime's ``controllerutil`` package and apimachinery's
``meta`` status-condition helpers. Every helper takes a plain dict, a pydantic
[`Resource`][mcruntime.client.Resource] or a ``kubernetes`` model object
(the cross-cluster ownership helpers take dicts). Cross-cluster owner records
and the collector are described in docs/concepts/ownership.md.
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
from mcruntime.controllerutil._crosscluster import (
    ANNOTATION_CLEARED,
    ANNOTATION_OWNER,
    FINALIZER_FOREGROUND,
    FINALIZER_ORPHAN,
    LABEL_OWNER_CLUSTER,
    LABEL_OWNER_UID,
    CrossClusterOwnerConflict,
    OwnerRecord,
    Propagation,
    get_cross_cluster_owner,
    is_cross_cluster_owned_by,
    remove_cross_cluster_owner,
    set_cross_cluster_owner,
    set_cross_cluster_propagation,
)
from mcruntime.controllerutil._finalizers import (
    add_finalizer,
    contains_finalizer,
    is_being_deleted,
    remove_finalizer,
)
from mcruntime.controllerutil._gc import CrossClusterGarbageCollector
from mcruntime.controllerutil._owner import (
    AlreadyOwnedError,
    get_controller_of,
    has_controller_reference,
    has_owner_reference,
    remove_controller_reference,
    remove_owner_reference,
    set_controller_reference,
    set_owner_reference,
)

__all__ = [
    "ANNOTATION_CLEARED",
    "ANNOTATION_OWNER",
    "FINALIZER_FOREGROUND",
    "FINALIZER_ORPHAN",
    "LABEL_OWNER_CLUSTER",
    "LABEL_OWNER_UID",
    "AlreadyOwnedError",
    "Condition",
    "CrossClusterGarbageCollector",
    "CrossClusterOwnerConflict",
    "OperationResult",
    "OwnerRecord",
    "Propagation",
    "add_finalizer",
    "contains_finalizer",
    "create_or_patch",
    "create_or_update",
    "find_status_condition",
    "get_controller_of",
    "get_cross_cluster_owner",
    "has_controller_reference",
    "has_owner_reference",
    "is_being_deleted",
    "is_cross_cluster_owned_by",
    "is_status_condition_false",
    "is_status_condition_true",
    "remove_controller_reference",
    "remove_cross_cluster_owner",
    "remove_finalizer",
    "remove_owner_reference",
    "remove_status_condition",
    "set_controller_reference",
    "set_cross_cluster_owner",
    "set_cross_cluster_propagation",
    "set_owner_reference",
    "set_status_condition",
]

publish(__name__, globals(), __all__)
