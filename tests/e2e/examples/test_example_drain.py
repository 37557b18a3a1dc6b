"""``python -m mcruntime.examples.drain``: nodes in maintenance cordoned and drained across a fleet,
honouring PodDisruptionBudgets."""

from __future__ import annotations

import pathlib
import re
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client, config

from mcruntime.envtest import Fleet
from mcruntime.examples import drain as example
from tests.e2e.examples._example_support import ExampleProcess, exists, leaked_threads, wait_until


def _at(out: str, pattern: str) -> int:
    """The index of the first output line matching ``pattern`` (fails when none does)."""
    lines = out.splitlines()
    for i, line in enumerate(lines):
        if re.search(pattern, line):
            return i
    raise AssertionError(f"no line matches {pattern!r} in:\n{out}")


@pytest.mark.timeout(40)
def test_demo_drains_a_node_as_its_budgets_allow_and_uncordons_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert example.main(["--duration", "8", "--log-level", "warning"]) == 0
    out = capsys.readouterr().out
    node = "cluster=cluster-1 node node-1"
    cordoned = _at(out, rf"^{node} cordoned$")
    assert _at(out, r"^scenario: cluster=cluster-1 node node-1 goes into maintenance$") < cordoned
    for pod in ("web-0", "web-1"):
        assert _at(out, rf"^{node} evicted pod default/{pod}$") > cordoned
    # the database's budget holds its only replica until a second one runs
    blocked = _at(out, rf"^{node} eviction of default/db-0 blocked: The disruption budget db ")
    replica = _at(out, r"^scenario: cluster=cluster-1 the database gets a second replica$")
    evicted = _at(out, rf"^{node} evicted pod default/db-0$")
    assert blocked < replica < evicted, out
    assert out.count("eviction of default/db-0 blocked") == 1, "one report per blockage"
    assert _at(out, rf"^{node} drained \(1 DaemonSet or finished pods stay\)$") > evicted
    assert _at(out, rf"^{node} uncordoned$") > _at(out, r"leaves maintenance$")
    state = dict(re.findall(r"^state: cluster=(\S+) nodes: (.*)$", out, re.M))
    # the drained node's pods run elsewhere, its DaemonSet pod stays; the other clusters untouched
    assert state["cluster-1"] == (
        "node-1, node-2; pods: db-1@node-2, logs-node-1@node-1, logs-node-2@node-2, "
        "web-r1@node-2, web-r2@node-2"
    ), out
    for other in ("cluster-0", "cluster-2"):
        assert state[other] == (
            "node-1, node-2; pods: db-0@node-1, logs-node-1@node-1, logs-node-2@node-2, "
            "web-0@node-1, web-1@node-1"
        ), out
    assert not re.search(r"^cluster=cluster-[02] node", out, re.M), "only node-1 of cluster-1 moves"
    wait_until(lambda: not leaked_threads(), timeout=5, what=f"threads ended: {leaked_threads()}")


def _running_pod(core: client.CoreV1Api, name: str, node: str, app: str) -> None:
    core.create_namespaced_pod(
        "default",
        {
            "metadata": {"name": name, "labels": {"app": app}},
            "spec": {"nodeName": node, "containers": [{"name": app, "image": "example"}]},
        },
    )
    status = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    core.patch_namespaced_pod_status(name, "default", {"status": status})


@pytest.mark.timeout(45)
def test_on_real_clusters_a_blocked_drain_is_an_event_and_a_node_cordoned_by_hand_stays(
    tmp_path: pathlib.Path, make_envtest_fleet: Callable[..., Fleet]
) -> None:
    fleet = make_envtest_fleet(2, prefix="site")
    fleet_dir = tmp_path / "fleet"
    apis: dict[str, tuple[client.CoreV1Api, client.PolicyV1Api]] = {}
    for server in fleet:
        server.write_kubeconfig(fleet_dir / f"{server.name}.yaml")
        api = config.new_client_from_config_dict(server.kubeconfig())
        apis[server.name] = (client.CoreV1Api(api), client.PolicyV1Api(api))
    (a, b) = sorted(apis)
    # the file provider names a cluster by its kubeconfig file and context
    site = rf"cluster=\S*{a}\.yaml\+{a}"
    core, policy = apis[a]
    for node in ("n1", "n2"):
        # registered as a kubelet registers it, with its hostname label: an object created with
        # no field beyond its name has no managedFields, and kube-apiserver tracks no later
        # update of it (skipNonAppliedManager), so no field manager would show
        labels = {"kubernetes.io/hostname": node}
        core.create_node({"metadata": {"name": node, "labels": labels}})
    _running_pod(core, "cache-0", "n1", "cache")
    _running_pod(core, "batch-0", "n1", "batch")
    pdb = policy.create_namespaced_pod_disruption_budget(
        "default",
        {
            "metadata": {"name": "cache"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "cache"}}},
        },
    )
    status: dict[str, Any] = {
        "observedGeneration": pdb.metadata.generation,
        "disruptionsAllowed": 0,
        "currentHealthy": 1,
        "desiredHealthy": 1,
        "expectedPods": 1,
    }
    policy.patch_namespaced_pod_disruption_budget_status("cache", "default", {"status": status})
    # a node someone cordoned by hand, not in maintenance: the controller leaves it alone
    other = apis[b][0]
    other.create_node({"metadata": {"name": "n1"}, "spec": {"unschedulable": True}})

    with ExampleProcess(
        "drain",
        "--provider",
        "file",
        "--provider-option",
        f"paths={fleet_dir}",
        "--duration",
        "120",
    ) as proc:
        proc.wait_for(r"manager started")
        core.patch_node("n1", {"metadata": {"labels": {example.MAINTENANCE_LABEL: "true"}}})
        proc.wait_for(rf"^{site} node n1 evicted pod default/batch-0$")
        proc.wait_for(rf"^{site} node n1 eviction of default/cache-0 blocked: ")
        assert core.read_node("n1").spec.unschedulable is True
        wait_until(
            lambda: any(
                e.reason == "EvictionBlocked" and e.involved_object.name == "n1"
                for e in core.list_namespaced_event("default").items
            ),
            what="an EvictionBlocked event on the node",
        )
        # writes are recorded under the controller's field manager
        managers = {m.manager for m in core.read_node("n1").metadata.managed_fields or []}
        assert example.FIELD_MANAGER in managers, managers
        assert exists(lambda: core.read_namespaced_pod("cache-0", "default"))

        status["disruptionsAllowed"] = 1
        policy.patch_namespaced_pod_disruption_budget_status("cache", "default", {"status": status})
        proc.wait_for(rf"^{site} node n1 evicted pod default/cache-0$")
        proc.wait_for(rf"^{site} node n1 drained ")
        core.patch_node("n1", {"metadata": {"labels": {example.MAINTENANCE_LABEL: None}}})
        proc.wait_for(rf"^{site} node n1 uncordoned$")
        wait_until(lambda: not core.read_node("n1").spec.unschedulable, what="n1 schedulable")
        assert other.read_node("n1").spec.unschedulable is True, "cordoned by hand: left alone"
        assert not re.search(rf"^cluster=\S*{b}\.yaml\+{b} node", proc.output, re.M)
        assert proc.interrupt() == 0, proc.output
