"""``single``: exactly one named cluster."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mcruntime.multicluster import PROVIDER_API_VERSION, Clusters
from mcruntime.plugins import ProviderOptions, ProviderSpec, hookimpl

if TYPE_CHECKING:
    from mcruntime.cluster import Cluster

__all__ = ["Provider", "Options"]


class Options(ProviderOptions):
    """``name`` of the cluster; ``kubeconfig``/``context`` locate it (default kubeconfig when unset)."""

    name: str = "single"
    kubeconfig: str | None = None
    context: str | None = None


class Provider(Clusters):
    """Engages one cluster under ``name``."""

    def __init__(self, name: str, cluster: Cluster) -> None:
        super().__init__("single")
        self.add(name, cluster)

    @classmethod
    def from_options(cls, options: Options) -> Provider:
        from mcruntime.cluster import Cluster

        return cls(
            options.name,
            Cluster.from_kubeconfig(options.kubeconfig, context=options.context, name=options.name),
        )


@hookimpl
def mcruntime_providers() -> list[ProviderSpec]:
    return [
        ProviderSpec(
            "single",
            Options,
            Provider.from_options,
            "one named cluster",
            api_version=PROVIDER_API_VERSION,
        )
    ]
