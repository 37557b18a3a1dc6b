"""``python -m mcruntime.examples.sync_local_to_remote``: copies in every cluster, gone after the source."""

from __future__ import annotations

import io
import pathlib
import re
from collections.abc import Callable

import pytest
from kubernetes import client

import mcruntime
from mcruntime.cluster import Cluster
from mcruntime.envtest import APIServer, Fleet
from mcruntime.examples import sync_local_to_remote as example
from mcruntime.providers import clusters
from tests.e2e.examples._example_support import (
    ExampleProcess,
    core_api,
    exists,
    leaked_threads,
    reconcile_errors,
    wait_until,
)


def _source(name: str, namespace: str = "default", **data: str) -> dict[str, object]:
    return {
        "metadata": {"name": name, "namespace": namespace, "labels": {example.SYNC_LABEL: "true"}},
        "data": data,
    }


@pytest.mark.timeout(30)
def test_demo_without_arguments_copies_everywhere_and_deletion_removes_copies(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert example.main(["--duration", "6"]) == 0
    out = capsys.readouterr().out
    state = dict(re.findall(r"^state: cluster=(\S+) (?:copies|configmaps): (.*)$", out, re.M))
    # the cluster that joined mid-run got the copies too; the deleted source is gone everywhere
    assert state == {
        "local": "app-config, local-only",
        "cluster-0": "app-config",
        "cluster-1": "app-config",
        "cluster-2": "app-config",
        "cluster-3": "app-config",
    }, out
    assert re.search(
        r"^cluster=local configmap default/feature-flags deleted: copies removed from "
        r"cluster-0, cluster-1, cluster-2, cluster-3, finalizer removed$",
        out,
        re.M,
    ), out
    assert "default/local-only" not in out  # not labelled: never reconciled, never copied
    wait_until(lambda: not leaked_threads(), timeout=5, what=f"threads ended: {leaked_threads()}")


@pytest.mark.timeout(40)
def test_copies_follow_the_source_across_a_changing_fleet(
    tmp_path: pathlib.Path,
    make_envtest_server: Callable[..., APIServer],
    make_envtest_fleet: Callable[..., Fleet],
) -> None:
    local = make_envtest_server("local")
    fleet = make_envtest_fleet(2, prefix="remote")
    fleet_dir = tmp_path / "fleet"
    for server in fleet:
        server.write_kubeconfig(fleet_dir / f"{server.name}.yaml")
    local.write_kubeconfig(tmp_path / "local.yaml")
    src, cores = core_api(local), {s.name: core_api(s) for s in fleet}
    src.create_namespace({"metadata": {"name": "team-a"}})
    src.create_namespaced_config_map("default", _source("before-start", greeting="hi"))
    src.create_namespaced_config_map("team-a", _source("team-config", "team-a", owner="a"))
    src.create_namespaced_config_map(
        "default", {"metadata": {"name": "not-synced"}, "data": {"x": "1"}}
    )

    def copies(core: client.CoreV1Api, namespace: str = "default") -> set[str]:
        items = core.list_namespaced_config_map(
            namespace, label_selector=f"{example.COPY_LABEL}=true"
        ).items
        return {cm.metadata.name for cm in items}

    with ExampleProcess(
        "sync_local_to_remote",
        "--kubeconfig",
        str(tmp_path / "local.yaml"),
        "--provider",
        "file",
        "--provider-option",
        f"paths={fleet_dir}",
        "--provider-option",
        "interval=0.2",
        "--duration",
        "120",
    ) as proc:
        # a source that existed before the start is copied to every cluster, the unlabelled one is not
        for core in cores.values():
            wait_until(
                lambda core=core: copies(core) == {"before-start"}, what="copies of before-start"
            )
        copy = cores["remote-0"].read_namespaced_config_map("before-start", "default")
        assert copy.data == {"greeting": "hi"}
        assert copy.metadata.annotations[example.SOURCE_ANNOTATION] == "default/before-start"
        assert (
            example.FINALIZER
            in src.read_namespaced_config_map("before-start", "default").metadata.finalizers
        )

        # a copy waits for its namespace to exist in that cluster
        assert copies(cores["remote-0"], "team-a") == copies(cores["remote-1"], "team-a") == set()
        cores["remote-1"].create_namespace({"metadata": {"name": "team-a"}})
        wait_until(
            lambda: copies(cores["remote-1"], "team-a") == {"team-config"}, what="copy in team-a"
        )
        assert copies(cores["remote-0"], "team-a") == set()

        # changes to the source reach the copies; copies changed or deleted by hand are put back
        src.patch_namespaced_config_map("before-start", "default", {"data": {"greeting": "hello"}})
        for core in cores.values():
            wait_until(
                lambda core=core: (
                    core.read_namespaced_config_map("before-start", "default").data
                    == {"greeting": "hello"}
                ),
                what="copy updated",
            )
        cores["remote-0"].patch_namespaced_config_map(
            "before-start", "default", {"data": {"greeting": "tampered"}}
        )
        cores["remote-1"].delete_namespaced_config_map("before-start", "default")
        for core in cores.values():
            wait_until(
                lambda core=core: (
                    exists(lambda: core.read_namespaced_config_map("before-start", "default"))
                    and core.read_namespaced_config_map("before-start", "default").data
                    == {"greeting": "hello"}
                ),
                what="copy restored",
            )

        # a cluster joining the fleet gets the copies
        joined = fleet.add("remote-2")
        cores["remote-2"] = core_api(joined)
        joined.write_kubeconfig(fleet_dir / "remote-2.yaml")
        src.create_namespaced_config_map("default", _source("after-join", v="2"))
        wait_until(
            lambda: copies(cores["remote-2"]) == {"before-start", "after-join"},
            what="copies in the new cluster",
        )

        # deleting the source removes every copy, then the finalizer, then the source itself
        src.delete_namespaced_config_map("before-start", "default")
        for core in cores.values():
            wait_until(
                lambda core=core: "before-start" not in copies(core),
                what="copies of before-start removed",
            )
        wait_until(
            lambda: not exists(lambda: src.read_namespaced_config_map("before-start", "default")),
            what="source gone once its finalizer is removed",
        )
        assert all(copies(core) == {"after-join"} for core in cores.values())

        # removing the label removes the copies and the finalizer, the source stays
        src.patch_namespaced_config_map(
            "after-join", "default", {"metadata": {"labels": {example.SYNC_LABEL: None}}}
        )
        for core in cores.values():
            wait_until(lambda core=core: copies(core) == set(), what="copies of after-join removed")
        wait_until(
            lambda: not src.read_namespaced_config_map("after-join", "default").metadata.finalizers,
            what="finalizer removed from the unlabelled source",
        )
        assert "not-synced" not in proc.output

        assert proc.interrupt() == 0, proc.output
        assert "manager stopped" in proc.output


def _fleet_with_fast_health(
    make_envtest_server: Callable[..., APIServer],
    make_envtest_fleet: Callable[..., Fleet],
    members: int,
) -> tuple[APIServer, Fleet, mcruntime.Manager]:
    """A local server, ``members`` remote ones and a manager (not started) whose health
    checks find a frozen member not answering within a second."""
    local = make_envtest_server("local")
    fleet = make_envtest_fleet(members, prefix="remote")
    provider = clusters.Provider()
    for server in fleet:
        provider.add(server.name, Cluster.from_kubeconfig(server.kubeconfig(), name=server.name))
    options = mcruntime.ManagerOptions(
        cluster_health_interval=0.5, cluster_health_timeout=0.5, cluster_health_retry_interval=0.2
    )
    return local, fleet, mcruntime.Manager(local.kubeconfig(), provider=provider, options=options)


@pytest.mark.timeout(60)
def test_a_frozen_member_holds_back_no_other_and_gets_its_copy_once_it_answers(
    make_envtest_server: Callable[..., APIServer],
    make_envtest_fleet: Callable[..., Fleet],
) -> None:
    # the reconcile copies a source to every member in turn: a member that hangs fails its
    # copy at once (the health check found it not answering), the other member's copy is
    # made meanwhile, and the request waits for the frozen one, retried at its first answer
    local, fleet, mgr = _fleet_with_fast_health(make_envtest_server, make_envtest_fleet, 2)
    ctrl = example.build(mgr, out=io.StringIO())
    src, cores = core_api(local), {s.name: core_api(s) for s in fleet}

    def data(core: client.CoreV1Api) -> dict[str, str] | None:
        try:
            return core.read_namespaced_config_map("app", "default").data
        except client.ApiException:
            return None

    mgr.start()
    try:
        src.create_namespaced_config_map("default", _source("app", v="1"))
        for core in cores.values():
            wait_until(lambda core=core: data(core) == {"v": "1"}, what="the first copies")
        fleet.freeze("remote-1")
        wait_until(
            lambda: getattr(mgr.health.state("remote-1"), "stuck", ""),
            what="remote-1 found not answering",
        )
        src.patch_namespaced_config_map("app", "default", {"data": {"v": "2"}})
        wait_until(lambda: data(cores["remote-0"]) == {"v": "2"}, what="the answering member")
        wait_until(
            lambda: [r.key for r in ctrl.waiting_requests().get("remote-1", [])],
            equals=["default/app"],
            what="the request waiting for remote-1",
        )
    finally:
        fleet.thaw("remote-1")
    try:
        wait_until(lambda: data(cores["remote-1"]) == {"v": "2"}, what="the frozen member's copy")
        assert ctrl.waiting_requests() == {}
    finally:
        mgr.stop()


def _there(core: client.CoreV1Api) -> bool:
    """Whether the cluster of ``core`` holds ``default/app`` (the source, or a copy)."""
    return exists(lambda: core.read_namespaced_config_map("app", "default"))


def _copied_everywhere(src: client.CoreV1Api, cores: dict[str, client.CoreV1Api]) -> None:
    """Create the source ``default/app`` and wait for its copy in every member."""
    src.create_namespaced_config_map("default", _source("app", v="1"))
    for core in cores.values():
        wait_until(lambda core=core: _there(core), what="the copies")


@pytest.mark.timeout(60)
def test_a_frozen_member_holds_back_no_other_members_clean_up(
    make_envtest_server: Callable[..., APIServer],
    make_envtest_fleet: Callable[..., Fleet],
) -> None:
    # the source deleted while remote-1 hangs: remote-0's and remote-2's copies go at once,
    # the finalizer stays until remote-1 answers
    local, fleet, mgr = _fleet_with_fast_health(make_envtest_server, make_envtest_fleet, 3)
    example.build(mgr, out=io.StringIO())
    src, cores = core_api(local), {s.name: core_api(s) for s in fleet}
    with mgr:
        _copied_everywhere(src, cores)
        fleet.freeze("remote-1")
        try:
            wait_until(lambda: not mgr.cluster_answering("remote-1"), what="noticed")
            src.delete_namespaced_config_map("app", "default")
            for name in ("remote-0", "remote-2"):
                wait_until(lambda n=name: not _there(cores[n]), what=f"{name}'s copy deleted")
            assert _there(src), "the finalizer held while remote-1 keeps its copy"
        finally:
            fleet.thaw("remote-1")
        wait_until(lambda: not _there(src), timeout=10, what="the source finalized")
        assert not _there(cores["remote-1"])


@pytest.mark.timeout(60)
def test_a_member_down_since_the_start_keeps_the_source_until_its_copy_is_deleted(
    make_envtest_server: Callable[..., APIServer],
    make_envtest_fleet: Callable[..., Fleet],
) -> None:
    # remote-1 down when the operator starts (its engagement stays syncing): the clean-up
    # walked the engaged members only, dropped the finalizer, and remote-1 kept its copy
    local, fleet, mgr = _fleet_with_fast_health(make_envtest_server, make_envtest_fleet, 2)
    example.build(mgr, out=io.StringIO())
    src, cores = core_api(local), {s.name: core_api(s) for s in fleet}
    with mgr:
        _copied_everywhere(src, cores)
    fleet["remote-1"].stop()
    provider = clusters.Provider()
    for server in fleet:
        provider.add(server.name, Cluster.from_kubeconfig(server.kubeconfig(), name=server.name))
    again = mcruntime.Manager(
        local.kubeconfig(),
        provider=provider,
        options=mcruntime.ManagerOptions(engage_sync_timeout=1),
    )
    example.build(again, out=io.StringIO())
    with again:
        src.delete_namespaced_config_map("app", "default")
        wait_until(lambda: not _there(cores["remote-0"]), what="remote-0's copy deleted")
        wait_until(
            lambda: reconcile_errors(again, "sync-configmaps") > 0,
            what="the clean-up failed for remote-1",
        )
        assert _there(src), "the finalizer held while remote-1 keeps its copy"
        fleet["remote-1"].start()
        wait_until(lambda: not _there(src), timeout=30, what="the source finalized")
        assert not _there(cores["remote-1"])
    wait_until(lambda: not leaked_threads(), timeout=5, what="threads ended")
