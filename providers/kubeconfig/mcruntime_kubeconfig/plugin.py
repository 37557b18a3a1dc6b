"""The plugin module named by the ``kubeconfig`` entry point."""

from __future__ import annotations

from mcruntime.plugins import ProviderSpec, hookimpl
from mcruntime_kubeconfig._provider import Options, Provider


@hookimpl
def mcruntime_providers() -> list[ProviderSpec]:
    return [
        ProviderSpec(
            "kubeconfig",
            Options,
            Provider.from_options,
            "clusters from labelled kubeconfig Secrets in a management cluster",
            # the provider API this plugin was written for (mcruntime refuses it otherwise)
            api_version="1.0",
        )
    ]
