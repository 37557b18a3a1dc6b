"""One embedded API server per module, reached through the real client over HTTP."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from mcruntime.client import APIReader, Client, RESTClient, RESTMapper
from mcruntime.cluster import Cluster
from mcruntime.envtest import wait_for


def crd(group: str, kind: str, plural: str) -> dict[str, Any]:
    """A namespaced CRD serving ``group``/v1 ``kind`` with a status subresource."""
    return {
        **WIDGET_CRD,
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            **WIDGET_CRD["spec"],
            "group": group,
            "names": {"plural": plural, "singular": kind.lower(), "kind": kind},
        },
    }


WIDGET_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": "example.com",
        "scope": "Namespaced",
        "names": {
            "plural": "widgets",
            "singular": "widget",
            "kind": "Widget",
            "listKind": "WidgetList",
        },
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
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


@pytest.fixture(scope="session")
def wait_until() -> Callable[..., Any]:
    """``wait_until(cond, timeout=10)``: poll until ``cond()`` is truthy, with a deadline."""
    return wait_for


@pytest.fixture(scope="session")
def make_crd() -> Callable[[str, str, str], dict[str, Any]]:
    """``make_crd(group, kind, plural)``: a CRD manifest (a dict)."""
    return crd


@pytest.fixture(scope="module")
def server() -> Iterator[Any]:
    from mcruntime.envtest import APIServer

    srv = APIServer("c1").start()
    yield srv
    srv.close()


@pytest.fixture(scope="module")
def cluster(server: Any) -> Iterator[Cluster]:
    c = Cluster.from_kubeconfig(server.kubeconfig(), name="c1")
    yield c
    c.stop()


@pytest.fixture(scope="module")
def rest(cluster: Cluster) -> RESTClient:
    return cluster.rest


@pytest.fixture(scope="module")
def mapper(cluster: Cluster) -> RESTMapper:
    return cluster.rest_mapper


@pytest.fixture(scope="module")
def client(rest: RESTClient, mapper: RESTMapper) -> Client:
    """A Client reading straight from the API (no cache)."""
    return Client(rest, mapper, cluster_name="c1")


@pytest.fixture(scope="module")
def api_reader(rest: RESTClient, mapper: RESTMapper) -> APIReader:
    return APIReader(rest, mapper)


@pytest.fixture(scope="module")
def widgets(client: Client, mapper: RESTMapper) -> str:
    """Installs the Widget CRD once per module; returns its kind string."""
    client.create(WIDGET_CRD)
    wait_for(lambda: _served(mapper, "example.com/v1/Widget"))
    return "example.com/v1/Widget"


def _served(mapper: RESTMapper, kind: str) -> bool:
    from mcruntime.errors import NoKindMatch

    try:
        mapper.mapping(kind)
    except NoKindMatch:
        return False
    return True


@pytest.fixture
def ns(client: Client) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return name
