"""The operator of the "Writing a controller" guide (``mcruntime.examples.configsets``), end to end
on envtest: copies in every member, finalizers (a failed cleanup retried), a status roll-up with
conditions, Warning events, clusters leaving; and the guide shows the example's code as it is."""

from __future__ import annotations

import functools
import pathlib
import re
import textwrap
import threading
from typing import Any

import pytest

import mcruntime
from mcruntime.client import Client
from mcruntime.cluster import Cluster
from mcruntime.controllerutil import is_status_condition_false, is_status_condition_true
from mcruntime.envtest import wait_for
from mcruntime.examples import configsets as example
from mcruntime.examples.configsets import FINALIZER, ConfigSet
from mcruntime.providers.clusters import Provider
from tests.e2e.examples._example_support import reconcile_errors

GUIDE = pathlib.Path(__file__).parents[3] / "docs" / "guides" / "writing-a-controller.md"

pytestmark = pytest.mark.timeout(60)


# --8<-- [start:helpers]
wait_until = functools.partial(wait_for, interval=0.05)


def leaked_threads() -> list[str]:
    """mcruntime's threads still running (named ``mcruntime/...``), but the envtest servers'."""
    return [
        t.name
        for t in threading.enumerate()
        if t.name.startswith("mcruntime/") and not t.name.startswith("mcruntime/envtest/")
    ]


def _api(server: Any, name: str) -> Client:
    """A client of ``server`` that reads the API, never a cache: the test sees what it holds."""
    return Cluster.from_kubeconfig(server.kubeconfig(), name=name).uncached_client


def _configset(name: str, namespace: str = "default", **data: str) -> dict[str, Any]:
    return {
        "apiVersion": ConfigSet.api_version,
        "kind": "ConfigSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"data": data},
    }


def _copy(client: Client, name: str, namespace: str = "default") -> dict[str, Any] | None:
    found = client.list("v1/ConfigMap", namespace, fields={"metadata.name": name})
    return found[0] if found else None


# --8<-- [end:helpers]


# --8<-- [start:test]
def test_configsets_are_copied_rolled_up_and_cleaned_up(make_envtest_fleet, make_envtest_server):
    fleet = make_envtest_fleet(3)
    hub_server = make_envtest_server("hub")
    provider = Provider()
    for name in ("cluster-0", "cluster-1", "cluster-2"):
        provider.add(name, Cluster.from_kubeconfig(fleet[name].kubeconfig(), name=name))
    mgr = mcruntime.Manager(hub_server.kubeconfig(), provider=provider)
    hub = _api(hub_server, "hub")
    members = {name: _api(fleet[name], name) for name in ("cluster-0", "cluster-1", "cluster-2")}
    example.install_crd(hub)
    example.build(mgr)

    def configset() -> ConfigSet:
        return hub.get(ConfigSet, "settings", "default")

    with mgr:
        hub.create(_configset("settings", greeting="hello"))
        # a copy in every member, the roll-up says so, the finalizer guards the copies
        wait_until(
            lambda: (configset().status or example.ConfigSetStatus()).clusters == sorted(members)
        )
        cs = configset()
        assert cs.status is not None and is_status_condition_true(cs.status.conditions, "Ready")
        assert cs.metadata.finalizers == [FINALIZER]
        assert cs.metadata.generation == 1  # adding the finalizer wrote no spec defaults
        for client in members.values():
            assert (_copy(client, "settings") or {}).get("data") == {"greeting": "hello"}

        # a copy changed by hand is put back
        members["cluster-1"].patch(
            "v1/ConfigMap", "settings", {"data": {"greeting": "bye"}}, "default"
        )
        wait_until(
            lambda: (
                (_copy(members["cluster-1"], "settings") or {}).get("data") == {"greeting": "hello"}
            )
        )

        # a member that refuses the copy: Ready is False and a Warning event names it
        for client in (hub, members["cluster-0"], members["cluster-1"]):
            client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
        hub.create(_configset("team-settings", "team", owner="team"))

        def refused() -> ConfigSet | None:
            got = hub.get(ConfigSet, "team-settings", "team")
            ok = got.status and is_status_condition_false(got.status.conditions, "Ready")
            return got if ok else None

        got = wait_until(refused)
        assert got.status.clusters == ["cluster-0", "cluster-1"]
        events = wait_until(lambda: hub.list("v1/Event", "team"))
        assert {(e["type"], e["reason"]) for e in events} == {("Warning", "CopyFailed")}
        assert "cluster-2" in events[0]["message"]
        assert events[0]["involvedObject"]["name"] == "team-settings"

        # a member leaving drops out of the roll-up, without polling
        provider.remove("cluster-2")
        wait_until(
            lambda: is_status_condition_true(
                hub.get(ConfigSet, "team-settings", "team").status.conditions, "Ready"
            )
        )
        assert configset().status.clusters == ["cluster-0", "cluster-1"]

        # deleting a ConfigSet deletes its copies everywhere first
        hub.delete(ConfigSet, "settings", "default")
        wait_until(lambda: not hub.list(ConfigSet, "default"))
        assert _copy(members["cluster-0"], "settings") is None
        assert _copy(members["cluster-1"], "settings") is None
    wait_until(lambda: not leaked_threads(), timeout=5, what="threads ended")


# --8<-- [end:test]


def _operator(
    make_envtest_fleet: Any, make_envtest_server: Any, members: int, **options: Any
) -> tuple[Any, Provider, mcruntime.Manager, Client, dict[str, Client]]:
    """The example's operator on a hub of ``members`` clusters, its CRD installed: the fleet,
    the provider, the manager (not started), clients of the hub and of each member."""
    fleet = make_envtest_fleet(members)
    hub_server = make_envtest_server("hub")
    provider = Provider()
    names = [f"cluster-{i}" for i in range(members)]
    for name in names:
        provider.add(name, Cluster.from_kubeconfig(fleet[name].kubeconfig(), name=name))
    mgr = mcruntime.Manager(
        hub_server.kubeconfig(), provider=provider, options=mcruntime.ManagerOptions(**options)
    )
    hub = _api(hub_server, "hub")
    example.install_crd(hub)
    return fleet, provider, mgr, hub, {name: _api(fleet[name], name) for name in names}


#: health checks that find a frozen member not answering within a second
FAST = {
    "cluster_health_interval": 0.5,
    "cluster_health_timeout": 0.5,
    "cluster_health_retry_interval": 0.2,
}


def _reconcile_errors(mgr: mcruntime.Manager) -> float:
    return reconcile_errors(mgr, "configsets")


def test_a_failed_cleanup_keeps_the_configset_until_a_retry_succeeds(
    make_envtest_fleet, make_envtest_server
):
    fleet, _, mgr, hub, members = _operator(make_envtest_fleet, make_envtest_server, 2)
    example.build(mgr)
    with mgr:
        hub.create(_configset("settings", greeting="hello"))
        wait_until(lambda: all(_copy(client, "settings") for client in members.values()))
        fleet["cluster-1"].stop()  # its copy cannot be deleted: the cleanup fails
        errors = _reconcile_errors(mgr)
        hub.delete(ConfigSet, "settings", "default")
        wait_until(lambda: _reconcile_errors(mgr) > errors, what="the cleanup failed")
        cs = hub.get(ConfigSet, "settings", "default")  # held by its finalizer
        assert cs.metadata.deletion_timestamp and cs.metadata.finalizers == [FINALIZER]
        fleet["cluster-1"].start()  # the retried reconcile runs the cleanup again
        wait_until(lambda: not hub.list(ConfigSet, "default"), timeout=30)
        assert _copy(members["cluster-0"], "settings") is None
        assert _copy(members["cluster-1"], "settings") is None
    wait_until(lambda: not leaked_threads(), timeout=5, what="threads ended")


def test_a_member_that_stops_answering_gets_its_copy_at_its_first_answer(
    make_envtest_fleet, make_envtest_server
):
    # the reconciler catches the frozen member's failure, rolls up the others and asks to
    # run again in 30 s: it runs again as soon as the member answers, not 30 s later
    fleet, _, mgr, hub, members = _operator(make_envtest_fleet, make_envtest_server, 2, **FAST)
    ctrl = example.build(mgr)

    def greeting(member: str) -> str | None:
        return ((_copy(members[member], "settings") or {}).get("data") or {}).get("greeting")

    def ready() -> bool:
        cs = hub.get(ConfigSet, "settings", "default")
        return cs.status is not None and is_status_condition_true(cs.status.conditions, "Ready")

    with mgr:
        hub.create(_configset("settings", greeting="hello"))
        wait_until(lambda: greeting("cluster-0") == greeting("cluster-1") == "hello")
        wait_until(ready, what="Ready with both copies")
        fleet.freeze("cluster-1")
        try:
            wait_until(lambda: not mgr.cluster_answering("cluster-1"), what="noticed")
            hub.patch(ConfigSet, "settings", {"spec": {"data": {"greeting": "hi"}}}, "default")
            wait_until(lambda: greeting("cluster-0") == "hi", what="the answering member")
            wait_until(lambda: not ready(), what="Ready false, the frozen member named")
            wait_until(
                lambda: [r.key for r in ctrl.waiting_requests().get("cluster-1", [])],
                equals=["default/settings"],
                what="the request waiting for the frozen member",
            )
        finally:
            fleet.thaw("cluster-1")
        # (30 s, the reconciler's own requeue, is the test's timeout's half)
        wait_until(lambda: greeting("cluster-1") == "hi", timeout=10, what="the frozen's copy")
        wait_until(ready, timeout=5, what="Ready again")
    wait_until(lambda: not leaked_threads(), timeout=5, what="threads ended")


def test_a_member_that_hangs_holds_back_no_other_members_copy(
    make_envtest_fleet, make_envtest_server
):
    # the default health timings: the manager finds cluster-0 silent after some 15 s; the
    # reconciler wrote to the members one after the other, so cluster-1 waited as long
    fleet, _, mgr, hub, members = _operator(make_envtest_fleet, make_envtest_server, 2)
    example.build(mgr)

    def greeting(member: str) -> str | None:
        return ((_copy(members[member], "settings") or {}).get("data") or {}).get("greeting")

    with mgr:
        hub.create(_configset("settings", greeting="hello"))
        wait_until(lambda: greeting("cluster-0") == greeting("cluster-1") == "hello")
        fleet.freeze("cluster-0")
        try:
            hub.patch(ConfigSet, "settings", {"spec": {"data": {"greeting": "hi"}}}, "default")
            wait_until(lambda: greeting("cluster-1") == "hi", timeout=5, what="cluster-1's copy")
        finally:
            fleet.thaw("cluster-0")
        wait_until(lambda: greeting("cluster-0") == "hi", timeout=30, what="cluster-0's copy")
    wait_until(lambda: not leaked_threads(), timeout=5, what="threads ended")


def test_a_frozen_member_holds_back_no_other_members_cleanup(
    make_envtest_fleet, make_envtest_server
):
    # the ConfigSet deleted while cluster-0 hangs: the other members' copies go at once, the
    # finalizer stays, and the request waits for cluster-0, finished at its first answer
    fleet, _, mgr, hub, members = _operator(make_envtest_fleet, make_envtest_server, 3, **FAST)
    ctrl = example.build(mgr)
    with mgr:
        hub.create(_configset("settings", greeting="hello"))
        wait_until(lambda: all(_copy(client, "settings") for client in members.values()))
        fleet.freeze("cluster-0")
        try:
            wait_until(lambda: not mgr.cluster_answering("cluster-0"), what="noticed")
            hub.delete(ConfigSet, "settings", "default")
            for name in ("cluster-1", "cluster-2"):
                wait_until(
                    lambda n=name: _copy(members[n], "settings") is None,
                    what=f"the copy in {name} deleted meanwhile",
                )
            wait_until(
                lambda: [r.key for r in ctrl.waiting_requests().get("cluster-0", [])],
                equals=["default/settings"],
                what="the cleanup waiting for the frozen member",
            )
            cs = hub.get(ConfigSet, "settings", "default")
            assert cs.metadata.finalizers == [FINALIZER]
        finally:
            fleet.thaw("cluster-0")
        wait_until(lambda: not hub.list(ConfigSet, "default"), timeout=10, what="finalized")
        assert _copy(members["cluster-0"], "settings") is None
    wait_until(lambda: not leaked_threads(), timeout=5, what="threads ended")


def _copied_then_stopped(
    make_envtest_fleet: Any, make_envtest_server: Any, members: int
) -> tuple[Any, Any, Client, dict[str, Client]]:
    """The operator ran until ConfigSet ``default/settings`` had a copy in each of ``members``
    members, then stopped: the hub's server, the fleet, clients of the hub and of each member."""
    hub_server = make_envtest_server("hub")
    fleet, _, mgr, hub, clients = _operator(make_envtest_fleet, lambda _: hub_server, members)
    example.build(mgr)
    with mgr:
        hub.create(_configset("settings", greeting="hello"))
        wait_until(lambda: all(_copy(client, "settings") for client in clients.values()))
    return hub_server, fleet, hub, clients


def _restarted(fleet: Any, hub_server: Any, **options: Any) -> mcruntime.Manager:
    """A new manager (the operator restarted) of the hub, a new provider of every member."""
    provider = Provider()
    for srv in fleet:
        provider.add(srv.name, Cluster.from_kubeconfig(srv.kubeconfig(), name=srv.name))
    mgr = mcruntime.Manager(
        hub_server.kubeconfig(), provider=provider, options=mcruntime.ManagerOptions(**options)
    )
    example.build(mgr)
    return mgr


def test_a_configset_deleted_while_the_operator_was_down_loses_every_copy_at_its_start(
    make_envtest_fleet, make_envtest_server
):
    # the hub's reconcile runs before the members are engaged: its cleanup walked the engaged
    # members, found few or none, removed the finalizer, and 6 of 10 copies stayed for good
    hub_server, fleet, hub, members = _copied_then_stopped(
        make_envtest_fleet, make_envtest_server, 8
    )
    hub.delete(ConfigSet, "settings", "default")  # held by its finalizer: no operator runs
    with _restarted(fleet, hub_server):
        wait_until(lambda: not hub.list(ConfigSet, "default"), what="finalized")
    assert [name for name, client in members.items() if _copy(client, "settings")] == []
    wait_until(lambda: not leaked_threads(), timeout=5, what="threads ended")


def test_a_member_down_since_the_start_is_reported_and_keeps_the_configset_until_its_copy_goes(
    make_envtest_fleet, make_envtest_server
):
    # cluster-1 is down when the operator starts (its engagement stays syncing): the roll-up
    # said Ready, "copied to 1 clusters", and deleting the ConfigSet left its copy for good
    hub_server, fleet, hub, members = _copied_then_stopped(
        make_envtest_fleet, make_envtest_server, 2
    )
    fleet["cluster-1"].stop()
    with _restarted(fleet, hub_server, engage_sync_timeout=1) as again:
        hub.patch(ConfigSet, "settings", {"spec": {"data": {"greeting": "hi"}}}, "default")

        def rolled_up() -> ConfigSet | None:
            cs = hub.get(ConfigSet, "settings", "default")
            done = cs.status and cs.status.observed_generation == cs.metadata.generation
            return cs if done else None

        cs = wait_until(rolled_up, what="the roll-up of the change")
        assert cs.status.clusters == ["cluster-0"]
        assert is_status_condition_false(cs.status.conditions, "Ready")
        assert "cluster-1" in cs.status.conditions[0].message

        hub.delete(ConfigSet, "settings", "default")
        wait_until(lambda: _copy(members["cluster-0"], "settings") is None, what="cluster-0's")
        errors = _reconcile_errors(again)
        wait_until(lambda: _reconcile_errors(again) > errors, what="the cleanup failed again")
        cs = hub.get(ConfigSet, "settings", "default")  # held until cluster-1's copy is gone
        assert cs.metadata.deletion_timestamp and cs.metadata.finalizers == [FINALIZER]
        fleet["cluster-1"].start()  # engaged at last: the cleanup runs again, and is done
        wait_until(lambda: not hub.list(ConfigSet, "default"), timeout=30, what="finalized")
        assert _copy(members["cluster-1"], "settings") is None
    wait_until(lambda: not leaked_threads(), timeout=5, what="threads ended")


def test_the_demo_copies_into_every_member(capsys: pytest.CaptureFixture[str]) -> None:
    assert example.main(["--duration", "20"]) == 0
    assert "settings copied to cluster-0, cluster-1, cluster-2" in capsys.readouterr().out


def _normal(code: str) -> str:
    """Dedented, with runs of blank lines as one (the formatter spaces top-level defs by two)."""
    return re.sub(r"\n(\s*\n)+", "\n\n", textwrap.dedent(code).strip())


def _sections(source: str) -> dict[str, str]:
    found = re.findall(r"# --8<-- \[start:(\w+)\]\n(.*?)\n\s*# --8<-- \[end:\1\]", source, re.S)
    return {name: _normal(body) for name, body in found}


def test_the_guide_shows_the_examples_code_as_it_is() -> None:
    guide = GUIDE.read_text()
    blocks = [_normal(b) for b in re.findall(r"```python\n(.*?)```", guide, re.S)]
    sources = [pathlib.Path(example.__file__).read_text(), pathlib.Path(__file__).read_text()]
    sections = {k: v for src in sources for k, v in _sections(src).items()}
    assert set(sections) >= {
        "types",
        "crd",
        "reconciler",
        "copy",
        "rollup",
        "finalize",
        "maps",
        "build",
        "helpers",
        "test",
    }
    missing = [name for name, body in sections.items() if body not in blocks]
    assert not missing, f"the guide does not show these sections as they are: {missing}"
