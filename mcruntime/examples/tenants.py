"""A Tenant operator in every cluster of a fleet: owned children, a finalizer, conditions, a webhook.

    python -m mcruntime.examples.tenants          # an embedded fleet of 3 clusters

The shape of a kubebuilder operator, run over a fleet by one uniform reconciler.
A ``Tenant`` (``tenancy.example.mcruntime.io/v1alpha1``, namespaced, with a
status subresource; its CRD is generated from the model and installed in each
cluster) gets, in its own cluster and namespace:

- a ConfigMap, a ServiceAccount and a RoleBinding, written with server-side
  apply and controlled by the Tenant (owner references): the cluster's garbage
  collector deletes them with it, and ``owns()`` brings a child changed or
  deleted by hand back to its Tenant's reconciler;
- a quota reservation in a system outside the clusters (here a SIMULATED quota
  service in the process), released by the finalizer
  ``tenancy.example.mcruntime.io/quota`` before the Tenant goes;
- a ``Ready`` condition with ``observedGeneration`` and a ``Normal`` event when it
  becomes ready; the condition's message counts the owner's Tenants in that
  cluster, read from the cache through a field index on ``spec.owner``.

A validating webhook refuses a quota above ``MAX_QUOTA`` and a changed
``spec.owner``; the manager installs it in each cluster as it joins. Only spec
changes reach the reconciler (``GenerationChanged``), and each Tenant is looked at
again every ``RECHECK`` seconds (``requeue_after``): the quota service may lose a
reservation. The scenario creates Tenants, has one refused, deletes a child by
hand, lets a cluster join and one leave, deletes a Tenant, and exits.
"""

from __future__ import annotations

import argparse
import logging
import threading
from typing import Any, ClassVar

import mcruntime
from mcruntime import Request, Result
from mcruntime.client import Client, Model, Resource
from mcruntime.controllerutil import (
    Condition,
    get_controller_of,
    is_status_condition_true,
    set_controller_reference,
    set_status_condition,
)
from mcruntime.crd import generate_crd, install_crds
from mcruntime.envtest import wait_for, wait_for_condition
from mcruntime.errors import MCRuntimeError, NotFound, ignore_not_found
from mcruntime.examples._demo import run_demo, say
from mcruntime.finalizer import Finalizers
from mcruntime.predicate import GenerationChanged
from mcruntime.providers import embedded
from mcruntime.reconcile import request_logger
from mcruntime.webhook import AdmissionRequest, Denied, WebhookServer, WebhookServerOptions

__all__ = [
    "FINALIZER",
    "MAX_QUOTA",
    "TENANT_CRD",
    "QuotaService",
    "Tenant",
    "TenantReconciler",
    "TenantValidator",
    "build",
    "install_crd",
    "main",
]

log = logging.getLogger("tenants")
#: inside a reconcile its lines begin ``cluster=<name> request=<namespace>/<name>:``
rlog = request_logger(log)

GROUP = "tenancy.example.mcruntime.io"
#: on a Tenant: its quota reservation may still exist
FINALIZER = f"{GROUP}/quota"
#: who this operator's writes are recorded as (``metadata.managedFields``)
FIELD_MANAGER = "tenant-operator"
MAX_QUOTA = 100
#: seconds before a Tenant is looked at again (the quota service may lose a reservation)
RECHECK = 60.0


class TenantSpec(Model):
    owner: str
    admins: list[str] = []
    quota: int = 10


class TenantStatus(Model):
    observed_generation: int | None = None
    conditions: list[Condition] = []


class Tenant(Resource):
    api_version: ClassVar[str] = f"{GROUP}/v1alpha1"
    kind: ClassVar[str] = "Tenant"
    spec: TenantSpec
    status: TenantStatus | None = None


TENANT_CRD: dict[str, Any] = generate_crd(Tenant)


class QuotaService:
    """SIMULATED: a system outside the clusters holding a reservation per Tenant."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reserved: dict[str, int] = {}

    def reserve(self, key: str, amount: int) -> None:
        with self._lock:
            self._reserved[key] = amount

    def release(self, key: str) -> None:
        with self._lock:
            self._reserved.pop(key, None)

    def reservations(self) -> dict[str, int]:
        with self._lock:
            return dict(self._reserved)


class TenantReconciler:
    """Makes each Tenant's children, reservation and status right, in the Tenant's cluster."""

    def __init__(self, mgr: mcruntime.Manager, quota: QuotaService) -> None:
        self.mgr = mgr
        self.quota = quota
        self.events = mgr.get_event_recorder_for("tenant-operator")
        self.finalizers = Finalizers()
        self.finalizers.register(FINALIZER, self.release_quota)

    def __call__(self, req: Request) -> Result | None:
        cluster = self.mgr.get_cluster(req.cluster_name)
        client = cluster.client.with_field_manager(FIELD_MANAGER)
        try:
            tenant = client.get(Tenant, req.name, req.namespace)
        except NotFound:
            return None  # deleted: the finalizer released its reservation first
        key = f"{req.cluster_name}/{req.namespace}/{req.name}"
        # adds FINALIZER to a new Tenant; on a deleted one, releases the quota and removes it
        done = self.finalizers.finalize(tenant, key)
        if done.updated:
            with ignore_not_found():  # its last finalizer removed, the Tenant may be gone
                tenant = client.update(tenant)  # keep what the server returned for the next write
        if done.error:
            raise done.error  # the finalizer stays: the release is tried again
        if tenant.metadata.deletion_timestamp:
            return None  # the children go with the Tenant (owner references)
        self.quota.reserve(key, tenant.spec.quota)
        for child in children(tenant):
            set_controller_reference(tenant, child)
            client.apply(child, force=True)  # this operator owns what it applies
        self.set_ready(client, tenant)
        return Result(requeue_after=RECHECK)

    def release_quota(self, tenant: Tenant, key: str) -> None:
        """The cleanup of FINALIZER: release the Tenant's reservation before the Tenant goes."""
        self.quota.release(key)
        rlog.info("quota reservation released")

    def set_ready(self, client: Client, tenant: Tenant) -> None:
        """Write the status when it changed: observedGeneration and the Ready condition."""
        generation = tenant.metadata.generation
        # the owner's Tenants in this cluster, from the cache through the field index
        same_owner = client.list(Tenant, fields={"spec.owner": tenant.spec.owner})
        status = tenant.status or TenantStatus()
        ready = Condition(
            type="Ready",
            status="True",
            reason="Provisioned",
            message=f"owner {tenant.spec.owner} has {len(same_owner)} tenant(s) here",
            observed_generation=generation,
        )
        was_ready = is_status_condition_true(status.conditions, "Ready")
        changed = set_status_condition(status.conditions, ready)
        if not changed and status.observed_generation == generation:
            return  # a steady state writes nothing
        status.observed_generation = generation
        tenant.status = status
        client.update_status(tenant)
        if not was_ready:
            self.events.event(tenant, "Normal", "Provisioned", ready.message)


def children(tenant: Tenant) -> list[dict[str, Any]]:
    """The applied configurations of a Tenant's children: only the fields the operator owns."""
    ns, name = tenant.metadata.namespace, f"tenant-{tenant.metadata.name}"
    meta = {"name": name, "namespace": ns}
    subjects = [{"kind": "ServiceAccount", "name": name, "namespace": ns}]
    subjects += [
        {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": admin}
        for admin in tenant.spec.admins
    ]
    return [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": dict(meta),
            "data": {"owner": tenant.spec.owner, "quota": str(tenant.spec.quota)},
        },
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": dict(meta)},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": dict(meta),
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "edit",
            },
            "subjects": subjects,
        },
    ]


class TenantValidator:
    """The validating webhook: a quota of at most ``MAX_QUOTA``; ``spec.owner`` never changes."""

    def validate_create(self, request: AdmissionRequest, obj: Tenant) -> None:
        if obj.spec.quota > MAX_QUOTA:
            raise Denied(f"spec.quota: {obj.spec.quota} is more than {MAX_QUOTA}", code=422)

    def validate_update(self, request: AdmissionRequest, old: Tenant, new: Tenant) -> None:
        if new.spec.owner != old.spec.owner:
            raise Denied("spec.owner: field is immutable", code=422)
        self.validate_create(request, new)

    def validate_delete(self, request: AdmissionRequest, obj: Tenant) -> None:
        return None


def _owner_of(obj: dict[str, Any]) -> str | None:
    """The index function of ``spec.owner``: it gets the cached object as a dict."""
    return (obj.get("spec") or {}).get("owner")


def build(mgr: mcruntime.Manager, quota: QuotaService) -> mcruntime.Controller:
    """The field index, the controller and the webhook, for every cluster of ``mgr``."""
    mgr.get_field_indexer().index_field(Tenant, "spec.owner", _owner_of)
    mcruntime.webhook_managed_by(mgr).for_(Tenant).with_validator(TenantValidator()).complete()
    return (
        mcruntime.controller_managed_by(mgr)
        .for_(Tenant, GenerationChanged())  # status writes and finalizer edits do not re-run it
        .owns("v1/ConfigMap")
        .owns("v1/ServiceAccount")
        .owns("rbac.authorization.k8s.io/v1/RoleBinding")
        .complete(TenantReconciler(mgr, quota))
    )


def install_crd(cluster: mcruntime.Cluster) -> None:
    """Install the Tenant CRD in a cluster before it joins (the embedded provider's
    ``prepare``): the controller and the webhook need the kind (a cluster without it is
    engaged once it has it, with a warning until then)."""
    install_crds(cluster.uncached_client, [TENANT_CRD])


# -- the demo scenario, on the embedded fleet ---------------------------------------------


def _tenant(name: str, owner: str, quota: int = 10) -> dict[str, Any]:
    return {
        "apiVersion": Tenant.api_version,
        "kind": "Tenant",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"owner": owner, "quota": quota, "admins": ["bob"]},
    }


def _ready(client: Client, name: str) -> str:
    tenant = wait_for_condition(client, Tenant, name, "default", "Ready", timeout=20)
    status = tenant.status
    assert status is not None  # its Ready condition is in it
    ready = next(c for c in status.conditions if c.type == "Ready")
    return f"Ready ({ready.message}), observedGeneration {status.observed_generation}"


def scenario(
    mgr: mcruntime.Manager,
    provider: embedded.Provider,
    quota: QuotaService,
    stop: threading.Event,
) -> None:
    """Tenants made and refused, a child put back, a cluster joining and one leaving, a
    Tenant deleted; each step printed as one line."""
    server = mgr.get_webhook_server()
    # the scenario's own writes and reads go to the API servers (no cache)
    api = {n: mgr.get_cluster(n).uncached_client for n in provider.names()}
    wait_for(lambda: set(server.installed_clusters()) >= set(api), timeout=30, stop=stop)
    for client in api.values():
        client.create(_tenant("team-a", "alice"))
    api["cluster-0"].create(_tenant("team-b", "alice"))  # the owner's second Tenant there
    for name, client in api.items():
        say(f"cluster={name} tenant team-a: {_ready(client, 'team-a')}")
    say(f"cluster=cluster-0 tenant team-b: {_ready(api['cluster-0'], 'team-b')}")
    controlled = sorted(
        obj["kind"]
        for kind in (
            "v1/ConfigMap",
            "v1/ServiceAccount",
            "rbac.authorization.k8s.io/v1/RoleBinding",
        )
        for obj in api["cluster-0"].list(kind, "default", fields={"metadata.name": "tenant-team-a"})
        if (ref := get_controller_of(obj)) and ref["name"] == "team-a"
    )
    say(f"cluster=cluster-0 children of team-a (controlled by it): {', '.join(controlled)}")
    events = wait_for(
        lambda: [
            f"{e['type']} {e['reason']}"
            for e in api["cluster-1"].list("v1/Event", "default")
            if e["involvedObject"]["name"] == "team-a"
        ],
        timeout=10,
        stop=stop,
    )
    say(f"cluster=cluster-1 events of team-a: {', '.join(events)}")
    try:
        api["cluster-1"].create(_tenant("greedy", "carol", quota=500))
        say("cluster=cluster-1 tenant greedy created (unexpected)")
    except MCRuntimeError as exc:
        say(f"cluster=cluster-1 tenant greedy refused: {getattr(exc, 'message', exc)}")

    # a child deleted by hand comes back: owns() enqueues its Tenant
    api["cluster-1"].delete("v1/ConfigMap", "tenant-team-a", "default")
    wait_for(
        lambda: api["cluster-1"].list(
            "v1/ConfigMap", "default", fields={"metadata.name": "tenant-team-a"}
        ),
        timeout=20,
        stop=stop,
    )
    say("cluster=cluster-1 configmap tenant-team-a deleted by hand: put back")

    # a cluster joins (its CRD installed first), one leaves
    provider.add_cluster("cluster-3")
    wait_for(lambda: "cluster-3" in server.installed_clusters(), timeout=30, stop=stop)
    newcomer = mgr.get_cluster("cluster-3").uncached_client
    newcomer.create(_tenant("team-c", "dave"))
    say(f"cluster=cluster-3 joined; tenant team-c: {_ready(newcomer, 'team-c')}")
    provider.remove("cluster-2")  # disengaged; its server stops with the fleet
    say(f"cluster=cluster-2 left; engaged: {', '.join(sorted(mgr.engaged_clusters()))}")

    # deleting a Tenant releases its reservation (finalizer) before it goes
    api["cluster-0"].delete(Tenant, "team-a", "default")
    wait_for(
        lambda: not api["cluster-0"].list(Tenant, "default", fields={"metadata.name": "team-a"}),
        timeout=20,
        stop=stop,
    )
    say(f"state: reservations: {', '.join(sorted(quota.reservations()))}")


def _play(
    mgr: mcruntime.Manager, provider: embedded.Provider, quota: QuotaService, stop: threading.Event
) -> None:
    try:
        scenario(mgr, provider, quota, stop)
    except Exception:
        if stop.is_set():  # (a Ctrl-C: the clusters left under it)
            raise
        log.exception("the scenario failed")
    finally:
        mgr.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m mcruntime.examples.tenants", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--clusters", type=int, default=3, help="embedded clusters (default 3)")
    parser.add_argument(
        "--duration", type=float, default=60.0, help="stop after this many seconds at most"
    )
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING)
    provider = embedded.Provider(embedded.Options(clusters=args.clusters), prepare=install_crd)
    server = WebhookServer(WebhookServerOptions(host="127.0.0.1", port=0, install=True))
    mgr = mcruntime.Manager(
        provider=provider,
        options=mcruntime.ManagerOptions(webhook_server=server),
    )
    quota = QuotaService()
    build(mgr, quota)
    return run_demo(
        mgr,
        duration=args.duration,
        tasks={"scenario": lambda stop: _play(mgr, provider, quota, stop)},
        cleanup=provider.close,
    )


if __name__ == "__main__":
    raise SystemExit(main())
