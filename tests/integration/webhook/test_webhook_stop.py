"""The webhook server's stop and a cluster's leaving cut the installs that hang in it."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest

from mcruntime._threads import mcruntime_threads
from mcruntime.cluster import Cluster
from mcruntime.envtest import wait_for
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
    srv = make_envtest_server("leaving")
    server = _serving("admission")
    cluster = Cluster.from_kubeconfig(srv.kubeconfig(), name="leaving")
    caplog.set_level(logging.INFO, logger="mcruntime.webhook")
    try:
        server.engage(cluster.name, cluster)
        wait_for(lambda: server.installed_clusters() == ["leaving"], what="installed")
        srv.stop()  # connections refused from now on
        server.disengage(cluster.name, cluster)
        lines = [r.getMessage() for r in caplog.records if "cluster=leaving" in r.getMessage()]
        (warning,) = [m for m in lines if "not removed" in m]
        assert warning.startswith(
            "cluster=leaving webhook configuration mutatingwebhookconfigurations not removed: "
        )
        assert "cluster=leaving webhook configuration removed" not in lines
    finally:
        server.stop()
        cluster.stop()
