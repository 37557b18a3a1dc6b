"""``clusters``: a provider whose clusters you add and remove from code."""

from __future__ import annotations

from mcruntime.multicluster import PROVIDER_API_VERSION, Clusters
from mcruntime.plugins import ProviderOptions, ProviderSpec, hookimpl

__all__ = ["Provider", "Options"]


class Options(ProviderOptions):
    """No options: clusters come from [`Provider.add()`][mcruntime.multicluster.Clusters.add]."""


class Provider(Clusters):
    """Clusters added with [`add()`][mcruntime.multicluster.Clusters.add] and removed with [`remove()`][mcruntime.multicluster.Clusters.remove], at any time."""

    def __init__(self, options: Options | None = None) -> None:
        super().__init__("clusters")


@hookimpl
def mcruntime_providers() -> list[ProviderSpec]:
    return [
        ProviderSpec(
            "clusters",
            Options,
            Provider,
            "clusters added and removed from code",
            api_version=PROVIDER_API_VERSION,
        )
    ]
