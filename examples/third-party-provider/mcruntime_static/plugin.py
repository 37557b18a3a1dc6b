"""The plugin module named by the entry point: one hook implementation."""

from __future__ import annotations

from mcruntime.plugins import ProviderSpec, hookimpl
from mcruntime_static import Options, StaticProvider


@hookimpl
def mcruntime_providers() -> list[ProviderSpec]:
    return [
        ProviderSpec(
            "static",
            Options,
            StaticProvider,
            "a static set of kubeconfig contexts",
            api_version="1.0",
        )
    ]
