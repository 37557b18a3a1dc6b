"""mcruntime provider ``cluster-inventory``: clusters from ClusterProfiles.

Each ClusterProfile (``multicluster.x-k8s.io/v1alpha1``, the SIG-Multicluster
Cluster Inventory API) of a management cluster whose ``ControlPlaneHealthy``
condition is True is a cluster named ``<namespace>/<name>``. Credentials come
from a labelled kubeconfig Secret per profile, or from the profile's access
providers with an exec credential plugin configured by the user.
"""

from __future__ import annotations

from mcruntime_cluster_inventory._crd import CLUSTER_PROFILE_CRD
from mcruntime_cluster_inventory._credentials import (
    EXTENSION_ADDITIONAL_ARGS,
    EXTENSION_ADDITIONAL_ENVS,
    SECRET_DATA_KEY,
    SECRET_LABEL_CONSUMER,
    SECRET_LABEL_PROFILE,
    AccessProvider,
    AccessProviderStrategy,
    CredentialStrategy,
    ExecConfig,
    SecretStrategy,
)
from mcruntime_cluster_inventory._provider import (
    CLUSTER_PROFILES,
    CONDITION_CONTROL_PLANE_HEALTHY,
    DEFAULT_UNHEALTHY_GRACE_PERIOD,
    MANAGEMENT_CLUSTER_NAME,
    Options,
    Provider,
    cluster_name,
    control_plane_healthy,
)

__all__ = [
    "CLUSTER_PROFILE_CRD",
    "CLUSTER_PROFILES",
    "CONDITION_CONTROL_PLANE_HEALTHY",
    "DEFAULT_UNHEALTHY_GRACE_PERIOD",
    "EXTENSION_ADDITIONAL_ARGS",
    "EXTENSION_ADDITIONAL_ENVS",
    "MANAGEMENT_CLUSTER_NAME",
    "SECRET_DATA_KEY",
    "SECRET_LABEL_CONSUMER",
    "SECRET_LABEL_PROFILE",
    "AccessProvider",
    "AccessProviderStrategy",
    "CredentialStrategy",
    "ExecConfig",
    "Options",
    "Provider",
    "SecretStrategy",
    "cluster_name",
    "control_plane_healthy",
]
