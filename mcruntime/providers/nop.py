"""``nop``: a provider with no clusters.

A manager with it has only its local cluster; since a provider is set,
controllers engage that cluster only when built with ``engage_with_local_cluster()``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NoReturn

from mcruntime.errors import ClusterNotFound
from mcruntime.multicluster import PROVIDER_API_VERSION
from mcruntime.plugins import ProviderOptions, ProviderSpec, hookimpl

if TYPE_CHECKING:
    from mcruntime.client import KindLike
    from mcruntime.multicluster import IndexFunc

__all__ = ["Provider", "Options"]


class Options(ProviderOptions):
    """No options."""


class Provider:
    """Knows no cluster: ``get`` always raises [`ClusterNotFound`][mcruntime.errors.ClusterNotFound]."""

    def __init__(self, options: Options | None = None) -> None:
        pass

    def get(self, cluster_name: str) -> NoReturn:
        raise ClusterNotFound(f"provider 'nop' has no clusters (asked for {cluster_name!r})")

    def index_field(self, kind: KindLike, field: str, fn: IndexFunc) -> None:
        pass


@hookimpl
def mcruntime_providers() -> list[ProviderSpec]:
    return [ProviderSpec("nop", Options, Provider, "no clusters", api_version=PROVIDER_API_VERSION)]
