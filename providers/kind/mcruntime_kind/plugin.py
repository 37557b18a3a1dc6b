"""The plugin module named by the ``kind`` entry point."""

from __future__ import annotations

from mcruntime.plugins import ProviderSpec, hookimpl
from mcruntime_kind._provider import Options, Provider


@hookimpl
def mcruntime_providers() -> list[ProviderSpec]:
    return [
        ProviderSpec(
            "kind", Options, Provider.from_options, "the local kind clusters", api_version="1.0"
        )
    ]
