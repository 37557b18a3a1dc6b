"""`freeze_gc`: the engaged clusters' objects leave CPython's full collections, and a
cluster that leaves is still freed.

With 1,000 engaged clusters a full collection stops every thread for 100-300 ms,
and one follows a mass join (docs/performance.md, churn at scale). Freezing is
process-wide, so it must never keep a cluster that left alive.
"""

from __future__ import annotations

import gc
import time
import weakref
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest

import mcruntime
from mcruntime.envtest import wait_for
from mcruntime.manager import ManagerOptions
from mcruntime.providers import clusters
from tests.integration.multicluster._mc_helpers import (
    Recorder,
    cluster_of,
    configmap_controller,
    create_cms,
    running,
    threads_for,
)

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(autouse=True)
def _thawed() -> Iterator[None]:
    """Each test starts and leaves with nothing frozen (the permanent generation is process-wide)."""
    gc.unfreeze()
    yield
    gc.unfreeze()


def _engaged(
    make_envtest_server: Any, names: list[str], **options: Any
) -> tuple[clusters.Provider, mcruntime.Manager, Recorder, dict[str, weakref.ref[Any]]]:
    """A manager with a ConfigMap controller over servers ``names`` (one ConfigMap each),
    and weak references to their Cluster objects (the test keeps no strong one)."""
    provider = clusters.Provider()
    mgr = mcruntime.Manager(provider=provider, options=ManagerOptions(**options))
    rec = Recorder()
    configmap_controller(mgr, rec)
    refs = {}
    for name in names:
        server = make_envtest_server(name)
        create_cms(server, [f"{name}-cm"])
        cluster = cluster_of(server, name)
        refs[name] = weakref.ref(cluster)
        provider.add(name, cluster)
    del cluster
    return provider, mgr, rec, refs


def _frozen_then_a_left(
    provider: clusters.Provider, rec: Recorder, refs: dict[str, weakref.ref[Any]]
) -> None:
    """Wait for every cluster's reconcile and the freeze after the joins, then remove ``a``
    and wait for its threads to end."""
    for name in refs:
        wait_for(partial(rec.saw, name, f"default/{name}-cm"), what=f"{name} reconciled")
    wait_for(lambda: gc.get_freeze_count() > 0, what="the heap frozen once the joins settled")
    provider.remove("a")
    wait_for(lambda: not threads_for("a"), timeout=10, what="a's threads gone")


def test_the_engaged_clusters_are_frozen_and_one_that_leaves_is_freed(
    make_envtest_server: Any,
) -> None:
    provider, mgr, rec, refs = _engaged(make_envtest_server, ["a", "b"], freeze_gc=True)
    with running(mgr):
        _frozen_then_a_left(provider, rec, refs)
        # a's objects hold reference cycles: frozen, a full collection could not free them
        wait_for(
            lambda: gc.collect() >= 0 and refs["a"]() is None,
            timeout=10,
            what="the Cluster that left freed by a full collection",
        )
        assert refs["b"]() is not None
        assert "b" in mgr.engaged_clusters()
    assert gc.get_freeze_count() == 0, "a stopped manager leaves nothing frozen"


def test_a_cluster_that_left_is_not_frozen_again_when_others_join(
    make_envtest_server: Any,
) -> None:
    """Joins follow leaves closely (a cluster re-added, moved between replicas): the freeze
    after them must not keep what left, with no full collection of CPython's in between."""
    provider, mgr, rec, refs = _engaged(make_envtest_server, ["a", "b"], freeze_gc=True)
    with running(mgr):
        _frozen_then_a_left(provider, rec, refs)
        assert gc.get_freeze_count() == 0, "a cluster that leaves unfreezes"

        server = make_envtest_server("c")
        create_cms(server, ["c-cm"])
        provider.add("c", cluster_of(server, "c"))
        wait_for(lambda: rec.saw("c", "default/c-cm"), what="c reconciled")
        wait_for(lambda: gc.get_freeze_count() > 0, what="the heap frozen again once c joined")
        # no gc.collect() here: the manager's freeze after the leave collected fully
        assert refs["a"]() is None, "the Cluster that left was frozen again"


def test_a_hung_cluster_delays_the_freeze_by_one_sync_attempt_at_most(
    make_envtest_server: Any,
) -> None:
    """The freeze waits for every joining cluster's first attempt, which
    `engage_sync_timeout` bounds: a cluster whose API server accepts and never answers
    delays it by that much, not for as long as it hangs."""
    hung = make_envtest_server("hung")
    hung.freeze()
    try:
        provider, mgr, rec, _ = _engaged(
            make_envtest_server, ["b"], freeze_gc=True, engage_sync_timeout=1.0
        )
        provider.add("hung", cluster_of(hung, "hung"))  # joins with b
        began = time.monotonic()
        with running(mgr):
            wait_for(lambda: rec.saw("b", "default/b-cm"), what="b reconciled")
            wait_for(lambda: gc.get_freeze_count() > 0, timeout=10, what="the heap frozen")
            waited = time.monotonic() - began
            # once hung's first attempt (1 s) ended, not for as long as it hangs
            assert waited < 5.0, waited
            assert "hung" not in mgr.engaged_clusters()
            provider.remove("hung")
            wait_for(lambda: not threads_for("hung"), timeout=5, what="hung's threads gone")
    finally:
        hung.thaw()


def test_without_the_option_the_manager_leaves_the_collector_alone(
    make_envtest_server: Any,
) -> None:
    _, mgr, rec, _ = _engaged(make_envtest_server, ["a"])
    with running(mgr):
        wait_for(lambda: rec.saw("a", "default/a-cm"), what="a reconciled")
        wait_for(lambda: "a" in mgr.engaged_clusters(), what="a engaged")
        assert gc.get_freeze_count() == 0
