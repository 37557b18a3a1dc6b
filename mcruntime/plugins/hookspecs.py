"""Hook specifications of mcruntime plugins (pluggy project name ``mcruntime``).

A provider plugin is an ordinary distribution that declares an entry point in
the group ``mcruntime.providers`` pointing at a module (or object) with
``@hookimpl``-marked functions:

    [project.entry-points."mcruntime.providers"]
    my-provider = "my_package.plugin"

and in ``my_package/plugin.py``:

    from mcruntime.plugins import ProviderSpec, hookimpl

    @hookimpl
    def mcruntime_providers():
        return [ProviderSpec(name="my-provider", options=MyOptions, factory=MyProvider.from_options, api_version="1.0")]
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from mcruntime.plugins._spec import ProviderSpec

PROJECT = "mcruntime"
ENTRY_POINT_GROUP = "mcruntime.providers"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def mcruntime_providers() -> list[ProviderSpec]:
    """Called once when plugins are loaded; returns the providers this plugin offers.

    Each [`ProviderSpec`][mcruntime.plugins.ProviderSpec] names the provider, its
    pydantic options model, and a factory taking a validated options object and
    returning a [`Provider`][mcruntime.multicluster.Provider]. Must not do I/O.
    """
    raise NotImplementedError
