"""``debug_bind_address``: ``/debug/reconciles`` names each running reconcile and where it is,
``/debug/threads`` every thread's stack; off unless asked for."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest

import mcruntime
from mcruntime.cluster import Cluster
from mcruntime.envtest import wait_for
from mcruntime.manager import ManagerOptions
from mcruntime.providers.clusters import Provider
from tests.integration.manager._http import get
from tests.integration.multicluster._mc_helpers import configmap

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def provider(make_envtest_fleet: Any) -> Iterator[Provider]:
    fleet = make_envtest_fleet(1)
    provider = Provider()
    provider.add("east", Cluster.from_kubeconfig(fleet["cluster-0"].kubeconfig(), name="east"))
    yield provider


def waits_in_the_outside_world(release: threading.Event) -> None:
    release.wait(30)


async def awaits_the_outside_world(release: asyncio.Event) -> None:
    await release.wait()


@pytest.mark.parametrize("style", ["def", "async def"])
def test_a_stuck_reconcile_is_named_with_where_it_waits(provider: Provider, style: str) -> None:
    mgr = mcruntime.Manager(
        provider=provider, options=ManagerOptions(debug_bind_address="127.0.0.1:0")
    )
    release = threading.Event()
    loop_release: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []

    def reconcile(req: mcruntime.Request) -> None:
        if req.name == "stuck":
            waits_in_the_outside_world(release)

    async def reconcile_async(req: mcruntime.Request) -> None:
        if req.name == "stuck":
            event = asyncio.Event()
            loop_release.append((asyncio.get_running_loop(), event))
            await awaits_the_outside_world(event)

    mcruntime.controller_managed_by(mgr).named("cms").for_("v1/ConfigMap").complete(
        reconcile if style == "def" else reconcile_async
    )
    with mgr:
        wait_for(lambda: mgr.engaged_clusters() == ["east"])
        mgr.get_cluster("east").client.create(configmap("stuck"))
        assert mgr.debug_address is not None

        waiting = "waits_in_the_outside_world" if style == "def" else "awaits_the_outside_world"

        def page() -> str:
            status, body = get(mgr.debug_address, "/debug/reconciles")
            assert status == 200
            # (the first look may come before the reconcile reached the wait)
            return body if f"in {waiting}" in body else ""

        body = wait_for(page, what="the stuck reconcile waiting on /debug/reconciles")
        assert "controller cms: 1 running" in body
        assert "cluster=east request=default/stuck running " in body
        assert "on mcruntime/controller/cms/worker-" in body
        assert "release" in body, body  # the source line it waits on
        assert "_call_reconciler" not in body  # the reconciler's frames, not the controller's

        status, threads = get(mgr.debug_address, "/debug/threads")
        assert status == 200
        assert "mcruntime/controller/cms/worker-0 (daemon" in threads or (
            "mcruntime/controller/cms/worker-0 (thread" in threads
        ), threads[:2000]
        assert get(mgr.debug_address, "/debug")[1].startswith("/debug/reconciles")
        assert get(mgr.debug_address, "/debug/heap")[0] == 404

        release.set()
        for loop, event in loop_release:
            loop.call_soon_threadsafe(event.set)
        wait_for(
            lambda: "request=default/stuck" not in get(mgr.debug_address, "/debug/reconciles")[1]
        )


def test_the_debug_pages_are_off_unless_asked_for_and_never_share_a_server(
    provider: Provider,
) -> None:
    mgr = mcruntime.Manager(
        provider=provider, options=ManagerOptions(health_probe_bind_address="127.0.0.1:0")
    )
    with mgr:
        assert mgr.debug_address is None
        assert get(mgr.health_probe_address, "/debug/threads")[0] == 404
    with pytest.raises(ValueError, match="debug_bind_address '127.0.0.1:8082' is also the "):
        mcruntime.Manager(
            provider=Provider(),
            options=ManagerOptions(
                metrics_bind_address="127.0.0.1:8082", debug_bind_address="127.0.0.1:8082"
            ),
        )
