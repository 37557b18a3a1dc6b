"""Node maintenance across a fleet: nodes labelled for it are cordoned and drained, budgets kept.

    python -m mcruntime.examples.drain          # embedded fleet, simulated workloads
    python -m mcruntime.examples.drain --provider kind --provider-option prefix=fleet-

One controller for the Nodes of every cluster. A node labelled
``example.mcruntime.io/maintenance=true`` is cordoned (``spec.unschedulable``)
and its pods are evicted through the ``pods/eviction`` subresource, as
``kubectl drain`` does: DaemonSet pods and pods that have finished stay. An
eviction a PodDisruptionBudget forbids is not an error: the controller posts a
``Warning`` Event ``EvictionBlocked`` on the node once, and tries again a
second later. Once no pod is left to evict, the node gets the annotation
``example.mcruntime.io/drained``. Removing the label uncordons the node. A
pod leaving its node brings the node back to the reconciler (a map function
from pods to their node); the pods of a node are read from the cache through a
field index on ``spec.nodeName``. Every write goes out under the field manager
``node-maintenance``.

On the ``embedded`` provider (the default) a scenario plays on a fleet of
three clusters, each with two nodes and a few pods: a node of ``cluster-1``
is put in maintenance; its web pods are evicted one at a time, as their
budget allows; its database pod is blocked by its budget until the scenario
adds a second database replica. Embedded API servers run no controllers, so
a clearly labelled SIMULATED workload controller replaces evicted pods on
another node and a SIMULATED disruption controller keeps each budget's
status up to date, as kube-controller-manager would. Nothing runs for real.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from typing import Any

import mcruntime
from mcruntime import Request, Result
from mcruntime.client import Client
from mcruntime.errors import MCRuntimeError, NotFound, TooManyRequests
from mcruntime.examples._demo import main_on_fleet, say, wait_engaged
from mcruntime.handler import enqueue_requests_from_map_func
from mcruntime.recorder import WARNING

__all__ = [
    "CORDONED_ANNOTATION",
    "DRAINED_ANNOTATION",
    "FIELD_MANAGER",
    "MAINTENANCE_LABEL",
    "NodeDrainer",
    "build",
    "evictable",
    "main",
]

log = logging.getLogger("drain")

NODE = "v1/Node"
POD = "v1/Pod"
PDB = "policy/v1/PodDisruptionBudget"
#: a node with this label set to "true" is cordoned and drained; without it, uncordoned
MAINTENANCE_LABEL = "example.mcruntime.io/maintenance"
#: set on a node this controller cordoned: only those it uncordons (not one cordoned by hand)
CORDONED_ANNOTATION = "example.mcruntime.io/cordoned"
#: set on a node once none of its pods is left to evict
DRAINED_ANNOTATION = "example.mcruntime.io/drained"
#: who this controller's writes are recorded as (``metadata.managedFields``)
FIELD_MANAGER = "node-maintenance"
#: seconds before an eviction a budget refused is tried again
RETRY_BLOCKED = 1.0
#: simulation only: an evicted pod with this label is replaced on another node
REPLACE_LABEL = "simulation.example.mcruntime.io/replace"


def evictable(pod: dict[str, Any]) -> bool:
    """Whether draining evicts ``pod``: not a DaemonSet's (it would come back on the node at
    once), not a mirror pod, not finished, not already being deleted; as ``kubectl drain``."""
    meta = pod["metadata"]
    if meta.get("deletionTimestamp") or "kubernetes.io/config.mirror" in (
        meta.get("annotations") or {}
    ):
        return False
    if any(ref.get("kind") == "DaemonSet" for ref in meta.get("ownerReferences") or ()):
        return False
    return (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


def _eviction(pod: dict[str, Any]) -> dict[str, Any]:
    meta = pod["metadata"]
    return {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
    }


class NodeDrainer:
    """The reconciler: cordon and drain the nodes in maintenance, uncordon the others."""

    def __init__(self, mgr: mcruntime.Manager, out: Any = None) -> None:
        self.mgr = mgr
        self.out = out
        self.events = mgr.get_event_recorder_for(FIELD_MANAGER)
        #: (cluster, pod) evictions blocked now: the Warning is posted once per blockage
        self._blocked: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def __call__(self, req: Request) -> Result | None:
        cluster = self.mgr.get_cluster(req.cluster_name)
        client = cluster.client.with_field_manager(FIELD_MANAGER)
        where = f"cluster={req.cluster_name} node {req.name}"
        try:
            node = client.get(NODE, req.name)
        except NotFound:
            return None
        meta = node["metadata"]
        annotations = meta.get("annotations") or {}
        in_maintenance = (meta.get("labels") or {}).get(MAINTENANCE_LABEL) == "true"
        if not in_maintenance:
            if CORDONED_ANNOTATION in annotations:  # ours to undo; a node cordoned by hand stays
                mine = {CORDONED_ANNOTATION: None, DRAINED_ANNOTATION: None}
                patch = {"spec": {"unschedulable": None}, "metadata": {"annotations": mine}}
                client.patch(NODE, req.name, patch)
                say(f"{where} uncordoned", self.out)
            return None
        if not (node.get("spec") or {}).get("unschedulable"):
            mark = {"metadata": {"annotations": {CORDONED_ANNOTATION: "true"}}}
            client.patch(NODE, req.name, {"spec": {"unschedulable": True}, **mark})
            say(f"{where} cordoned", self.out)
        pods = [p for p in client.list(POD, index=("spec.nodeName", req.name)) if evictable(p)]
        blocked = [p for p in pods if not self._evict(client, req, node, p)]
        if blocked:
            return Result(requeue_after=RETRY_BLOCKED)
        if not pods and DRAINED_ANNOTATION not in annotations:
            left = len(client.list(POD, index=("spec.nodeName", req.name)))
            stamp = {"metadata": {"annotations": {DRAINED_ANNOTATION: "true"}}}
            client.patch(NODE, req.name, stamp)
            say(f"{where} drained ({left} DaemonSet or finished pods stay)", self.out)
        return None

    def _evict(
        self, client: Client, req: Request, node: dict[str, Any], pod: dict[str, Any]
    ) -> bool:
        """Evict ``pod``: True once the eviction is accepted (or the pod is gone)."""
        meta = pod["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        where = f"cluster={req.cluster_name} node {req.name}"
        try:
            client.subresource("eviction").create(
                POD, meta["name"], _eviction(pod), meta["namespace"]
            )
        except NotFound:
            return True
        except TooManyRequests as exc:
            causes = (exc.details or {}).get("causes") or [{}]
            why = causes[0].get("message") or exc.message
            with self._lock:
                first = (req.cluster_name, key) not in self._blocked
                self._blocked.add((req.cluster_name, key))
            if first:
                say(f"{where} eviction of {key} blocked: {why}", self.out)
                self.events.event(node, WARNING, "EvictionBlocked", f"evicting {key}: {why}")
            return False
        with self._lock:
            self._blocked.discard((req.cluster_name, key))
        say(f"{where} evicted pod {key}", self.out)
        return True


def _pod_to_node(pod: dict[str, Any]) -> list[tuple[str, str]]:
    node = (pod.get("spec") or {}).get("nodeName")
    return [("", node)] if node else []


def _node_of(pod: dict[str, Any]) -> str | None:
    node = (pod.get("spec") or {}).get("nodeName")
    return node if isinstance(node, str) else None


def build(mgr: mcruntime.Manager, out: Any = None) -> mcruntime.Controller:
    mgr.get_field_indexer().index_field(POD, "spec.nodeName", _node_of)
    return (
        mcruntime.controller_managed_by(mgr)
        .named("node-maintenance")
        .for_(NODE)
        .watches(POD, enqueue_requests_from_map_func(_pod_to_node))
        .complete(NodeDrainer(mgr, out))
    )


# -- the demo scenario: a fleet with SIMULATED workload and disruption controllers ----------


def _node(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}


def _pod(
    name: str, node: str, app: str, *, replace: bool = True, daemon: dict[str, Any] | None = None
) -> Any:
    meta: dict[str, Any] = {"name": name, "namespace": "default", "labels": {"app": app}}
    if replace:
        meta["labels"][REPLACE_LABEL] = "true"
    if daemon is not None:
        ds = daemon["metadata"]
        meta["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": ds["name"], "uid": ds["uid"]}
        ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"nodeName": node, "containers": [{"name": app, "image": f"example/{app}"}]},
    }


def _daemon_set(app: str) -> dict[str, Any]:
    labels = {"app": app}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": app, "namespace": "default"},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": app, "image": f"example/{app}"}]},
            },
        },
    }


def _budget(app: str) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": app, "namespace": "default"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": app}}},
    }


def _create_running(client: Client, pod: dict[str, Any]) -> dict[str, Any]:
    """Create ``pod`` and, as a SIMULATED kubelet, mark it running and ready."""
    client.create(pod)
    status = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    running: dict[str, Any] = client.patch_status(
        POD, pod["metadata"]["name"], {"status": status}, "default"
    )
    return running


class Simulation:
    """SIMULATED controllers of one embedded cluster: a workload controller that replaces each
    evicted pod labelled `REPLACE_LABEL` on a schedulable node, and a disruption controller that
    writes each budget's status from its ready pods, as kube-controller-manager would."""

    def __init__(self, name: str, client: Client) -> None:
        self.name, self.client = name, client.with_field_manager("simulation")
        self.known: dict[str, dict[str, Any]] = {}
        self.serial = 0

    def seed(self) -> None:
        for node in ("node-1", "node-2"):
            self.client.create(_node(node))
        logs = self.client.create(_daemon_set("logs"))
        for pod in (
            _pod("web-0", "node-1", "web"),
            _pod("web-1", "node-1", "web"),
            _pod("db-0", "node-1", "db", replace=False),
            _pod("logs-node-1", "node-1", "logs", replace=False, daemon=logs),
            _pod("logs-node-2", "node-2", "logs", replace=False, daemon=logs),
        ):
            _create_running(self.client, pod)
        for app in ("web", "db"):
            self.client.create(_budget(app))
        self.step()

    def step(self) -> None:
        pods = {p["metadata"]["name"]: p for p in self.client.list(POD, "default")}
        for name, pod in self.known.items():
            labels = pod["metadata"].get("labels") or {}
            if name not in pods and labels.get(REPLACE_LABEL) == "true":
                self._replace(pod, pods)
        self.known = pods
        self._budgets(pods)

    def _replace(self, gone: dict[str, Any], pods: dict[str, dict[str, Any]]) -> None:
        app = gone["metadata"]["labels"]["app"]
        nodes = [
            n["metadata"]["name"]
            for n in self.client.list(NODE)
            if not (n.get("spec") or {}).get("unschedulable")
        ]
        if not nodes:
            return
        self.serial += 1
        name = f"{app}-r{self.serial}"
        pods[name] = _create_running(self.client, _pod(name, nodes[0], app))
        log.info(
            "simulation: cluster=%s %s replaced by %s on %s",
            self.name,
            gone["metadata"]["name"],
            name,
            nodes[0],
        )

    def _budgets(self, pods: dict[str, dict[str, Any]]) -> None:
        for pdb in self.client.list(PDB, "default"):
            app = pdb["spec"]["selector"]["matchLabels"]["app"]
            mine = [
                p for p in pods.values() if (p["metadata"].get("labels") or {}).get("app") == app
            ]
            old = pdb.get("status") or {}
            # evictions the API server granted but this controller has not seen are not healthy
            disrupted = {n: at for n, at in (old.get("disruptedPods") or {}).items() if n in pods}
            healthy = sum(
                1
                for p in mine
                if not p["metadata"].get("deletionTimestamp")
                and p["metadata"]["name"] not in disrupted
                and any(
                    c.get("type") == "Ready" and c.get("status") == "True"
                    for c in (p.get("status") or {}).get("conditions") or ()
                )
            )
            want = pdb["spec"]["minAvailable"]
            status = {
                "observedGeneration": pdb["metadata"]["generation"],
                "currentHealthy": healthy,
                "desiredHealthy": want,
                "expectedPods": len(mine),
                "disruptionsAllowed": max(0, healthy - want),
                "disruptedPods": disrupted,
            }
            if any(
                old.get(k, {} if k == "disruptedPods" else None) != v for k, v in status.items()
            ):
                self.client.patch_status(
                    PDB, pdb["metadata"]["name"], {"status": status}, "default"
                )


def scenario(
    mgr: mcruntime.Manager, provider: Any, duration: float, stop: threading.Event, out: Any = None
) -> None:
    """Seed every cluster; put cluster-1's node-1 in maintenance at 15 % of the run; add a second
    database replica at 55 %; end its maintenance at 80 %; print each node's state at 90 %."""
    names = sorted(provider.names())
    if not wait_engaged(mgr, names, stop):
        log.error("clusters did not engage in time: %s", names)
        return
    sims = [Simulation(n, mgr.get_cluster(n).client) for n in names]
    target = sims[1] if len(sims) > 1 else sims[0]
    start = time.monotonic()
    steps = [
        (0.15, "maintenance"),
        (0.55, "second database replica"),
        (0.8, "maintenance over"),
        (0.9, "state"),
    ]
    try:
        for sim in sims:
            sim.seed()
        for at, what in steps:
            while not stop.wait(0.1) and time.monotonic() < start + at * duration:
                for sim in sims:
                    sim.step()
            if stop.is_set():
                return
            log.info("scenario: %s", what)
            client = target.client
            if what == "maintenance":
                say(f"scenario: cluster={target.name} node node-1 goes into maintenance", out)
                client.patch(NODE, "node-1", {"metadata": {"labels": {MAINTENANCE_LABEL: "true"}}})
            elif what == "second database replica":
                say(f"scenario: cluster={target.name} the database gets a second replica", out)
                _create_running(client, _pod("db-1", "node-2", "db", replace=False))
            elif what == "maintenance over":
                say(f"scenario: cluster={target.name} node node-1 leaves maintenance", out)
                client.patch(NODE, "node-1", {"metadata": {"labels": {MAINTENANCE_LABEL: None}}})
            else:
                for sim in sims:
                    nodes = [
                        f"{n['metadata']['name']}"
                        + (" cordoned" if (n.get("spec") or {}).get("unschedulable") else "")
                        for n in sim.client.list(NODE)
                    ]
                    pods = sorted(
                        f"{p['metadata']['name']}@{p['spec']['nodeName']}"
                        for p in sim.client.list(POD, "default")
                    )
                    say(
                        f"state: cluster={sim.name} nodes: {', '.join(nodes)}; pods: {', '.join(pods)}",
                        out,
                    )
    except MCRuntimeError as exc:
        if not stop.is_set():
            log.warning("scenario step failed: %s", exc)


def main(argv: list[str] | None = None) -> int:
    return main_on_fleet(
        argv,
        prog="mcruntime.examples.drain",
        doc=__doc__ or "",
        build=build,
        scenario=scenario,
        default_duration=10.0,
    )


if __name__ == "__main__":
    sys.exit(main())
