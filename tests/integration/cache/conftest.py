"""Fixtures for cache tests: a real RESTClient to an embedded API server over HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import config

from mcruntime.client import RESTClient, RESTMapper
from tests.integration.cache._cache_helpers import Kube


@pytest.fixture
def rest(envtest_server: Any) -> Iterator[RESTClient]:
    api = config.new_client_from_config_dict(envtest_server.kubeconfig())
    client = RESTClient(api, cluster_name="c1")
    yield client
    client.close()
    api.close()


@pytest.fixture
def mapper(rest: RESTClient) -> RESTMapper:
    return RESTMapper(rest)


@pytest.fixture
def kube(rest: RESTClient) -> Kube:
    return Kube(rest)
