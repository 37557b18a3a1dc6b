"""The webhook server's stop and a cluster's leaving cut the installs that hang in it."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest

from mcruntime._threads import mcruntime_threads
from mcruntime.cluster import Cluster
from mcruntime.envtest import APIServer, Proxy, wait_for
from mcruntime.webhook import Converter, WebhookServer, WebhookServerOptions
from tests._silent import SilentServer
from tests.integration.webhook.test_raw_handler import POD_RULES, SidecarInjector

pytestmark = pytest.mark.timeout(30)

INSTALL_TIMEOUT = 3.0


@pytest.fixture
def hung() -> Iterator[list[SilentServer]]:
    servers = [SilentServer() for _ in range(3)]
    yield servers
    for s in servers:
        s.close()


def _installs() -> list[str]:
    return sorted(t.name for t in mcruntime_threads() if t.name.endswith("/install"))


def _same(obj: dict[str, Any]) -> dict[str, Any]:
    return obj


def _serving(hook: str) -> WebhookServer:
    """A started server installing into every cluster: a Pod mutator, or a converter (whose
    install first looks its kind up in the cluster's discovery)."""
    server = WebhookServer(
        WebhookServerOptions(
            host="127.0.0.1", port=0, install=True, install_timeout=INSTALL_TIMEOUT
        )
    )
    if hook == "admission":
        server.register("/mutate-pods", SidecarInjector(), mutating=True, rules=POD_RULES)
    else:
        converter = Converter("convert.mcruntime.io", "App", "v2", {"v1": (_same, _same)})
        server.register("/convert-apps", converter=converter)
    server.start()
    return server


def _installed(srv: APIServer) -> tuple[APIServer, WebhookServer, Cluster]:
    """A started server that installed its Pod mutator into ``srv``'s cluster (named as it)."""
    server = _serving("admission")
    cluster = Cluster.from_kubeconfig(srv.kubeconfig(), name=srv.name)
    server.engage(cluster.name, cluster)
    wait_for(lambda: server.installed_clusters() == [srv.name], what="installed")
    return srv, server, cluster


@pytest.mark.parametrize("hook", ["admission", "conversion"])
def test_stop_cuts_the_installs_that_hang_in_several_clusters(
    hung: list[SilentServer], caplog: pytest.LogCaptureFixture, hook: str
) -> None:
    caplog.set_level(logging.WARNING, logger="mcruntime.webhook")
    server = _serving(hook)
    clusters = [
        Cluster.from_kubeconfig(s.kubeconfig(), name=f"hung-{i}") for i, s in enumerate(hung)
    ]
    try:
        for c in clusters:
            server.engage(c.name, c)
        wait_for(
            lambda: all(s.accepted for s in hung), what="every install waiting for its cluster"
        )
        began = time.monotonic()
        server.stop(timeout=2.0)
        took = time.monotonic() - began
        assert took < 1.5, f"stop took {took:.1f}s: it waited for the hung installs"
        assert _installs() == []
        for c in clusters:
            server.disengage(c.name, c)  # nothing was installed: nothing to remove
        assert (
            "installing the webhook configuration failed" not in caplog.text
        )  # a cut is no failure
    finally:
        for c in clusters:
            c.stop()


@pytest.mark.parametrize("hook", ["admission", "conversion"])
def test_a_leaving_cluster_cuts_its_hanging_install(hung: list[SilentServer], hook: str) -> None:
    server = _serving(hook)
    cluster = Cluster.from_kubeconfig(hung[0].kubeconfig(), name="hung")
    try:
        server.engage(cluster.name, cluster)
        wait_for(lambda: hung[0].accepted, what="the install waiting for its cluster")
        began = time.monotonic()
        server.disengage(cluster.name, cluster)
        took = time.monotonic() - began
        assert took < 1.0, f"disengage took {took:.1f}s: it waited for the hung install"
        assert _installs() == []
    finally:
        server.stop()
        cluster.stop()


def test_a_configuration_left_behind_by_an_unreachable_cluster_is_not_said_removed(
    make_envtest_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # the removal fails: one warning names it, and no line says it was removed
    caplog.set_level(logging.INFO, logger="mcruntime.webhook")
    srv, server, cluster = _installed(make_envtest_server("leaving"))
    try:
        srv.stop()  # connections refused from now on
        server.disengage(cluster.name, cluster)  # the removal runs on a thread of its own
        wait_for(lambda: "not removed" in caplog.text, what="the removal's failure")
        server.stop()  # (waits for the removal)
        lines = [r.getMessage() for r in caplog.records if "cluster=leaving" in r.getMessage()]
        (warning,) = [m for m in lines if "not removed" in m]
        assert warning.startswith(
            "cluster=leaving webhook configuration mutatingwebhookconfigurations not removed: "
        )
        assert "cluster=leaving webhook configuration removed" not in lines
    finally:
        server.stop()
        cluster.stop()


def test_stop_cuts_the_removal_that_waits_for_a_hung_cluster(
    make_envtest_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # the cluster left while hung: its removal waits on a thread of its own, which the
    # server's stop waits for within its timeout, then cuts; it says what it left behind
    caplog.set_level(logging.INFO, logger="mcruntime.webhook")
    srv, server, cluster = _installed(make_envtest_server("hanging"))
    try:
        srv.freeze()
        began = time.monotonic()
        server.disengage(cluster.name, cluster)
        assert time.monotonic() - began < 0.5, "disengage waited for the removal"
        assert [t.name for t in mcruntime_threads() if t.name.endswith("/uninstall")] == [
            "mcruntime/webhook/hanging/uninstall"
        ]
        began = time.monotonic()
        server.stop(timeout=1.0)
        took = time.monotonic() - began
        assert 0.9 < took < 2.5, f"stop took {took:.1f}s, not its 1s and a cut"
        assert [t.name for t in mcruntime_threads() if "/hanging/" in t.name] == []
        lines = [r.getMessage() for r in caplog.records if "cluster=hanging" in r.getMessage()]
        assert [m for m in lines if "not removed" in m]
        assert "cluster=hanging webhook configuration removed" not in lines
    finally:
        srv.thaw()
        server.stop()
        cluster.stop()


def test_a_cluster_engaged_again_is_installed_after_the_last_engagement_removed_its_own(
    make_envtest_server: Any,
) -> None:
    # the removal of the engagement that ended runs on its own thread: the next engagement
    # of the same cluster installs only after it, or the removal would delete what it wrote
    srv = make_envtest_server("again")
    server = _serving("admission")
    with Proxy(srv) as path:
        first = Cluster.from_kubeconfig(path.kubeconfig(), name="again")  # a path that hangs
        second = Cluster.from_kubeconfig(srv.kubeconfig(), name="again")  # another that works
        reader = Cluster.from_kubeconfig(srv.kubeconfig(), name="reader")
        try:
            server.engage(first.name, first)
            wait_for(lambda: server.installed_clusters() == ["again"], what="installed")
            path.freeze()  # the removal waits
            server.disengage(first.name, first)
            server.engage(second.name, second)
            path.thaw()
            wait_for(lambda: server.installed_clusters() == ["again"], what="installed again")
            wait_for(lambda: not [t for t in mcruntime_threads() if t.name.endswith("/uninstall")])
            stored = reader.uncached_client.get(
                "admissionregistration.k8s.io/v1/MutatingWebhookConfiguration",
                "mcruntime-webhooks",
            )
            assert stored["webhooks"]
        finally:
            path.thaw()
            server.stop()
            for c in (first, second, reader):
                c.stop()


def test_stop_cuts_every_removal_of_a_cluster_that_left_twice_while_hung(
    make_envtest_server: Any,
) -> None:
    # engaged again and left again while its first removal still waits for the hung cluster:
    # the second removal waits for the first; the server's stop cuts both, not only the last
    srv, server, first = _installed(make_envtest_server("flapping"))
    second = Cluster.from_kubeconfig(srv.kubeconfig(), name="flapping")
    try:
        srv.freeze()
        server.disengage(first.name, first)
        server.engage(second.name, second)
        server.disengage(second.name, second)
        removals = [t for t in mcruntime_threads() if t.name.endswith("/flapping/uninstall")]
        assert len(removals) == 2
        began = time.monotonic()
        server.stop(timeout=0.5)
        took = time.monotonic() - began
        assert took < INSTALL_TIMEOUT, f"stop took {took:.1f}s"
        assert [t.name for t in removals if t.is_alive()] == []
    finally:
        srv.thaw()
        server.stop()
        first.stop()
        second.stop()
