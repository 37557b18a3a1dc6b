"""A raw ``AdmissionHandler`` (a Pod mutator) registered with rules is installed and called like any other."""

from __future__ import annotations

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


def test_a_pod_mutator_is_installed_and_injects_into_new_pods(make_envtest_server: Any) -> None:
    srv = make_envtest_server("local")
    server = WebhookServer(WebhookServerOptions(host="127.0.0.1", port=0, install=True))
    mgr = mcruntime.Manager(
        srv.kubeconfig(), options=mcruntime.ManagerOptions(webhook_server=server)
    )
    mgr.get_webhook_server().register(
        "/mutate-pods", SidecarInjector(), mutating=True, rules=POD_RULES
    )
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
