"""k3s through testcontainers as a test backend (``MCRUNTIME_TEST_BACKEND=k3s``)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from kubernetes import client

from mcruntime.envtest.pytest_plugin import KubeBackend, start_k3s_backend

pytestmark = [pytest.mark.docker, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def k3s() -> Iterator[KubeBackend]:
    backend = start_k3s_backend()
    try:
        yield backend
    finally:
        backend.close()


def test_k3s_backend_round_trips_a_configmap(k3s: KubeBackend) -> None:
    name = f"k3s-{uuid.uuid4().hex[:8]}"
    with k3s.api_client() as api:
        core = client.CoreV1Api(api)
        created = core.create_namespaced_config_map(
            "default", {"metadata": {"name": name}, "data": {"k": "v"}}
        )
        try:
            assert core.read_namespaced_config_map(name, "default").data == {"k": "v"}
            assert created.metadata.uid
        finally:
            core.delete_namespaced_config_map(name, "default")
