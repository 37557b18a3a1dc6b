"""Copy labelled ConfigMaps from the local (management) cluster to every provider cluster.

    python -m mcruntime.examples.sync_local_to_remote         # embedded local server + fleet
    python -m mcruntime.examples.sync_local_to_remote --kubeconfig ~/.kube/config --provider kind

A ConfigMap labelled ``mcruntime.io/sync=true`` in the local cluster is copied
to the same namespace and name in every provider cluster, clusters joining
later included (a copy waits for its namespace to exist there). The source
gets the finalizer ``mcruntime.io/sync-copies``: deleting it removes the
copies from every cluster first, then the finalizer, and the source goes.
Removing the label does the same but keeps the source. A copy changed or
deleted by hand in a provider cluster is put back; an object of the same name
that is not a copy is left alone. Run it on one replica at a time (leader
election): under the ``Sharded`` coordinator every replica reconciles the local
cluster's sources, and the first to clean up would remove the finalizer while
the copies of the members other replicas hold stay (see Operations, sharding).

Without ``--kubeconfig``/``--context`` the local cluster is an embedded API
server started here and a scenario plays on it: sources are created, one is
changed, a cluster joins (``embedded`` provider), one source is deleted, and
the fleet's state is printed before exiting after ``--duration`` seconds.
"""

from __future__ import annotations

import argparse
import logging
import sys
import threading
import time
from typing import Any

import mcruntime
from mcruntime import Request, Result
from mcruntime.cli import NO_PROVIDER, add_arguments, provider_from_args, setup_logging
from mcruntime.errors import (
    AlreadyExists,
    ClusterLeft,
    ClusterNotFound,
    Conflict,
    FleetNotKnown,
    MCRuntimeError,
    NotFound,
)
from mcruntime.event import meta as _meta
from mcruntime.examples._demo import run_demo, say, wait_engaged
from mcruntime.handler import enqueue_request_for_object, enqueue_requests_from_map_func
from mcruntime.multicluster import LOCAL
from mcruntime.predicate import Funcs, from_func, label_selector

__all__ = [
    "COPY_LABEL",
    "FINALIZER",
    "SOURCE_ANNOTATION",
    "SYNC_LABEL",
    "Syncer",
    "build",
    "desired_copy",
    "main",
]

log = logging.getLogger("sync_local_to_remote")

CONFIGMAP = "v1/ConfigMap"
#: the label that marks a local ConfigMap for copying (value "true")
SYNC_LABEL = "mcruntime.io/sync"
#: the label every copy carries (value "true"); the watch on provider clusters selects on it
COPY_LABEL = "mcruntime.io/sync-copy"
#: on a copy: ``<namespace>/<name>`` of its source in the local cluster
SOURCE_ANNOTATION = "mcruntime.io/synced-from"
#: on a source: its copies may still exist somewhere
FINALIZER = "mcruntime.io/sync-copies"


def is_source(obj: dict[str, Any]) -> bool:
    """Whether ``obj`` is labelled for copying."""
    return (_meta(obj).get("labels") or {}).get(SYNC_LABEL) == "true"


def _key(obj: dict[str, Any]) -> str:
    m = _meta(obj)
    return f"{m.get('namespace')}/{m.get('name')}"


def desired_copy(source: dict[str, Any]) -> dict[str, Any]:
    """The copy of ``source``: its data and labels (sync label swapped for the copy label)."""
    m = _meta(source)
    labels = {k: v for k, v in (m.get("labels") or {}).items() if k != SYNC_LABEL}
    labels[COPY_LABEL] = "true"
    copy: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": m["name"],
            "namespace": m["namespace"],
            "labels": labels,
            "annotations": {SOURCE_ANNOTATION: _key(source)},
        },
    }
    for field in ("data", "binaryData"):
        if source.get(field):
            copy[field] = source[field]
    return copy


def _is_copy_of(obj: dict[str, Any], key: str) -> bool:
    return (_meta(obj).get("annotations") or {}).get(SOURCE_ANNOTATION) == key


def _differs(have: dict[str, Any], want: dict[str, Any]) -> bool:
    if any((have.get(f) or {}) != (want.get(f) or {}) for f in ("data", "binaryData")):
        return True
    labels: dict[str, str] = want["metadata"]["labels"]
    return (_meta(have).get("labels") or {}) != labels


class Syncer:
    """The reconciler and map functions; requests always name a source in the local cluster."""

    def __init__(self, mgr: mcruntime.Manager, out: Any = None) -> None:
        self.mgr = mgr
        self.out = out

    def _say(self, line: str) -> None:
        say(line, self.out)

    # -- map functions (informer threads: cache reads only) -------------------------

    def source_of_copy(self, copy: dict[str, Any]) -> list[Request]:
        """A copy's event -> its source's request in the local cluster."""
        key = (_meta(copy).get("annotations") or {}).get(SOURCE_ANNOTATION, "")
        namespace, sep, name = key.partition("/")
        return [Request(namespace, name, LOCAL)] if sep and name else []

    def sources_in_namespace(self, namespace: dict[str, Any]) -> list[Request]:
        """A namespace appearing in a provider cluster (also when the cluster joins) -> its sources."""
        ns = _meta(namespace).get("name") or ""
        try:
            sources = self.mgr.get_cluster(LOCAL).client.list(
                CONFIGMAP, ns, labels={SYNC_LABEL: "true"}
            )
        except MCRuntimeError as exc:
            log.warning("cannot list sources in namespace %s: %s", ns, exc)
            return []
        return [Request(ns, _meta(s)["name"], LOCAL) for s in sources]

    # -- reconcile --------------------------------------------------------------------

    def reconcile(self, req: Request) -> Result | None:
        """Bring every cluster's copy of the source ``req`` in line (or remove them all)."""
        if req.cluster_name != LOCAL:
            return None
        local = self.mgr.get_cluster(LOCAL)
        try:
            source = local.client.get(CONFIGMAP, req.name, req.namespace)
        except NotFound:
            return None
        try:
            # every member, engaged or not: a clean-up that skipped one (down since the start,
            # or not engaged yet right after it) would leave its copy for good
            fleet = self.mgr.fleet_clusters()
        except FleetNotKnown:
            return Result(requeue_after=1.0)  # just started: the provider has not named them all
        meta = _meta(source)
        finalizers = list(meta.get("finalizers") or [])
        deleting = bool(meta.get("deletionTimestamp"))
        if deleting or not is_source(source):
            if FINALIZER in finalizers:
                self._clean_up(req, source, "deleted" if deleting else "unlabelled", fleet)
            return None
        if FINALIZER not in finalizers:
            meta["finalizers"] = [*finalizers, FINALIZER]
            source = local.client.update(source)
        in_sync: list[str] = []
        failed: list[str] = []
        errors: list[MCRuntimeError] = []
        for name in self.mgr.engaged_clusters():  # one engaged later: its namespaces bring it
            try:
                if self._copy_to(name, source):
                    in_sync.append(name)
            except ClusterNotFound:
                continue
            except MCRuntimeError as exc:  # one cluster's failure holds back no other
                failed.append(name)
                errors.append(exc)
        self._say(
            f"cluster=local configmap {req.key}: copies in sync in "
            f"{', '.join(in_sync) or 'no cluster'}"
            + (f"; failed in {', '.join(failed)}" if failed else "")
        )
        if errors:
            # every cluster's error: when each is of a cluster found not answering (a frozen
            # one), the request waits for them and is retried at their first answer, not
            # with backoff
            raise ExceptionGroup(
                f"copy of configmap {req.key} failed in {', '.join(failed)}", errors
            )
        return None

    def _copy_to(self, cluster_name: str, source: dict[str, Any]) -> bool:
        """Create or update the copy in one cluster; True when it is in sync there."""
        client = self.mgr.get_cluster(cluster_name).client
        want = desired_copy(source)
        key = _key(source)
        namespace, name = want["metadata"]["namespace"], want["metadata"]["name"]
        try:
            have = client.get(CONFIGMAP, name, namespace)
        except NotFound:
            try:
                client.create(want)
            except AlreadyExists:
                return False  # the cache lags behind; the copy's event brings the source back here
            except NotFound:
                self._say(
                    f"cluster={cluster_name} configmap {key}: namespace {namespace} missing, copy waits for it"
                )
                return False
            self._say(f"cluster={cluster_name} configmap {key}: copy created")
            return True
        if not _is_copy_of(have, key):
            self._say(
                f"cluster={cluster_name} configmap {key}: exists and is not a copy, left alone"
            )
            return False
        if not _differs(have, want):
            return True
        have["metadata"]["labels"] = want["metadata"]["labels"]
        for field in ("data", "binaryData"):
            if field in want:
                have[field] = want[field]
            else:
                have.pop(field, None)
        try:
            client.update(have)
        except (Conflict, NotFound):
            return False  # changed meanwhile; its event brings the source back here
        self._say(f"cluster={cluster_name} configmap {key}: copy updated")
        return True

    def _clean_up(self, req: Request, source: dict[str, Any], why: str, fleet: list[str]) -> None:
        """Delete the copies in every cluster of ``fleet`` (read from the API, not the cache),
        then drop the finalizer."""
        key = _key(source)
        removed: list[str] = []
        failed: list[str] = []
        errors: list[MCRuntimeError] = []
        for name in fleet:
            try:
                if self._delete_copy(name, req, key):
                    removed.append(name)
            except ClusterLeft:
                continue  # it left: nothing of it to clean up
            except MCRuntimeError as exc:  # one cluster's failure holds back no other's clean-up
                # (a ClusterNotFound too: a member not engaged keeps the finalizer until it is)
                failed.append(name)
                errors.append(exc)
        if errors:
            # the finalizer stays until every copy is gone (or its cluster left); the request
            # waits for a cluster found not answering and is retried at its first answer
            raise ExceptionGroup(
                f"clean-up of configmap {req.key} failed in {', '.join(failed)}", errors
            )
        meta = _meta(source)
        meta["finalizers"] = [f for f in meta.get("finalizers") or [] if f != FINALIZER]
        try:
            self.mgr.get_cluster(LOCAL).client.update(source)
        except NotFound:
            if not removed:
                return  # an earlier pass finished the clean-up; the cache had not caught up
        self._say(
            f"cluster=local configmap {key} {why}: copies removed from "
            f"{', '.join(removed) or 'no cluster'}, finalizer removed"
        )

    def _delete_copy(self, cluster_name: str, req: Request, key: str) -> bool:
        """Delete the copy in one cluster (read from the API, not the cache); True when
        this deleted it."""
        cluster = self.mgr.get_cluster(cluster_name)
        try:
            copy = cluster.api_reader.get(CONFIGMAP, req.name, req.namespace)
        except NotFound:
            return False
        if not _is_copy_of(copy, key):
            return False
        try:
            cluster.client.delete(
                CONFIGMAP, req.name, req.namespace, preconditions={"uid": _meta(copy)["uid"]}
            )
        except NotFound:
            return False
        self._say(f"cluster={cluster_name} configmap {key}: copy deleted")
        return True


def build(mgr: mcruntime.Manager, out: Any = None) -> mcruntime.Controller:
    """The controller: sources in the local cluster, copies and namespaces in the provider clusters."""
    syncer = Syncer(mgr, out)

    def local(name: str) -> bool:
        return name == LOCAL

    def remote(name: str) -> bool:
        return name != LOCAL

    ours = from_func(lambda o: is_source(o) or FINALIZER in (_meta(o).get("finalizers") or ()))
    created = Funcs(update=lambda e: False, delete=lambda e: False, generic=lambda e: False)
    return (
        mcruntime.controller_managed_by(mgr)
        .named("sync-configmaps")
        .watches(CONFIGMAP, enqueue_request_for_object(), ours, cluster_filter=local)
        .watches(
            CONFIGMAP,
            enqueue_requests_from_map_func(syncer.source_of_copy, cross_cluster=True),
            label_selector({COPY_LABEL: "true"}),
            cluster_filter=remote,
        )
        .watches(
            "v1/Namespace",
            enqueue_requests_from_map_func(syncer.sources_in_namespace, cross_cluster=True),
            created,
            cluster_filter=remote,
        )
        .engage_with_local_cluster()
        .complete(syncer.reconcile)
    )


# -- the demo scenario ----------------------------------------------------------------


def _source(name: str, data: dict[str, str], *, sync: bool = True) -> dict[str, Any]:
    labels = {"app": "demo", **({SYNC_LABEL: "true"} if sync else {})}
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "data": data,
    }


def report(mgr: mcruntime.Manager, out: Any = None) -> None:
    """Print which copies each engaged cluster holds (read from the API)."""
    out = out or sys.stdout
    local = sorted(
        _meta(o)["name"] for o in mgr.get_cluster(LOCAL).api_reader.list(CONFIGMAP, "default")
    )
    say(f"state: cluster=local configmaps: {', '.join(local) or '-'}", out)
    for name in mgr.engaged_clusters():
        try:
            items = mgr.get_cluster(name).api_reader.list(
                CONFIGMAP, "default", labels={COPY_LABEL: "true"}
            )
        except MCRuntimeError as exc:
            say(f"state: cluster={name} unreadable: {exc}", out)
            continue
        copies = sorted(_meta(o)["name"] for o in items)
        say(f"state: cluster={name} copies: {', '.join(copies) or '-'}", out)


def scenario(
    mgr: mcruntime.Manager, duration: float, stop: threading.Event, out: Any = None
) -> None:
    """Sources appear, one changes, a cluster joins, one source is deleted; the state is printed."""
    provider = mgr.provider
    embedded = provider is not None and hasattr(provider, "add_cluster")
    names = list(provider.names()) if embedded else []  # type: ignore[union-attr]
    if names and not wait_engaged(mgr, names, stop):
        log.error("clusters did not engage in time: %s", names)
        return
    client = mgr.get_cluster(LOCAL).client
    start = time.monotonic()

    def at(fraction: float) -> bool:
        return not stop.wait(max(0.0, start + fraction * duration - time.monotonic()))

    try:
        log.info(
            "scenario: creating sources app-config and feature-flags, and local-only (not labelled)"
        )
        client.create(_source("app-config", {"greeting": "hello"}))
        client.create(_source("feature-flags", {"dark-mode": "on"}))
        client.create(_source("local-only", {"stays": "here"}, sync=False))
        if not at(0.25):
            return
        log.info("scenario: changing app-config")
        client.patch(CONFIGMAP, "app-config", {"data": {"greeting": "hello, fleet"}}, "default")
        if embedded and at(0.4):
            new = f"{provider.options.prefix}-{len(names)}"  # type: ignore[union-attr]
            log.info("scenario: cluster %s joins the fleet", new)
            provider.add_cluster(new)  # type: ignore[union-attr]
        if not at(0.6):
            return
        log.info("scenario: deleting feature-flags")
        client.delete(CONFIGMAP, "feature-flags", "default")
        if not at(0.85):
            return
        report(mgr, out)
    except MCRuntimeError as exc:
        if not stop.is_set():
            log.warning("scenario step failed: %s", exc)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m mcruntime.examples.sync_local_to_remote",
        description=__doc__.splitlines()[0],
    )
    add_arguments(parser, default_provider="embedded")
    parser.add_argument(
        "--duration",
        type=float,
        default=None,
        help="stop after this many seconds (default: 10 with the embedded local server, else until Ctrl-C)",
    )
    args = parser.parse_args(argv)
    setup_logging(args.log_level)
    if args.provider == NO_PROVIDER:
        print("error: this example copies to provider clusters: name a --provider", file=sys.stderr)
        return 2
    from mcruntime.cluster import Cluster
    from mcruntime.envtest import APIServer

    server: APIServer | None = None
    try:
        provider = provider_from_args(args)
        if args.kubeconfig or args.context:
            local = Cluster.from_kubeconfig(args.kubeconfig, context=args.context)
        else:
            server = APIServer("local").start()
            local = Cluster.from_kubeconfig(server.kubeconfig())
        mgr = mcruntime.Manager(local, provider=provider)
    except MCRuntimeError as exc:
        if server is not None:
            server.close()
        print(f"error: {exc}", file=sys.stderr)
        return 2
    build(mgr)
    duration = (
        args.duration if args.duration is not None else (10.0 if server is not None else None)
    )
    tasks = {}
    if server is not None:
        start_fleet = getattr(provider, "start_fleet", None)  # the embedded provider's
        if start_fleet is not None:
            start_fleet()
        tasks["scenario"] = lambda stop: scenario(mgr, duration or 10.0, stop)
    return run_demo(mgr, duration=duration, tasks=tasks, cleanup=server.close if server else None)


if __name__ == "__main__":
    sys.exit(main())
