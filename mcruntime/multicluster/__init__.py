"""The multi-cluster contract: providers discover clusters and engage them with the manager.

A provider hands each cluster to an [`Aware`][mcruntime.multicluster.Aware] (the manager) with
``engage(name, cluster, lifetime)``; the engagement lasts until ``lifetime``
(a stop event) is set. Providers are deliberately tiny: [`Provider`][mcruntime.multicluster.Provider]
answers ``get`` and ``index_field``; a provider that discovers clusters over
time also implements [`ProviderRunnable`][mcruntime.multicluster.ProviderRunnable].

``LOCAL`` (``""``) names the local cluster; ``display_name(name)`` is how a
cluster name reads in logs and errors (``local`` for it).

``PROVIDER_API_VERSION`` is the version of this contract; a third-party
provider may check it (major number) against the version it was built for.
"""

from __future__ import annotations

from mcruntime._exports import publish
from mcruntime._lifetime import Lifetime, on_end
from mcruntime._local import LOCAL, display_name
from mcruntime.errors import ClusterNotFound
from mcruntime.multicluster._clusters import Clusters
from mcruntime.multicluster._management import (
    MANAGEMENT_CLUSTER_NAME,
    MAX_DISCOVERY_WAIT,
    ManagementCluster,
    management_list_error,
    wait_for_first_lists,
    wait_until_served,
)
from mcruntime.multicluster._types import (
    PROVIDER_API_VERSION,
    Aware,
    ClusterName,
    IndexFunc,
    Provider,
    ProviderRunnable,
)

__all__ = [
    "LOCAL",
    "MANAGEMENT_CLUSTER_NAME",
    "MAX_DISCOVERY_WAIT",
    "PROVIDER_API_VERSION",
    "Aware",
    "ClusterName",
    "ClusterNotFound",
    "Clusters",
    "IndexFunc",
    "ManagementCluster",
    "Lifetime",
    "Provider",
    "ProviderRunnable",
    "display_name",
    "management_list_error",
    "on_end",
    "wait_for_first_lists",
    "wait_until_served",
]

publish(__name__, globals(), __all__)
