"""Fixtures of the conformance suite: typed API objects for ``kube_backend`` and session CRDs."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client
from kubernetes.client import ApiClient

from mcruntime.envtest.pytest_plugin import KubeBackend

from ._support import GADGETS, WIDGET_GROUP, WIDGETS, crd_manifest, create_crd, delete_crd, unique


@pytest.fixture
def api(kube_api_client: ApiClient) -> ApiClient:
    return kube_api_client


@pytest.fixture
def core(kube_api_client: ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(kube_api_client)


@pytest.fixture
def apps(kube_api_client: ApiClient) -> client.AppsV1Api:
    return client.AppsV1Api(kube_api_client)


@pytest.fixture
def batch(kube_api_client: ApiClient) -> client.BatchV1Api:
    return client.BatchV1Api(kube_api_client)


@pytest.fixture
def coordination(kube_api_client: ApiClient) -> client.CoordinationV1Api:
    return client.CoordinationV1Api(kube_api_client)


@pytest.fixture
def apiext(kube_api_client: ApiClient) -> client.ApiextensionsV1Api:
    return client.ApiextensionsV1Api(kube_api_client)


@pytest.fixture
def custom(kube_api_client: ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(kube_api_client)


@pytest.fixture
def ns(kube_namespace: str) -> str:
    return kube_namespace


@pytest.fixture
def account(core: client.CoreV1Api, ns: str) -> str:
    name = unique("sa")
    core.create_namespaced_service_account(ns, {"metadata": {"name": name}})
    return name


@pytest.fixture(scope="session")
def widget_crds(kube_backend: KubeBackend) -> Iterator[dict[str, str]]:
    """Two CRDs for the whole session: namespaced ``widgets`` (status subresource)
    and cluster-scoped ``gadgets`` (no subresource) in group ``conformance.mcruntime.io``."""
    with kube_backend.api_client() as api:
        created = [
            create_crd(api, crd_manifest(WIDGET_GROUP, WIDGETS, "Widget", short_names=["wdg"])),
            create_crd(
                api, crd_manifest(WIDGET_GROUP, GADGETS, "Gadget", scope="Cluster", status=False)
            ),
        ]
        try:
            yield {"group": WIDGET_GROUP, "version": "v1", "widgets": WIDGETS, "gadgets": GADGETS}
        finally:
            for crd in created:
                delete_crd(api, crd["metadata"]["name"])


@pytest.fixture
def fresh_group(api: ApiClient) -> Iterator[str]:
    """A unique API group; CRDs created in it are deleted after the test."""
    group = f"{unique('g')}.conformance.mcruntime.io"
    yield group
    ext = client.ApiextensionsV1Api(api)
    for crd in ext.list_custom_resource_definition().items:
        if crd.spec.group == group:
            delete_crd(api, crd.metadata.name)
