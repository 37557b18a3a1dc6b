"""A controller's ``cache_sync_timeout`` (controller-runtime's ``CacheSyncTimeout``) bounds its
caches' sync on each cluster, shorter or longer than the manager's ``engage_sync_timeout``."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest

import mcruntime
from mcruntime.envtest import wait_for
from mcruntime.providers import clusters
from tests._logs import logged
from tests.integration.multicluster._mc_helpers import (
    Recorder,
    cluster_of,
    configmap_controller,
    create_cms,
    running,
)

pytestmark = pytest.mark.timeout(60)

ENGAGING = "cluster=far manager: engaging every controller failed: "


def _far_cluster_manager(
    srv: Any, engage_sync_timeout: float, cache_sync_timeout: float
) -> tuple[mcruntime.Manager, clusters.Provider, Recorder]:
    provider = clusters.Provider()
    mgr = mcruntime.Manager(
        provider=provider,
        options=mcruntime.ManagerOptions(engage_sync_timeout=engage_sync_timeout),
    )
    rec = Recorder()
    configmap_controller(mgr, rec, cache_sync_timeout=cache_sync_timeout)
    return mgr, provider, rec


def test_a_shorter_cache_sync_timeout_gives_up_on_a_hung_cluster_sooner(
    make_envtest_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    srv = make_envtest_server("far")
    mgr, provider, _ = _far_cluster_manager(srv, engage_sync_timeout=30, cache_sync_timeout=1)
    assert mgr.controllers[0].cache_sync_timeout == 1
    srv.freeze()  # a hung API server: its lists never answer
    try:
        with caplog.at_level(logging.WARNING, logger="mcruntime.manager"), running(mgr):
            added = time.monotonic()
            provider.add("far", cluster_of(srv, "far"))
            wait_for(
                lambda: logged(caplog, logging.WARNING, starting=ENGAGING),
                timeout=15,
                what="the controller's sync given up",
            )
            took = time.monotonic() - added
            assert took < 15, f"given up after {took:.1f}s, not about 1s"
    finally:
        srv.thaw()
    (line,) = logged(caplog, logging.WARNING, starting=ENGAGING)
    assert "controller configmaps: informer far/v1/ConfigMap not synced within its " in line
    assert "cache_sync_timeout (1s)" in line


def test_a_longer_cache_sync_timeout_lets_a_slow_cluster_sync_in_one_attempt(
    make_envtest_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # every answer of "far" takes 0.5 s: its discovery and list take seconds, longer than
    # engage_sync_timeout; the controller's own cache_sync_timeout lets its first attempt
    # wait for them, with no failed attempt said
    srv = make_envtest_server("far", latency=0.5)
    create_cms(srv, ["cm"])
    mgr, provider, rec = _far_cluster_manager(srv, engage_sync_timeout=0.5, cache_sync_timeout=30)
    with caplog.at_level(logging.WARNING, logger="mcruntime.manager"), running(mgr):
        provider.add("far", cluster_of(srv, "far"))
        wait_for(lambda: rec.saw("far", "default/cm"), timeout=30, what="the configmap reconciled")
    assert logged(caplog, logging.WARNING, starting=ENGAGING) == []
