"""The plugin module named by the ``cluster-api`` entry point."""

from __future__ import annotations

from mcruntime.plugins import ProviderSpec, hookimpl
from mcruntime_cluster_api._provider import Options, Provider


@hookimpl
def mcruntime_providers() -> list[ProviderSpec]:
    return [
        ProviderSpec(
            "cluster-api",
            Options,
            Provider.from_options,
            "the workload clusters of Cluster API (cluster.x-k8s.io Clusters) in a management cluster",
            # the provider API this plugin was written for (mcruntime refuses it otherwise)
            api_version="1.0",
        )
    ]
