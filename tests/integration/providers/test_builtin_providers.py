"""The ``single``, ``nop``, ``embedded`` and ``clusters`` providers under a running manager, and the CLI."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

import mcruntime
from mcruntime.cli import add_arguments, manager_from_args
from mcruntime.envtest import wait_for
from mcruntime.errors import ClusterNotFound
from mcruntime.plugins import ProviderError, load_provider
from mcruntime.providers import clusters, embedded, nop, single
from tests.integration.multicluster._mc_helpers import (
    CM,
    Recorder,
    cluster_of,
    configmap,
    configmap_controller,
    create_cms,
    running,
)

pytestmark = pytest.mark.timeout(60)


def test_single_provider_engages_its_one_named_cluster(envtest_server: Any, tmp_path: Path) -> None:
    create_cms(envtest_server, ["one"])
    path = envtest_server.write_kubeconfig(tmp_path / "kubeconfig")
    provider = load_provider("single", name="prod", kubeconfig=str(path))
    assert isinstance(provider, single.Provider)
    mgr = mcruntime.Manager(provider=provider)
    rec = Recorder()
    configmap_controller(mgr, rec)
    with running(mgr):
        wait_for(lambda: rec.saw("prod", "default/one"))
        assert mgr.engaged_clusters() == ["prod"]


def test_nop_provider_leaves_the_local_cluster_to_controllers_that_ask_for_it(
    envtest_server: Any,
) -> None:
    create_cms(envtest_server, ["local-one"])
    mgr = mcruntime.Manager(envtest_server.kubeconfig(), provider=nop.Provider())
    rec = Recorder()
    mcruntime.controller_managed_by(mgr).named("local").for_(
        CM
    ).engage_with_local_cluster().complete(rec)
    with running(mgr):
        wait_for(lambda: rec.saw("", "default/local-one"))
        assert mgr.engaged_clusters() == []
        with pytest.raises(ClusterNotFound):
            mgr.get_cluster("anything")


def test_embedded_provider_runs_a_fleet_that_grows_and_shrinks() -> None:
    provider = load_provider("embedded", clusters=2, prefix="emb")
    assert isinstance(provider, embedded.Provider)
    mgr = mcruntime.Manager(provider=provider)
    rec = Recorder()
    configmap_controller(mgr, rec)
    try:
        with running(mgr):
            wait_for(lambda: mgr.engaged_clusters() == ["emb-0", "emb-1"])
            provider.add_cluster("emb-2")
            wait_for(lambda: "emb-2" in mgr.engaged_clusters())
            for name in mgr.engaged_clusters():
                mgr.get_cluster(name).client.create(configmap("hello"))
            wait_for(
                lambda: rec.seen() >= {(n, "default/hello") for n in ("emb-0", "emb-1", "emb-2")}
            )
            provider.remove_cluster("emb-0")
            wait_for(lambda: mgr.engaged_clusters() == ["emb-1", "emb-2"])
            assert all(s.url.startswith("https://") for s in provider.fleet)
    finally:
        provider.close()


def test_embedded_provider_serves_plain_http_on_request() -> None:
    provider = load_provider("embedded", clusters=1, tls=False)
    assert isinstance(provider, embedded.Provider)
    try:
        server = provider.fleet["cluster-0"]
        assert server.url.startswith("http://")
        provider.get("cluster-0").client.create(configmap("plain"))
        assert server.resource_version
    finally:
        provider.close()


def test_adding_a_name_again_with_another_cluster_re_engages_it(make_envtest_server: Any) -> None:
    a, b = make_envtest_server("a"), make_envtest_server("b")
    create_cms(a, ["from-a"])
    create_cms(b, ["from-b"])
    provider = clusters.Provider()
    first = cluster_of(a, "moving")
    provider.add("moving", first)
    mgr = mcruntime.Manager(provider=provider)
    rec = Recorder(
        lambda req: mgr.get_cluster(req.cluster_name).client.get(CM, req.name, req.namespace)
    )
    configmap_controller(mgr, rec)
    with running(mgr):
        wait_for(lambda: rec.saw("moving", "default/from-a"))
        second = cluster_of(b, "moving")
        provider.add("moving", second)
        wait_for(
            lambda: rec.saw("moving", "default/from-b"), what="the new cluster's objects reconciled"
        )
        assert mgr.get_cluster("moving") is second
        assert first.stopped
        a_count = len([r for r in rec.requests if r.name == "from-a"])
        create_cms(a, ["late-a"])
        create_cms(b, ["late-b"])
        wait_for(lambda: rec.saw("moving", "default/late-b"))
        assert not rec.saw("moving", "default/late-a"), "the replaced cluster is no longer watched"
        assert len([r for r in rec.requests if r.name == "from-a"]) == a_count


def _args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(argv)


def test_cli_builds_a_manager_from_provider_arguments(
    make_envtest_fleet: Any, tmp_path: Path
) -> None:
    fleet = make_envtest_fleet(2)
    fleet_file = fleet.write_kubeconfig(tmp_path / "fleet.yaml")
    create_cms(fleet["cluster-0"], ["via-cli"])
    args = _args(
        [
            "--provider",
            "file",
            "--provider-option",
            f"paths={fleet_file}",
            "--provider-option",
            "interval=0.1",
            "--kubeconfig",
            str(fleet_file),
            "--context",
            "cluster-1",
            "--log-level",
            "warning",
        ]
    )
    assert args.log_level == "WARNING"
    mgr = manager_from_args(args)
    assert mgr.local is not None and mgr.local.rest.host.endswith(str(fleet["cluster-1"].port))
    rec = Recorder()
    mcruntime.controller_managed_by(mgr).named("cm").for_(CM).engage_with_local_cluster().complete(
        rec
    )
    with running(mgr):
        wait_for(lambda: rec.saw(f"{fleet_file}+cluster-0", "default/via-cli"))
        mgr.get_cluster("").client.create(configmap("local-marker"))
        wait_for(lambda: rec.saw("", "default/local-marker"))

    named = manager_from_args(
        _args(
            [
                "--provider",
                "single",
                "--provider-option",
                "name=prod",
                "--provider-option",
                f"kubeconfig={fleet_file}",
                "--provider-option",
                "context=cluster-0",
            ]
        )
    )
    assert isinstance(named.provider, single.Provider) and named.provider.names() == ["prod"]
    assert named.local is None
    named.provider.stop()

    no_provider = manager_from_args(_args(["--kubeconfig", str(fleet_file)]))
    assert no_provider.provider is None and no_provider.local is not None
    no_provider.local.stop()
    with pytest.raises(ProviderError, match="unknown option 'bogus'"):
        manager_from_args(_args(["--provider", "file", "--provider-option", "bogus=1"]))
