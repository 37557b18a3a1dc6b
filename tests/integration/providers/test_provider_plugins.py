"""Provider plugins: built-ins and the third-party ``static`` example found by name and run end to end."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import mcruntime
from mcruntime.envtest import wait_for
from mcruntime.multicluster import PROVIDER_API_VERSION, Provider, ProviderRunnable
from mcruntime.plugins import ProviderError, available_providers, load_provider
from tests.integration.multicluster._mc_helpers import (
    CM,
    Recorder,
    configmap_controller,
    create_cms,
    running,
)

pytestmark = pytest.mark.timeout(60)

BUILTINS = {"single", "clusters", "file", "namespace", "multi", "nop", "embedded"}


@pytest.fixture
def static_installed() -> None:
    if "static" not in available_providers(reload=True):
        pytest.skip(
            "the example plugin is not installed: pip install -e examples/third-party-provider"
        )


def test_available_providers_lists_the_builtins_and_the_third_party_plugin(
    static_installed: None,
) -> None:
    providers = available_providers()
    assert BUILTINS | {"static"} <= set(providers)
    static = providers["static"]
    assert static.api_version.split(".")[0] == PROVIDER_API_VERSION.split(".")[0]
    assert "clusters" in static.options.model_fields


def test_the_third_party_provider_runs_end_to_end(
    static_installed: None, make_envtest_fleet: Any, tmp_path: Path
) -> None:
    fleet = make_envtest_fleet(2)
    for srv in fleet:
        create_cms(srv, [f"in-{srv.name}"])
    single = fleet["cluster-0"].write_kubeconfig(tmp_path / "one.yaml")
    both = fleet.write_kubeconfig(tmp_path / "fleet.yaml")
    provider = load_provider(
        "static", clusters={"first": str(single), "second": f"{both}#cluster-1"}
    )
    assert isinstance(provider, Provider) and isinstance(provider, ProviderRunnable)
    mgr = mcruntime.Manager(provider=provider)
    rec = Recorder(
        lambda req: mgr.get_cluster(req.cluster_name).client.get(CM, req.name, req.namespace)
    )
    configmap_controller(mgr, rec)
    with running(mgr):
        wait_for(lambda: mgr.engaged_clusters() == ["first", "second"])
        wait_for(
            lambda: (
                rec.seen()
                >= {("first", "default/in-cluster-0"), ("second", "default/in-cluster-1")}
            )
        )


def test_an_unknown_provider_lists_the_installed_ones(static_installed: None) -> None:
    with pytest.raises(ProviderError) as err:
        load_provider("nope")
    msg = str(err.value)
    assert "'nope'" in msg
    for name in BUILTINS | {"static"}:
        assert name in msg


def test_a_bad_option_names_the_option_and_the_provider(static_installed: None) -> None:
    with pytest.raises(ProviderError) as err:
        load_provider("static", clusters="not-a-mapping")
    assert "'static'" in str(err.value) and "'clusters'" in str(err.value)
    with pytest.raises(ProviderError) as err:
        load_provider("static", clusters={}, colour="red")
    assert "'static'" in str(err.value) and "unknown option 'colour'" in str(err.value)
    with pytest.raises(ProviderError) as err:
        load_provider("file", interval=-1)
    assert "'file'" in str(err.value) and "'interval'" in str(err.value)


@pytest.fixture
def fake_distribution(tmp_path: Path) -> Any:
    """Installs (on sys.path) a distribution whose entry points name a broken and a future-API plugin."""
    import importlib
    import sys

    dist = tmp_path / "mcruntime_fake_plugins-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: mcruntime-fake-plugins\nVersion: 1.0\n"
    )
    (dist / "entry_points.txt").write_text(
        "[mcruntime.providers]\nbroken = mcruntime_fake_missing_module\nfuture = mcruntime_fake_future\n"
    )
    (tmp_path / "mcruntime_fake_future.py").write_text(
        "from pydantic import BaseModel\n"
        "from mcruntime.plugins import ProviderSpec, hookimpl\n"
        "class Options(BaseModel):\n    pass\n"
        "@hookimpl\n"
        "def mcruntime_providers():\n"
        "    return [ProviderSpec('future', Options, lambda o: None, api_version='99.0')]\n"
    )
    sys.path.insert(0, str(tmp_path))
    importlib.invalidate_caches()
    try:
        yield
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("mcruntime_fake_future", None)
        importlib.invalidate_caches()
        available_providers(reload=True)


def test_a_plugin_that_fails_to_load_or_targets_another_api_is_reported_not_fatal(
    fake_distribution: None, caplog: pytest.LogCaptureFixture
) -> None:
    providers = available_providers(reload=True)
    assert set(providers) >= BUILTINS, "a broken plugin does not hide the others"
    assert "future" not in providers, "a provider built for another major API version is skipped"
    assert "future" in caplog.text and "99.0" in caplog.text
    assert "broken" in caplog.text
    with pytest.raises(ProviderError, match="'broken' is installed but failed to load"):
        load_provider("broken")
    with pytest.raises(
        ProviderError,
        match=r"'future' is installed but cannot be used: it was built for provider API 99\.0 "
        r"and this mcruntime implements 1\.0",
    ):
        load_provider("future")
