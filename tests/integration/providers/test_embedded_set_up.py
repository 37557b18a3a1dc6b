"""The ``embedded`` provider sets each server up (its CRDs, ``prepare``) before engaging it.

A controller of a custom kind must never see a cluster of the fleet that does not
serve its kind yet: with the CRD installed after the engagement, its watch fails
with ``NoKindMatch`` and is retried, which is logged as the cluster's failure.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

import mcruntime
from mcruntime.cluster import Cluster
from mcruntime.crd import generate_crd
from mcruntime.envtest import wait_for
from mcruntime.plugins import ProviderError, load_provider
from mcruntime.providers import embedded
from tests.integration.crd.test_crd_install import Gadget
from tests.integration.multicluster._mc_helpers import Recorder, running

pytestmark = pytest.mark.timeout(60)

GADGET = f"{Gadget.api_version}/{Gadget.kind}"


def _gadget(name: str) -> dict[str, Any]:
    return {
        "apiVersion": Gadget.api_version,
        "kind": Gadget.kind,
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"color": "red"},
    }


def _crd_dir(tmp_path: Path) -> Path:
    crds = tmp_path / "crd" / "bases"
    crds.mkdir(parents=True)
    (crds / "gadgets.yaml").write_text(yaml.safe_dump(generate_crd(Gadget)))
    (crds / "README.md").write_text("not a manifest: skipped")
    return crds


def test_a_custom_kinds_controller_sees_every_cluster_serve_its_kind_from_the_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # as on the command line: --provider-option crds=<dir>
    provider = load_provider("embedded", clusters=2, prefix="crd", crds=str(_crd_dir(tmp_path)))
    assert isinstance(provider, embedded.Provider)
    mgr = mcruntime.Manager(provider=provider)
    rec = Recorder()
    mcruntime.controller_managed_by(mgr).named("gadgets").for_(GADGET).complete(rec)
    caplog.set_level(logging.INFO)
    try:
        with running(mgr):
            wait_for(lambda: mgr.engaged_clusters() == ["crd-0", "crd-1"])
            provider.add_cluster("crd-2")
            wait_for(lambda: "crd-2" in mgr.engaged_clusters())
            for name in mgr.engaged_clusters():
                mgr.get_cluster(name).client.create(_gadget("g"))
            wait_for(lambda: rec.seen() >= {(n, "default/g") for n in ("crd-0", "crd-1", "crd-2")})
    finally:
        provider.close()
    unserved = [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.WARNING and "Gadget" in r.getMessage()
    ]
    assert unserved == []


def test_prepare_runs_on_each_cluster_before_it_is_engaged() -> None:
    engaged_then: dict[str, list[str]] = {}
    mgr: mcruntime.Manager | None = None

    def prepare(cluster: Cluster) -> None:
        cluster.uncached_client.create(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}
        )
        engaged_then[cluster.name] = mgr.engaged_clusters() if mgr is not None else []

    provider = embedded.Provider(embedded.Options(clusters=1, prefix="p"), prepare=prepare)
    mgr = mcruntime.Manager(provider=provider)
    try:
        with running(mgr):
            wait_for(lambda: mgr.engaged_clusters() == ["p-0"])
            provider.add_cluster("p-1")
            wait_for(lambda: "p-1" in mgr.engaged_clusters())
            for name in ("p-0", "p-1"):
                assert mgr.get_cluster(name).uncached_client.get("v1/Namespace", "team")
    finally:
        provider.close()
    assert engaged_then == {"p-0": [], "p-1": ["p-0"]}


def test_a_cluster_whose_set_up_fails_is_not_engaged_and_its_server_is_stopped() -> None:
    def prepare(cluster: Cluster) -> None:
        if cluster.name == "bad":
            raise RuntimeError("set-up failed")

    provider = embedded.Provider(embedded.Options(clusters=1, prefix="s"), prepare=prepare)
    mgr = mcruntime.Manager(provider=provider)
    before = {t.name for t in threading.enumerate()}
    try:
        with running(mgr):
            wait_for(lambda: mgr.engaged_clusters() == ["s-0"])
            with pytest.raises(RuntimeError, match="set-up failed"):
                provider.add_cluster("bad")
            assert "bad" not in provider.fleet.names
            assert "bad" not in provider.names()
            assert mgr.engaged_clusters() == ["s-0"]
            wait_for(
                lambda: (
                    not [
                        t.name
                        for t in threading.enumerate()
                        if "bad" in t.name and t.name not in before
                    ]
                )
            )
    finally:
        provider.close()


def test_a_crds_path_without_crds_is_said_when_the_provider_is_made(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    threads = threading.active_count()
    with pytest.raises(
        ProviderError,
        match="provider 'embedded': option crds: no CustomResourceDefinition in .*empty",
    ):
        load_provider("embedded", clusters=2, crds=str(empty))
    assert threading.active_count() == threads  # no server started
