"""A controller with a finalizer registry over a fleet of embedded API servers (real HTTP, real client)."""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

import mcruntime
from mcruntime import RequeueAfter
from mcruntime.cluster import Cluster
from mcruntime.envtest import Proxy, wait_for
from mcruntime.errors import NotFound, ignore_not_found
from mcruntime.finalizer import Finalizers
from mcruntime.predicate import FieldChanged
from mcruntime.providers import clusters
from mcruntime.reconcile import Request, Result
from mcruntime.workqueue import ItemExponentialFailureRateLimiter
from tests.integration.multicluster._mc_helpers import CM, configmap, fleet_provider, running

pytestmark = pytest.mark.timeout(60)

KEY = "example.com/cleanup"


def _gone(client: Any, name: str) -> bool:
    try:
        client.get(CM, name, "default")
    except NotFound:
        return True
    return False


def _finalizers(client: Any, name: str) -> list[str]:
    return list(client.get(CM, name, "default")["metadata"].get("finalizers") or [])


def _finalizing(mgr: mcruntime.Manager, fin: Finalizers) -> Callable[[Request], None]:
    """The reconciler of the finalizer pages: ``finalize``, write what changed, raise what failed."""

    def reconcile(req: Request) -> None:
        client = mgr.get_cluster(req.cluster_name).client
        try:
            cm = client.get(CM, req.name, req.namespace)
        except NotFound:
            return
        result = fin.finalize(cm, req)
        if result.updated:
            with ignore_not_found():  # the last finalizer removed: the object is gone
                client.update(cm)
        if result.error:
            raise result.error

    return reconcile


def test_keys_added_cleanups_run_on_delete_and_a_failing_cleanup_retried_in_every_cluster(
    make_envtest_fleet: Any,
) -> None:
    fleet = make_envtest_fleet(2)
    mgr = mcruntime.Manager(provider=fleet_provider(fleet))

    lock = threading.Lock()
    cleaned: list[tuple[str, str]] = []
    attempts: Counter[tuple[str, str]] = Counter()
    outage = threading.Event()  # while set, the cleanup of "stuck" fails
    outage.set()
    fin = Finalizers()

    @fin.register(KEY)
    def cleanup(obj: dict[str, Any], req: Request) -> None:
        name = obj["metadata"]["name"]
        with lock:
            attempts[req.cluster_name, name] += 1
        if name == "stuck" and outage.is_set():
            raise RuntimeError("the outside system is down")
        with lock:
            cleaned.append((req.cluster_name, name))

    (
        mcruntime.controller_managed_by(mgr)
        .named("finalizers")
        .for_(CM)
        .with_options(rate_limiter=ItemExponentialFailureRateLimiter(base=0.05, max=0.2))
        .complete(_finalizing(mgr, fin))
    )
    with running(mgr):
        wait_for(lambda: set(mgr.engaged_clusters()) == set(fleet.names), what="fleet engaged")
        clients = {name: mgr.get_cluster(name).client for name in fleet.names}
        for client in clients.values():
            client.create(configmap("plain"))
            client.create(configmap("stuck"))
        for name, client in clients.items():
            for cm in ("plain", "stuck"):
                wait_for(
                    lambda c=client, n=cm: _finalizers(c, n) == [KEY],
                    what=f"finalizer added to {name}/{cm}",
                    ignore=NotFound,  # (the cached client may not have seen the create yet)
                )

        # delete: the cleanup runs, the key is removed, the object goes
        for client in clients.values():
            client.delete(CM, "plain", "default")
        for name, client in clients.items():
            wait_for(lambda c=client: _gone(c, "plain"), what=f"{name}/plain deleted")
        with lock:
            assert sorted(cleaned) == [(name, "plain") for name in fleet.names]

        # a cleanup that raises keeps the object and its key, and is retried
        for client in clients.values():
            client.delete(CM, "stuck", "default")
        for name in fleet.names:
            wait_for(
                lambda n=name: attempts[n, "stuck"] >= 3,
                what=f"cleanup of {name}/stuck retried",
            )
        for name, client in clients.items():
            stuck = client.get(CM, "stuck", "default")
            assert stuck["metadata"].get("deletionTimestamp"), name
            assert stuck["metadata"]["finalizers"] == [KEY], name

        # once it succeeds, the object goes, cleaned up once in each cluster
        outage.clear()
        for name, client in clients.items():
            wait_for(lambda c=client: _gone(c, "stuck"), what=f"{name}/stuck deleted")
        with lock:
            assert sorted(c for c in cleaned if c[1] == "stuck") == [
                (name, "stuck") for name in fleet.names
            ]
            assert attempts[fleet.names[0], "plain"] == 1


def test_a_deleted_object_is_cleaned_up_under_a_field_changed_filter(
    make_envtest_fleet: Any,
) -> None:
    """kopf's ``@kopf.on.field`` mapped to ``for_(kind, FieldChanged(path))`` beside a
    finalizer: the deletion changes no such field, and its cleanup runs all the same."""
    fleet = make_envtest_fleet(1)
    mgr = mcruntime.Manager(provider=fleet_provider(fleet))
    cleaned: list[str] = []
    fin = Finalizers()
    fin.register(KEY, lambda obj, req: cleaned.append(obj["metadata"]["name"]))
    (
        mcruntime.controller_managed_by(mgr)
        .named("filtered")
        .for_(CM, FieldChanged("data.size"))
        .complete(_finalizing(mgr, fin))
    )
    with running(mgr):
        name = fleet.names[0]
        wait_for(lambda: mgr.engaged_clusters() == [name], what="cluster engaged")
        client, api = mgr.get_cluster(name).client, mgr.get_api_reader(name)
        client.create(configmap("web", size="1"))
        wait_for(
            lambda: api.get(CM, "web", "default")["metadata"].get("finalizers") == [KEY],
            what="finalizer added",
        )
        client.delete(CM, "web", "default")
        # only the update that starts the deletion brings it to the reconciler
        wait_for(lambda: _gone(api, "web"), timeout=10, what="the object cleaned up and deleted")
        assert cleaned == ["web"]


def test_a_cleanup_that_raises_requeue_after_runs_again_after_its_delay_without_an_error(
    make_envtest_fleet: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """kopf's ``TemporaryError(delay=...)`` in a deletion handler, ported as
    ``raise RequeueAfter(...)`` (from any depth): the cleanup runs again after the delay,
    said at info level, not as an error retried with backoff at once."""
    caplog.set_level(logging.INFO, logger="mcruntime.controller")
    fleet = make_envtest_fleet(1)
    mgr = mcruntime.Manager(provider=fleet_provider(fleet))
    runs: list[float] = []
    fin = Finalizers()

    @fin.register(KEY)
    def empty_the_bucket(obj: dict[str, Any], req: Request) -> None:
        runs.append(time.monotonic())
        if len(runs) < 3:
            raise RequeueAfter(0.3, "the bucket is still emptying")

    mcruntime.controller_managed_by(mgr).named("buckets").for_(CM).complete(_finalizing(mgr, fin))
    with running(mgr):
        name = fleet.names[0]
        wait_for(lambda: mgr.engaged_clusters() == [name], what="cluster engaged")
        client, api = mgr.get_cluster(name).client, mgr.get_api_reader(name)
        client.create(configmap("bucket"))
        wait_for(
            lambda: api.get(CM, "bucket", "default")["metadata"].get("finalizers") == [KEY],
            what="finalizer added",
        )
        client.delete(CM, "bucket", "default")
        wait_for(lambda: _gone(api, "bucket"), timeout=10, what="the bucket emptied, then deleted")
    assert len(runs) == 3
    for gap in (b - a for a, b in zip(runs, runs[1:], strict=False)):
        assert gap >= 0.3, f"the cleanup ran again after {gap:.3f}s, not the 0.3s asked"
    said = [
        (r.levelno, r.getMessage())
        for r in caplog.records
        if "request=default/bucket" in r.getMessage()
    ]
    assert said == [  # once: its repeat is said at debug level
        (
            logging.INFO,
            f"controller=buckets cluster={name} request=default/bucket: requeued in 0.3s: "
            "the bucket is still emptying",
        )
    ]


def test_a_cleanup_runs_once_when_the_next_reconcile_reads_a_cache_behind_the_removal(
    make_envtest_fleet: Any,
) -> None:
    """The reconcile after the one that removed the key reads a cache that has not seen
    that write (here: the manager's path to the server frozen by the cleanup; in life an
    event queued meanwhile, a requeue, a slow watch): the key is still there, on the
    version the cleanup ran on. The cleanup does not run again, and what the registry
    remembers of it goes once the cache shows the removal."""
    server = next(iter(make_envtest_fleet(1)))
    with Proxy(server) as proxy:
        writer = Cluster.from_kubeconfig(server.kubeconfig(), name="writer").uncached_client
        provider = clusters.Provider()
        provider.add("m1", Cluster.from_kubeconfig(proxy.kubeconfig(), name="m1"))
        mgr = mcruntime.Manager(provider=provider)
        cleaned: list[str] = []
        deleting: list[str] = []  # the version each reconcile of the deleted object read
        fin = Finalizers()

        @fin.register(KEY)
        def cleanup(obj: dict[str, Any], req: Request) -> None:
            cleaned.append(obj["metadata"]["resourceVersion"])
            proxy.freeze()  # the cache sees nothing more until thawed

        def reconcile(req: Request) -> Result | None:
            cm = mgr.get_cluster(req.cluster_name).client.get(CM, req.name, req.namespace)
            if cm["metadata"].get("deletionTimestamp"):
                deleting.append(cm["metadata"]["resourceVersion"])
            result = fin.finalize(cm, req)
            if result.updated:
                writer.update(cm)  # (not through the frozen path)
            # reconciled again soon after the removal, as an event queued meanwhile does
            return Result(requeue_after=0.05) if len(deleting) == 1 else None

        (
            mcruntime.controller_managed_by(mgr)
            .named("finalizers")
            .for_(CM)
            .with_options(rate_limiter=ItemExponentialFailureRateLimiter(base=0.05, max=0.2))
            .complete(reconcile)
        )
        with running(mgr):
            wait_for(lambda: mgr.engaged_clusters() == ["m1"], what="cluster engaged")
            held = configmap("web")
            held["metadata"]["finalizers"] = ["example.com/held"]  # the object stays
            writer.create(held)
            wait_for(lambda: _finalizers(writer, "web") == ["example.com/held", KEY], what="key")
            writer.delete(CM, "web", "default")
            wait_for(lambda: len(deleting) >= 2, what="reconciled again on the frozen cache")
            assert deleting[1] == deleting[0]  # the version the cleanup ran on, the key on it
            assert cleaned == [deleting[0]]
            assert _finalizers(writer, "web") == ["example.com/held"]
            proxy.thaw()
            wait_for(lambda: fin._done == {}, what="the removal seen and forgotten")
            assert len(cleaned) == 1
            gone = writer.get(CM, "web", "default")
            gone["metadata"]["finalizers"] = []
            writer.update(gone)
            wait_for(lambda: _gone(writer, "web"), what="the object gone")
        assert len(cleaned) == 1
