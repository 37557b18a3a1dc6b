"""A raw ``AdmissionHandler`` (a Pod mutator) registered with rules is installed and called like any other."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from kubernetes import client, config

import mcruntime
from mcruntime.envtest import wait_for
from mcruntime.webhook import (
    AdmissionRequest,
    AdmissionResponse,
    WebhookServer,
    WebhookServerOptions,
    patched,
)

pytestmark = pytest.mark.timeout(60)

POD_RULES = [
    {
        "apiGroups": [""],
        "apiVersions": ["v1"],
        "resources": ["pods"],
        "operations": ["CREATE"],
        "scope": "Namespaced",
    }
]


class SidecarInjector:
    """Adds a sidecar container to every new Pod."""

    def handle(self, request: AdmissionRequest) -> AdmissionResponse:
        assert request.obj is not None
        pod = {**request.obj, "spec": {**request.obj["spec"]}}
        pod["spec"]["containers"] = [
            *pod["spec"]["containers"],
            {"name": "sidecar", "image": "busybox"},
        ]
        return patched(request.obj, pod)


@pytest.mark.parametrize("registered_on", ["mgr.get_webhook_server()", "the server given"])
def test_a_pod_mutator_is_installed_and_injects_into_new_pods(
    make_envtest_server: Any, registered_on: str
) -> None:
    srv = make_envtest_server("local")
    server = WebhookServer(WebhookServerOptions(host="127.0.0.1", port=0, install=True))
    mgr = mcruntime.Manager(
        srv.kubeconfig(), options=mcruntime.ManagerOptions(webhook_server=server)
    )
    # the server given in the options is the manager's, served whichever way hooks
    # are registered on it
    on = mgr.get_webhook_server() if registered_on.startswith("mgr") else server
    on.register("/mutate-pods", SidecarInjector(), mutating=True, rules=POD_RULES)
    core = client.CoreV1Api(config.new_client_from_config_dict(srv.kubeconfig()))
    with mgr:
        wait_for(
            lambda: server.installed_clusters() == [""], timeout=15, what="the webhook installed"
        )
        pod = core.create_namespaced_pod(
            "default",
            {
                "metadata": {"name": "p"},
                "spec": {"containers": [{"name": "app", "image": "nginx"}]},
            },
        )
        assert [c.name for c in pod.spec.containers] == ["app", "sidecar"]
    adm = client.AdmissionregistrationV1Api(config.new_client_from_config_dict(srv.kubeconfig()))
    assert adm.list_mutating_webhook_configuration().items == []


POD = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "app", "image": "nginx"}]}}


def _slow_injector(
    srv: Any, release: threading.Event, seconds: float, **hook: Any
) -> tuple[WebhookServer, mcruntime.Manager]:
    """A manager whose webhook server (``request_timeout`` 0.5 s) installs in ``srv`` a
    sidecar injector that answers once ``release`` is set or ``seconds`` have passed."""
    server = WebhookServer(
        WebhookServerOptions(host="127.0.0.1", port=0, install=True, request_timeout=0.5)
    )
    mgr = mcruntime.Manager(
        srv.kubeconfig(), options=mcruntime.ManagerOptions(webhook_server=server)
    )

    class Slow:
        def handle(self, request: AdmissionRequest) -> AdmissionResponse:
            release.wait(seconds)
            return SidecarInjector().handle(request)

    mgr.get_webhook_server().register(
        "/mutate-pods", Slow(), mutating=True, rules=POD_RULES, **hook
    )
    return server, mgr


@pytest.mark.parametrize("policy", ["Ignore", "Fail"])
def test_a_handler_slower_than_the_hook_s_timeout_is_left_to_the_failure_policy(
    make_envtest_server: Any, policy: str
) -> None:
    # the webhook server gives up on a slow handler (at the 1 s the API server says it
    # waits) with an HTTP error, not a refusal: Ignore lets the Pod in (unmutated), Fail
    # refuses it, as when the API server's own timeoutSeconds ends the call
    srv = make_envtest_server("local")
    release = threading.Event()
    server, mgr = _slow_injector(srv, release, 10, failure_policy=policy, timeout_seconds=1)
    core = client.CoreV1Api(config.new_client_from_config_dict(srv.kubeconfig()))
    try:
        with mgr:
            wait_for(
                lambda: server.installed_clusters() == [""],
                timeout=15,
                what="the webhook installed",
            )
            if policy == "Ignore":
                created = core.create_namespaced_pod("default", POD)
                assert [c.name for c in created.spec.containers] == ["app"]
            else:
                with pytest.raises(client.ApiException) as err:
                    core.create_namespaced_pod("default", POD)
                assert err.value.status == 500
                assert "failed calling webhook" in str(err.value.body)
    finally:
        release.set()


def test_a_handler_has_the_time_the_hook_s_timeout_seconds_give_past_request_timeout(
    make_envtest_server: Any,
) -> None:
    # the API server waits the hook's timeoutSeconds (and says so in the URL, ?timeout=4s):
    # a handler slower than the server's own request_timeout but within them is waited for
    srv = make_envtest_server("local")
    # slower than request_timeout, within timeoutSeconds
    server, mgr = _slow_injector(srv, threading.Event(), 1.5, timeout_seconds=4)
    core = client.CoreV1Api(config.new_client_from_config_dict(srv.kubeconfig()))
    with mgr:
        wait_for(lambda: server.installed_clusters() == [""], timeout=15, what="installed")
        created = core.create_namespaced_pod("default", POD)
        assert [c.name for c in created.spec.containers] == ["app", "sidecar"]
