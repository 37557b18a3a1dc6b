"""The embedded provider's servers end cleanly: ``remove_cluster`` stops a server only once what
still needs it after the disengage is over (the removal of the webhook configurations installed
in it), and a stop during the fleet's set-up waits for one set-up, not all."""

from __future__ import annotations

import logging
import socket
import threading
import time
import urllib.parse
from collections.abc import Iterator

import pytest

import mcruntime
from mcruntime.envtest import wait_for
from mcruntime.examples import webhooks as example
from mcruntime.providers import embedded
from mcruntime.webhook import WebhookServer, WebhookServerOptions
from tests._logs import logged
from tests.integration.multicluster._mc_helpers import running, threads_for

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def fleet() -> Iterator[tuple[mcruntime.Manager, embedded.Provider, WebhookServer]]:
    """A running manager with the example's webhooks installed in an embedded fleet of one."""
    provider = embedded.Provider(embedded.Options(clusters=1), prepare=example.install_crd)
    server = WebhookServer(WebhookServerOptions(host="127.0.0.1", port=0, install=True))
    mgr = mcruntime.Manager(
        provider=provider, options=mcruntime.ManagerOptions(webhook_server=server)
    )
    example.build(mgr)
    with running(mgr):
        yield mgr, provider, server


def test_a_removed_cluster_loses_its_webhook_configurations_before_its_server_stops(
    fleet: tuple[mcruntime.Manager, embedded.Provider, WebhookServer],
    caplog: pytest.LogCaptureFixture,
) -> None:
    _, provider, server = fleet
    provider.add_cluster("extra")
    wait_for(lambda: "extra" in server.installed_clusters(), timeout=20)
    caplog.set_level(logging.INFO, logger="mcruntime.webhook")
    provider.remove_cluster("extra")
    # said before remove_cluster returned, with the server still up: nothing failed
    assert logged(caplog, logging.INFO, starting="cluster=extra webhook configuration removed")
    assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert threads_for("extra") == []


def test_a_removal_that_outlasts_the_wait_is_named_and_the_server_stops_anyway(
    fleet: tuple[mcruntime.Manager, embedded.Provider, WebhookServer],
    caplog: pytest.LogCaptureFixture,
) -> None:
    _, provider, server = fleet
    api = provider.add_cluster("extra")
    wait_for(lambda: "extra" in server.installed_clusters(), timeout=20)
    api.freeze()  # hung: the removal waits for its deadline (install_timeout, 10 s)
    started = time.monotonic()
    provider.remove_cluster("extra", wait=0.5)
    assert 0.5 <= time.monotonic() - started < 5
    assert not api.running
    assert logged(
        caplog,
        logging.WARNING,
        starting="provider=embedded cluster=extra removed, and after 0.5s still needed by: "
        "the removal of its webhook configurations",
    )
    wait_for(lambda: threads_for("extra") == [], timeout=10)  # the stopped server cut its calls


def test_a_stop_during_the_fleets_set_up_waits_for_one_set_up_and_leaves_no_server() -> None:
    preparing, go = threading.Event(), threading.Event()
    prepared: list[str] = []

    hosts: list[str] = []

    def prepare(cluster: mcruntime.Cluster) -> None:
        prepared.append(cluster.name)
        hosts.append(cluster.config.host)
        preparing.set()
        go.wait(10)

    engaged: list[str] = []

    class Aware:
        def engage(self, name: str, cluster: mcruntime.Cluster, lifetime: threading.Event) -> None:
            engaged.append(name)

    provider = embedded.Provider(embedded.Options(clusters=3), prepare=prepare)
    stop = threading.Event()
    runner = threading.Thread(target=provider.start, args=(Aware(), stop))
    runner.start()
    assert preparing.wait(10)
    stop.set()
    go.set()
    runner.join(10)
    assert not runner.is_alive()
    assert prepared == ["cluster-0"]  # the other two were not set up
    assert engaged == [] and provider.names() == []
    assert provider.wait_for_initial_clusters(0)
    address = urllib.parse.urlsplit(hosts[0])
    with pytest.raises(ConnectionRefusedError):  # the servers were stopped
        socket.create_connection((address.hostname, address.port), timeout=5).close()
