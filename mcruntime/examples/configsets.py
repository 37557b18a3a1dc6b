"""A ConfigSet in the management cluster becomes a ConfigMap in every member cluster.

    python -m mcruntime.examples.configsets     # embedded management server + a fleet of three

The operator the "Writing a controller" guide builds, step by step. A
``ConfigSet`` (``example.mcruntime.io/v1alpha1``, installed by this program)
lives in the local (management) cluster; a ConfigMap of the same namespace and
name, holding its ``spec.data``, is kept in every member (provider) cluster,
clusters joining later included. The ConfigSet's status rolls the members up:
``status.clusters`` lists the clusters holding the copy, the ``Ready``
condition says whether every member does, and a ``Warning`` event names each
member that refused the copy. Deleting a ConfigSet deletes its copies
everywhere first (finalizer ``example.mcruntime.io/copies``, its cleanup
registered on a `mcruntime.finalizer.Finalizers`).
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from typing import Any, ClassVar

import mcruntime
from mcruntime import Request, Result
from mcruntime.client import Client, Model, Resource
from mcruntime.controllerutil import (
    Condition,
    OperationResult,
    create_or_patch,
    create_or_update,
    is_being_deleted,
    set_status_condition,
)
from mcruntime.crd import generate_crd, install_crds
from mcruntime.errors import (
    ClusterLeft,
    ClusterNotFound,
    FleetNotKnown,
    MCRuntimeError,
    NotFound,
    ignore_not_found,
)
from mcruntime.finalizer import Finalizers
from mcruntime.handler import enqueue_request_for_object, enqueue_requests_from_map_func
from mcruntime.reconcile import for_each_cluster
from mcruntime.source import Engagements

__all__ = [
    "CONFIGSET_CRD",
    "FINALIZER",
    "SOURCE_LABEL",
    "ConfigSet",
    "ConfigSetReconciler",
    "ConfigSetSpec",
    "ConfigSetStatus",
    "build",
    "install_crd",
    "main",
]

log = logging.getLogger("configsets")

# --8<-- [start:types]
GROUP = "example.mcruntime.io"
#: on a ConfigSet: its copies may still exist in some member cluster
FINALIZER = f"{GROUP}/copies"
#: on every copy: ``<namespace>.<name>`` of its ConfigSet
SOURCE_LABEL = f"{GROUP}/configset"


class ConfigSetSpec(Model):
    data: dict[str, str] = {}
    target_labels: dict[str, str] = {}  # labels every copy gets


class ConfigSetStatus(Model):
    observed_generation: int | None = None
    clusters: list[str] = []
    conditions: list[Condition] = []


class ConfigSet(Resource):
    api_version: ClassVar[str] = f"{GROUP}/v1alpha1"
    kind: ClassVar[str] = "ConfigSet"
    spec: ConfigSetSpec = ConfigSetSpec()
    status: ConfigSetStatus | None = None


# --8<-- [end:types]


# --8<-- [start:crd]
#: the ConfigSet CRD, generated from the model: a structural schema (the server prunes
#: unknown fields and fills in defaults) and the status subresource (the class has ``status``)
CONFIGSET_CRD: dict[str, Any] = generate_crd(ConfigSet)


def install_crd(client: Client, timeout: float = 30.0) -> None:
    """Install (or update) the ConfigSet CRD and wait until the API serves the kind."""
    install_crds(client, [CONFIGSET_CRD], timeout=timeout)


# --8<-- [end:crd]


# --8<-- [start:reconciler]
class ConfigSetReconciler:
    """Copies each ConfigSet of the management cluster into every member cluster."""

    def __init__(self, mgr: mcruntime.Manager) -> None:
        self.mgr = mgr
        self.events = mgr.get_event_recorder_for("configset-controller")
        self.finalizers = Finalizers()
        self.finalizers.register(FINALIZER, self.delete_copies)

    def __call__(self, req: Request) -> Result | None:
        hub = self.mgr.get_cluster().client  # ConfigSets live in the local cluster
        try:
            cs = hub.get(ConfigSet, req.name, req.namespace)
        except NotFound:
            return None  # deleted; the finalizer made sure its copies went first
        try:
            fleet = self.mgr.fleet_clusters()  # every member, engaged or not
        except FleetNotKnown:
            return Result(requeue_after=1.0)  # just started: the provider has not named them all
        # adds FINALIZER to a new ConfigSet; on a deleted one, deletes the copies, then removes it
        done = self.finalizers.finalize(cs, req)
        if done.updated:
            try:
                cs = hub.update(cs)  # the finalizer added or removed; no unset defaults
            except NotFound:
                return None  # gone meanwhile (its finalizer just removed, say): nothing to do
        if done.error:
            raise done.error  # the finalizer stays: the copies' deletion is retried with backoff
        if is_being_deleted(cs):
            return None  # being deleted: no new copies
        engaged = self.mgr.engaged_clusters()
        synced: list[str] = []
        failed = [name for name in fleet if name not in engaged]  # down, or syncing: no copy yet
        # every engaged member at once: one that hangs holds back no other's copy
        copies = for_each_cluster(engaged, lambda name: self.copy_into(name, cs))
        for cluster_name, outcome in copies.items():
            if isinstance(outcome, ClusterNotFound):
                continue  # it left meanwhile: Engagements brings us back for the roll-up
            if isinstance(outcome, MCRuntimeError):
                failed.append(cluster_name)
                self.events.eventf(
                    cs, "Warning", "CopyFailed", "cluster %s: %s", cluster_name, outcome
                )
            elif isinstance(outcome, Exception):
                raise outcome  # a bug of ours, not a member's failure
            else:
                synced.append(cluster_name)
        self.roll_up(hub, cs, synced, failed)
        return Result(requeue_after=30.0) if failed else None

    # --8<-- [end:reconciler]

    # --8<-- [start:copy]
    def copy_into(self, cluster_name: str, cs: ConfigSet) -> OperationResult:
        """Create or update the copy of ``cs`` in one member cluster (no write when equal)."""
        client = self.mgr.get_cluster(cluster_name).client
        meta = cs.metadata
        copy = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": meta.name, "namespace": meta.namespace},
        }

        def desired(obj: dict[str, Any]) -> None:
            labels = obj["metadata"].setdefault("labels", {})
            labels.update(cs.spec.target_labels)
            labels[SOURCE_LABEL] = f"{meta.namespace}.{meta.name}"
            obj["data"] = dict(cs.spec.data)

        return create_or_update(client, copy, desired)

    # --8<-- [end:copy]

    # --8<-- [start:rollup]
    def roll_up(self, hub: Client, cs: ConfigSet, synced: list[str], failed: list[str]) -> None:
        """Write the status (only when it changed): the clusters holding a copy, and Ready."""

        def status(obj: ConfigSet) -> None:
            obj.status = obj.status or ConfigSetStatus()
            obj.status.observed_generation = obj.metadata.generation
            obj.status.clusters = sorted(synced)
            if failed:
                ready = Condition(
                    type="Ready",
                    status="False",
                    reason="CopyFailed",
                    message=f"no copy in {', '.join(sorted(failed))}",
                )
            else:
                ready = Condition(
                    type="Ready",
                    status="True",
                    reason="Copied",
                    message=f"copied to {len(synced)} clusters",
                )
            ready.observed_generation = obj.metadata.generation
            set_status_condition(obj.status.conditions, ready)

        create_or_patch(hub, cs, status)

    # --8<-- [end:rollup]

    # --8<-- [start:finalize]
    def delete_copies(self, cs: ConfigSet, req: Request) -> None:
        """The cleanup of FINALIZER: delete the copies of ``cs`` in every member cluster.

        Idempotent, as every cleanup must be: a copy already gone is fine. Raising keeps
        the finalizer, so it runs again. Every member is tried before that: one that does
        not answer holds back no other's cleanup.
        """

        def delete_copy(cluster_name: str) -> None:
            client = self.mgr.get_cluster(cluster_name).client  # not engaged (yet): raises
            with ignore_not_found():  # copies share the ConfigSet's (the request's) name
                client.delete("v1/ConfigMap", req.name, req.namespace)

        # every member of the fleet, engaged or not: one skipped would keep its copy for good
        # (FleetNotKnown, right after a start, keeps the finalizer: the cleanup runs again)
        deleted = for_each_cluster(self.mgr.fleet_clusters(), delete_copy)
        errors = [
            exc  # a member that left has nothing of it to clean up
            for exc in deleted.values()
            if isinstance(exc, Exception) and not isinstance(exc, ClusterLeft)
        ]
        if errors:
            raise ExceptionGroup(f"deleting the copies of {req.key} failed", errors)

    # --8<-- [end:finalize]

    # --8<-- [start:maps]
    def configset_of_copy(self, obj: dict[str, Any]) -> list[Request]:
        """A copy changed in a member cluster: reconcile its ConfigSet (in the local cluster)."""
        labels: dict[str, str] = obj["metadata"].get("labels") or {}
        source = labels.get(SOURCE_LABEL, "")
        namespace, _, name = source.partition(".")
        return [Request(namespace, name, "")] if name else []

    def every_configset(self, obj: dict[str, Any]) -> list[Request]:
        """A member joined or left: every ConfigSet's copies and roll-up change."""
        hub = self.mgr.get_cluster().client
        return [
            Request(cs.metadata.namespace or "", cs.metadata.name or "", "")
            for cs in hub.list(ConfigSet)
        ]

    # --8<-- [end:maps]


# --8<-- [start:build]
def build(mgr: mcruntime.Manager) -> mcruntime.Controller:
    """The controller: ConfigSets in the local cluster, their copies in the member clusters."""
    r = ConfigSetReconciler(mgr)

    def hub(name: str) -> bool:
        return name == ""

    def member(name: str) -> bool:
        return name != ""

    return (
        mcruntime.controller_managed_by(mgr)
        .named("configsets")
        .watches(ConfigSet, enqueue_request_for_object(), cluster_filter=hub)
        .watches(
            "v1/ConfigMap",
            enqueue_requests_from_map_func(r.configset_of_copy, cross_cluster=True),
            cluster_filter=member,
        )
        .watches(
            Engagements(
                enqueue_requests_from_map_func(r.every_configset, cross_cluster=True),
                cluster_filter=member,
            )
        )
        .engage_with_local_cluster()
        .complete(r)
    )


# --8<-- [end:build]


def main(argv: list[str] | None = None) -> int:
    """Run the operator on an embedded management server and fleet; print each roll-up."""
    parser = argparse.ArgumentParser(prog="python -m mcruntime.examples.configsets")
    parser.add_argument("--duration", type=float, default=5.0, help="seconds to run")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    from mcruntime.envtest import APIServer
    from mcruntime.providers.embedded import Options, Provider

    hub = APIServer("hub").start()
    members = 3
    try:
        mgr = mcruntime.Manager(hub.kubeconfig(), provider=Provider(Options(clusters=members)))
        install_crd(mgr.get_cluster().client)
        build(mgr)
        with mgr:
            mgr.get_cluster().client.create(
                {
                    "apiVersion": ConfigSet.api_version,
                    "kind": "ConfigSet",
                    "metadata": {"name": "settings", "namespace": "default"},
                    "spec": {"data": {"greeting": "hello"}},
                }
            )
            deadline = time.monotonic() + args.duration
            while time.monotonic() < deadline:
                raw = mgr.get_cluster().api_reader.get(ConfigSet, "settings", "default")
                cs = ConfigSet.from_dict(raw)
                if cs.status and cs.status.clusters:
                    print(f"settings copied to {', '.join(cs.status.clusters)}")
                    if len(cs.status.clusters) == members:
                        break
                time.sleep(0.5)
    except KeyboardInterrupt:  # Ctrl-C: the manager stopped on the way out of its block
        return 0
    finally:
        hub.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
