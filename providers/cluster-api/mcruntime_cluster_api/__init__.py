"""mcruntime provider ``cluster-api``: the workload clusters of a Cluster API management cluster.

Each ``cluster.x-k8s.io`` Cluster (v1beta2 or v1beta1) whose control plane is
initialized is engaged as ``<namespace>/<name>``, from the kubeconfig Cluster
API keeps in Secret ``<name>-kubeconfig`` (key ``value``) next to it.
"""

from __future__ import annotations

from mcruntime_cluster_api._provider import (
    CLUSTER_NAME_LABEL,
    DEFAULT_UNREADY_GRACE_PERIOD,
    GROUP,
    KUBECONFIG_SECRET_KEY,
    KUBECONFIG_SECRET_SUFFIX,
    MANAGEMENT_CLUSTER_NAME,
    VERSIONS,
    Options,
    Provider,
    control_plane_initialized,
)

__all__ = [
    "CLUSTER_NAME_LABEL",
    "DEFAULT_UNREADY_GRACE_PERIOD",
    "GROUP",
    "KUBECONFIG_SECRET_KEY",
    "KUBECONFIG_SECRET_SUFFIX",
    "MANAGEMENT_CLUSTER_NAME",
    "VERSIONS",
    "Options",
    "Provider",
    "control_plane_initialized",
]
