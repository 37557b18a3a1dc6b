"""The plugin module named by the ``cluster-inventory`` entry point."""

from __future__ import annotations

from mcruntime.plugins import ProviderSpec, hookimpl
from mcruntime_cluster_inventory._provider import Options, Provider


@hookimpl
def mcruntime_providers() -> list[ProviderSpec]:
    return [
        ProviderSpec(
            "cluster-inventory",
            Options,
            Provider.from_options,
            "clusters from ClusterProfiles (multicluster.x-k8s.io/v1alpha1) of a management cluster",
            # the provider API this plugin was written for (mcruntime refuses it otherwise)
            api_version="1.0",
        )
    ]
