"""The ``namespace`` provider's host cluster down or frozen: what the log and the manager say."""

from __future__ import annotations

import logging
import socket
from typing import Any

import pytest
from kubernetes.client import Configuration

import mcruntime
from mcruntime.cluster import Cluster
from mcruntime.envtest import wait_for
from mcruntime.providers import namespace
from tests.integration.multicluster._mc_helpers import (
    Recorder,
    cluster_of,
    configmap_controller,
    running,
)

pytestmark = pytest.mark.timeout(60)

LATE = "provider=namespace has not reported its initial clusters yet"


def _lines(caplog: pytest.LogCaptureFixture, part: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if part in r.getMessage()]


def test_a_frozen_host_is_named_once_and_by_the_manager_s_warning(
    envtest_server: Any, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # start waited 30 s without a line naming the host, then said only that "provider has
    # not reported its initial clusters yet", naming neither the provider nor why
    monkeypatch.setattr(namespace, "NO_ANSWER_AFTER", 0.5, raising=False)
    caplog.set_level(logging.INFO)
    admin = cluster_of(envtest_server, "admin")
    try:
        admin.uncached_client.create(
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": "team-a", "labels": {"tenant": "yes"}},
            }
        )
        envtest_server.freeze()
        provider = namespace.Provider(
            cluster_of(envtest_server, "tenants-host"), label_selector="tenant=yes"
        )
        address = provider.host.rest.address
        mgr = mcruntime.Manager(
            provider=provider, options=mcruntime.ManagerOptions(engage_sync_timeout=2)
        )
        configmap_controller(mgr, Recorder())
        with running(mgr):
            failed = _lines(caplog, "listing the namespaces failed")
            assert failed == [
                f"cluster=tenants-host provider=namespace: listing the namespaces failed: "
                f"no answer from {address} in 0.5s; still waiting; further failures are "
                "logged at debug level until it recovers"
            ]
            [late] = _lines(caplog, LATE)
            assert (
                f"(its last error: host cluster tenants-host ({address}) has not answered "
                "the list of namespaces in" in late
            )
            envtest_server.thaw()
            wait_for(lambda: mgr.engaged_clusters() == ["team-a"], what="engaged once it answers")
            wait_for(
                lambda: _lines(caplog, "listing the namespaces works again"),
                what="the end of the streak logged",
            )
            assert provider.discovery_error is None
            assert len(_lines(caplog, "listing the namespaces failed")) == 1
    finally:
        envtest_server.thaw()
        admin.stop()


def test_an_unreachable_host_is_named_without_its_credentials(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    with socket.socket() as closed:  # bound, never listening: connections are refused
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        config = Configuration()
        config.host = f"https://someone:s3cret-pw@127.0.0.1:{port}"
        config.api_key = {"authorization": "Bearer tok3n-value"}
        host = Cluster.from_config(config, name="tenants-host")
        mgr = mcruntime.Manager(
            provider=namespace.Provider(host),
            options=mcruntime.ManagerOptions(engage_sync_timeout=1),
        )
        configmap_controller(mgr, Recorder())
        with running(mgr):
            [late] = _lines(caplog, LATE)
            assert "(its last error: host cluster tenants-host: [cluster tenants-host] " in late
            assert f"127.0.0.1:{port}" in late and "refused" in late
            [failed] = _lines(caplog, "failed")
            assert failed.startswith("cluster=tenants-host informer kind=v1/Namespace")
    text = caplog.text
    assert "s3cret-pw" not in text and "tok3n-value" not in text and "someone" not in text
