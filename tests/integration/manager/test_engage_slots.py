"""`max_concurrent_engagements`: joining clusters take turns, a hung one gives its turn back.

A bound on how many clusters start and sync at once keeps the engaged clusters'
events flowing when hundreds join together (docs/performance.md, churn at
scale). It must never let one hung cluster stop the others from joining, and
a cluster that leaves while it waits for its turn leaves nothing behind.
"""

from __future__ import annotations

import time
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


def _manager(provider: clusters.Provider, **options: Any) -> mcruntime.Manager:
    return mcruntime.Manager(provider=provider, options=ManagerOptions(**options))


def _one_at_a_time(
    engage_sync_timeout: float,
) -> tuple[clusters.Provider, mcruntime.Manager, Recorder]:
    """A manager engaging one cluster at a time, with a ConfigMap controller recording reconciles."""
    provider = clusters.Provider()
    mgr = _manager(provider, max_concurrent_engagements=1, engage_sync_timeout=engage_sync_timeout)
    rec = Recorder()
    configmap_controller(mgr, rec)
    return provider, mgr, rec


def test_a_hung_cluster_holds_its_turn_only_until_its_first_sync_attempt_ends(
    make_envtest_server: Any,
) -> None:
    hung, healthy = make_envtest_server("hung"), make_envtest_server("healthy")
    create_cms(healthy, ["h1"])
    hung.freeze()
    provider, mgr, rec = _one_at_a_time(engage_sync_timeout=1.0)
    with running(mgr):
        provider.add("hung", cluster_of(hung, "hung"))
        wait_for(lambda: threads_for("hung"), what="the hung cluster's engagement")
        began = time.monotonic()
        provider.add("healthy", cluster_of(healthy, "healthy"))
        wait_for(lambda: rec.saw("healthy", "default/h1"), timeout=10, what="healthy reconciled")
        waited = time.monotonic() - began
        # it waited for the hung cluster's first attempt (1 s), not for the hung cluster
        assert 0.8 <= waited < 5.0, waited
        assert "healthy" in mgr.engaged_clusters() and "hung" not in mgr.engaged_clusters()
        provider.remove("hung")
        hung.thaw()


def test_a_cluster_that_leaves_while_waiting_for_its_turn_leaves_nothing(
    make_envtest_server: Any,
) -> None:
    hung, waiting, later = (make_envtest_server(n) for n in ("hung", "waiting", "later"))
    create_cms(later, ["l1"])
    hung.freeze()
    provider, mgr, rec = _one_at_a_time(engage_sync_timeout=30.0)
    with running(mgr):
        provider.add("hung", cluster_of(hung, "hung"))
        provider.add("waiting", cluster_of(waiting, "waiting"))
        wait_for(lambda: threads_for("waiting"), what="the waiting cluster's engagement thread")
        provider.remove("waiting")
        wait_for(lambda: not threads_for("waiting"), timeout=5, what="waiting's threads gone")
        # the hung cluster leaving gives its turn to the next cluster at once
        provider.add("later", cluster_of(later, "later"))
        began = time.monotonic()
        provider.remove("hung")
        wait_for(lambda: rec.saw("later", "default/l1"), timeout=10, what="later reconciled")
        assert time.monotonic() - began < 5.0
        assert not threads_for("hung") and not threads_for("waiting")
        hung.thaw()


def test_the_bound_must_be_at_least_one() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        _manager(clusters.Provider(), max_concurrent_engagements=0)
