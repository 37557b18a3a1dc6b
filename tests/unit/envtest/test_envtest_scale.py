"""The /scale subresource (autoscaling/v1 Scale) of Deployments and of CRDs that declare it."""

from __future__ import annotations

import orjson
import pytest
from kubernetes import client

pytestmark = pytest.mark.timeout(30)

POD = {
    "metadata": {"labels": {"app": "web"}},
    "spec": {"containers": [{"name": "web", "image": "nginx"}]},
}
DEPLOYMENT = {
    "metadata": {"name": "web"},
    "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}, "template": POD},
}
SCALED_CRD = {
    "metadata": {"name": "pools.example.com"},
    "spec": {
        "group": "example.com",
        "names": {"plural": "pools", "singular": "pool", "kind": "Pool"},
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {
                    "status": {},
                    "scale": {
                        "specReplicasPath": ".spec.size",
                        "statusReplicasPath": ".status.size",
                        "labelSelectorPath": ".status.selector",
                    },
                },
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                    }
                },
            }
        ],
    },
}


def test_deployment_scale_reads_and_writes_replicas(api: client.ApiClient) -> None:
    apps = client.AppsV1Api(api)
    dep = apps.create_namespaced_deployment("default", DEPLOYMENT)
    scale = apps.read_namespaced_deployment_scale("web", "default")
    assert (scale.kind, scale.api_version) == ("Scale", "autoscaling/v1")
    assert scale.spec.replicas == 2 and scale.status.replicas == 0
    assert scale.status.selector == "app=web"
    assert scale.metadata.uid == dep.metadata.uid
    apps.patch_namespaced_deployment_scale("web", "default", {"spec": {"replicas": 5}})
    after = apps.read_namespaced_deployment("web", "default")
    assert after.spec.replicas == 5 and after.metadata.generation == 2
    scale = apps.read_namespaced_deployment_scale("web", "default")
    scale.spec.replicas = 1
    assert apps.replace_namespaced_deployment_scale("web", "default", scale).spec.replicas == 1


def test_scale_with_a_stale_resource_version_is_409(api: client.ApiClient) -> None:
    apps = client.AppsV1Api(api)
    apps.create_namespaced_deployment("default", DEPLOYMENT)
    stale = apps.read_namespaced_deployment_scale("web", "default")
    apps.patch_namespaced_deployment_scale("web", "default", {"spec": {"replicas": 3}})
    stale.spec.replicas = 4
    with pytest.raises(client.ApiException) as e:
        apps.replace_namespaced_deployment_scale("web", "default", stale)
    assert e.value.status == 409


def test_negative_replicas_are_422(api: client.ApiClient) -> None:
    apps = client.AppsV1Api(api)
    apps.create_namespaced_deployment("default", DEPLOYMENT)
    with pytest.raises(client.ApiException) as e:
        apps.patch_namespaced_deployment_scale("web", "default", {"spec": {"replicas": -1}})
    assert e.value.status == 422
    assert orjson.loads(e.value.body)["details"]["causes"][0]["field"] == "spec.replicas"


def test_discovery_lists_scale_subresources(api: client.ApiClient) -> None:
    resources = client.AppsV1Api(api).get_api_resources().resources
    scale = {r.name: r for r in resources if r.name.endswith("/scale")}
    assert set(scale) == {"deployments/scale", "replicasets/scale", "statefulsets/scale"}
    entry = scale["deployments/scale"]
    assert (entry.group, entry.version, entry.kind) == ("autoscaling", "v1", "Scale")


def test_crd_scale_uses_the_declared_paths(api: client.ApiClient) -> None:
    client.ApiextensionsV1Api(api).create_custom_resource_definition(SCALED_CRD)
    custom = client.CustomObjectsApi(api)
    args = ("example.com", "v1", "default", "pools")
    custom.create_namespaced_custom_object(
        *args,
        {
            "apiVersion": "example.com/v1",
            "kind": "Pool",
            "metadata": {"name": "p"},
            "spec": {"size": 2},
        },
    )
    custom.patch_namespaced_custom_object_status(
        *args, "p", {"status": {"size": 1, "selector": "pool=p"}}
    )
    scale = custom.get_namespaced_custom_object_scale(*args, "p")
    assert scale["spec"] == {"replicas": 2}
    assert scale["status"] == {"replicas": 1, "selector": "pool=p"}
    custom.patch_namespaced_custom_object_scale(*args, "p", {"spec": {"replicas": 7}})
    assert custom.get_namespaced_custom_object(*args, "p")["spec"]["size"] == 7


def test_read_only_users_may_read_but_not_write_scale(server, api: client.ApiClient) -> None:
    from kubernetes import config

    client.AppsV1Api(api).create_namespaced_deployment("default", DEPLOYMENT)
    with config.new_client_from_config_dict(server.kubeconfig(read_only=True)) as ro_api:
        ro = client.AppsV1Api(ro_api)
        assert ro.read_namespaced_deployment_scale("web", "default").spec.replicas == 2
        with pytest.raises(client.ApiException) as e:
            ro.patch_namespaced_deployment_scale("web", "default", {"spec": {"replicas": 3}})
    assert e.value.status == 403
    assert 'cannot patch resource "deployments/scale"' in orjson.loads(e.value.body)["message"]


def test_an_unknown_patch_type_on_scale_is_415_naming_the_accepted_types(
    server, api: client.ApiClient
) -> None:
    import http.client

    client.AppsV1Api(api).create_namespaced_deployment("default", DEPLOYMENT)
    conn = http.client.HTTPSConnection(
        server.host, server.port, timeout=5, context=server.client_ssl_context()
    )
    conn.request(
        "PATCH",
        "/apis/apps/v1/namespaces/default/deployments/web/scale",
        b'{"spec":{"replicas":3}}',
        {"Authorization": f"Bearer {server.token}", "Content-Type": "text/plain"},
    )
    resp = conn.getresponse()
    body = orjson.loads(resp.read())
    assert (resp.status, body["reason"]) == (415, "UnsupportedMediaType")
    assert body["message"] == (
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json-patch+json, application/merge-patch+json, "
        "application/strategic-merge-patch+json, application/apply-patch+yaml"
    )
