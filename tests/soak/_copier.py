"""The soak's cross-cluster path: sources in the hub (the replicas' local cluster), a
controller copying each one to every member its replica engages, and what the checks read.

Requests name the source in the hub (``""``), as in `mcruntime.examples.sync_local_to_remote`:
one reconcile copies the source to each engaged member, collects the members' errors and
raises them together, so a request that failed only on members found not answering waits
for them and runs again at their first answer. A copy whose source is gone is deleted by
its label, not by a finalizer on the source: with sharded replicas each replica copies to
its own members, and a finalizer removed by the first replica done would leave the others'
copies behind. The copies' own watch (whose initial list comes with a member joining a
replica) brings back the sources of the copies a member holds, its sources deleted
meanwhile included; `Engagements` brings every source to a member joining.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import mcruntime
from mcruntime.controller import Controller
from mcruntime.errors import AlreadyExists, ClusterNotFound, Conflict, MCRuntimeError, NotFound
from mcruntime.event import meta
from mcruntime.handler import enqueue_request_for_object, enqueue_requests_from_map_func
from mcruntime.multicluster import LOCAL
from mcruntime.predicate import label_selector
from mcruntime.reconcile import Request
from mcruntime.source import Engagements
from tests.soak._ledger import Key

if TYPE_CHECKING:
    from tests.soak._world import Replica

#: the hub's name in the ledger's keys and the soak's direct clients
HUB = "hub"
#: the namespace of the sources in the hub, and of their copies in every member
HUB_NS = "soak-hub"
#: the sources the hub's writer keeps creating, updating and deleting
SOURCES = tuple(f"src-{i}" for i in range(3))
#: every copy carries it (value "true"); members' watch of copies selects on it
COPY_LABEL = "soak.mcruntime.io/copy"
CONFIGMAP = "v1/ConfigMap"


def copy_of(source: dict[str, Any]) -> dict[str, Any]:
    m = meta(source)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": m["name"],
            "namespace": m["namespace"],
            "labels": {COPY_LABEL: "true"},
        },
        "data": dict(source.get("data") or {}),
    }


def hub_key(name: str) -> Key:
    return (HUB, HUB_NS, name)


class Copier:
    """One replica's hub-to-member controller (see the module's docstring).

    Each write to a member's copy is entered in ``world.copy_overlaps`` under the key
    ``(member, namespace, name)``: two replicas writing to one member at once, or two
    reconciles writing one copy, are overlaps.
    """

    def __init__(self, replica: Replica) -> None:
        self.replica = replica
        self.mgr = replica.manager
        self.world = replica.world
        self.controller: Controller | None = None

    def build(self) -> Controller:
        def local(name: str) -> bool:
            return name == LOCAL

        def remote(name: str) -> bool:
            return name != LOCAL

        self.controller = (
            mcruntime.controller_managed_by(self.mgr)
            .named("soak-copier")
            .watches(CONFIGMAP, enqueue_request_for_object(), cluster_filter=local)
            .watches(
                CONFIGMAP,
                enqueue_requests_from_map_func(self._source_of_copy, cross_cluster=True),
                label_selector({COPY_LABEL: "true"}),
                cluster_filter=remote,
            )
            .watches(
                Engagements(
                    enqueue_requests_from_map_func(self._every_source, cross_cluster=True),
                    cluster_filter=remote,
                    leaves=False,
                )
            )
            .engage_with_local_cluster()
            .with_options(max_concurrent_reconciles=2, reconcile_timeout=10.0)
            .complete(self.reconcile)
        )
        return self.controller

    # -- map functions (informer threads: cache reads only) -----------------------------

    @staticmethod
    def _source_of_copy(copy: dict[str, Any]) -> list[Request]:
        m = meta(copy)
        return [Request(m["namespace"], m["name"], LOCAL)]

    def _every_source(self, _cluster: dict[str, Any]) -> list[Request]:
        hub = self.mgr.get_cluster(LOCAL).client
        return [Request(HUB_NS, meta(s)["name"], LOCAL) for s in hub.list(CONFIGMAP, HUB_NS)]

    # -- reconcile ----------------------------------------------------------------------

    def reconcile(self, req: Request) -> None:
        """Bring the source's copy in every engaged member in line (deleted with its source)."""
        if req.cluster_name != LOCAL or req.namespace != HUB_NS:
            return
        try:
            source: dict[str, Any] | None = self.mgr.get_cluster(LOCAL).client.get(
                CONFIGMAP, req.name, req.namespace
            )
        except NotFound:
            source = None
        errors: list[MCRuntimeError] = []
        for member in self.mgr.engaged_clusters():
            try:
                self._copy_to(member, req, source)
            except ClusterNotFound:
                continue  # it left meanwhile
            except MCRuntimeError as exc:  # one member's failure holds back no other
                errors.append(exc)
        if errors:
            raise ExceptionGroup(f"copy of {req.key} failed in {len(errors)} members", errors)

    def _copy_to(self, member: str, req: Request, source: dict[str, Any] | None) -> None:
        client = self.mgr.get_cluster(member).client
        key: Key = (member, req.namespace, req.name)
        overlaps = self.world.copy_overlaps
        overlaps.enter(self.replica.name, key)
        try:
            try:
                have: dict[str, Any] | None = client.get(CONFIGMAP, req.name, req.namespace)
            except NotFound:
                have = None
            if source is None:
                if have is not None:
                    try:
                        client.delete(CONFIGMAP, req.name, req.namespace)
                    except NotFound:
                        return
                    self.world.copied()
                return
            want = copy_of(source)
            if have is None:
                try:
                    client.create(want)
                except AlreadyExists:
                    return  # the cache lags behind; the copy's event brings the source back
                self.world.copied()
            elif (have.get("data") or {}) != want["data"]:
                have["data"] = want["data"]
                try:
                    client.update(have)
                except (Conflict, NotFound):
                    return  # changed meanwhile; its event brings the source back
                self.world.copied()
        finally:
            overlaps.exit(self.replica.name, key)


def copies_held(reader: Any, timeout: float = 10.0) -> dict[str, str]:
    """The copies a member's API server holds now: ``{name: v}`` (raises when it cannot list)."""
    items = reader.list(CONFIGMAP, HUB_NS, labels={COPY_LABEL: "true"}, timeout=timeout)
    return {o["metadata"]["name"]: str((o.get("data") or {}).get("v")) for o in items}
