"""Suite-wide setup: load the mcruntime pytest plugin when mcruntime is not pip-installed,
enable ``pytester`` (plugin tests), and skip ``@pytest.mark.slow`` unless ``MCRUNTIME_SLOW=1``."""

from __future__ import annotations

import os

import pytest

pytest_plugins = ["pytester"]


def pytest_configure(config: pytest.Config) -> None:
    if not config.pluginmanager.has_plugin("mcruntime"):
        from mcruntime.envtest import pytest_plugin

        if not config.pluginmanager.is_registered(pytest_plugin):
            config.pluginmanager.register(pytest_plugin, "mcruntime")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("MCRUNTIME_SLOW") == "1":
        return
    skip = pytest.mark.skip(reason="slow test; set MCRUNTIME_SLOW=1 to run it")
    for item in items:
        if item.get_closest_marker("slow") is not None:
            item.add_marker(skip)
