"""``with_converter`` on a single cluster: the manager points the CRD at its webhook and restores it at stop."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client, config

import mcruntime
from mcruntime.envtest import wait_for
from mcruntime.webhook import WebhookServer, WebhookServerOptions

pytestmark = pytest.mark.timeout(60)

GROUP = "convert.mcruntime.io"
OPEN = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


class V1:
    """The v1 spoke: ``spec.replicas`` is ``spec.scale.replicas`` in the hub (v2)."""

    def to_hub(self, obj: dict[str, Any]) -> dict[str, Any]:
        obj["spec"] = {"scale": {"replicas": obj.get("spec", {}).get("replicas", 1)}}
        return obj

    def from_hub(self, obj: dict[str, Any]) -> dict[str, Any]:
        obj["spec"] = {"replicas": obj.get("spec", {}).get("scale", {}).get("replicas", 1)}
        return obj


def test_the_crd_converts_through_the_managers_webhook_while_it_runs(
    make_envtest_server: Any,
) -> None:
    srv = make_envtest_server("local")
    api = config.new_client_from_config_dict(srv.kubeconfig())
    ext = client.ApiextensionsV1Api(api)
    ext.create_custom_resource_definition(
        {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": f"apps.{GROUP}"},
            "spec": {
                "group": GROUP,
                "scope": "Namespaced",
                "names": {"plural": "apps", "singular": "app", "kind": "App"},
                "versions": [
                    {
                        "name": v,
                        "served": True,
                        "storage": v == "v2",
                        "schema": {"openAPIV3Schema": OPEN},
                    }
                    for v in ("v1", "v2")
                ],
            },
        }
    )
    server = WebhookServer(WebhookServerOptions(host="127.0.0.1", port=0, install=True))
    mgr = mcruntime.Manager(
        srv.kubeconfig(), options=mcruntime.ManagerOptions(webhook_server=server)
    )
    mcruntime.webhook_managed_by(mgr).for_(f"{GROUP}/v2/App").with_converter(
        "v2", {"v1": V1()}
    ).complete()
    custom = client.CustomObjectsApi(api)
    with mgr:
        wait_for(
            lambda: server.installed_clusters() == [""], timeout=15, what="conversion installed"
        )
        conv = ext.read_custom_resource_definition(f"apps.{GROUP}").spec.conversion
        assert conv.strategy == "Webhook"
        assert conv.webhook.client_config.url == server.url_for("/convert-convert-mcruntime-io-app")
        custom.create_namespaced_custom_object(
            GROUP,
            "v1",
            "default",
            "apps",
            {
                "apiVersion": f"{GROUP}/v1",
                "kind": "App",
                "metadata": {"name": "a"},
                "spec": {"replicas": 3},
            },
        )
        hub = custom.get_namespaced_custom_object(GROUP, "v2", "default", "apps", "a")
        assert hub["spec"] == {"scale": {"replicas": 3}}
        assert custom.get_namespaced_custom_object(GROUP, "v1", "default", "apps", "a")["spec"] == {
            "replicas": 3
        }
    assert ext.read_custom_resource_definition(f"apps.{GROUP}").spec.conversion.strategy == "None"
