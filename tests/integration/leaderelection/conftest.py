"""Fixtures of the leader-election tests."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from mcruntime.cluster import Cluster
from mcruntime.envtest import APIServer


@pytest.fixture
def server(make_envtest_server: Callable[..., APIServer]) -> APIServer:
    """An API server holding ConfigMap ``default/cm`` for the replicas' controllers to reconcile.

    (test_elector.py needs an empty one and defines its own.)
    """
    srv = make_envtest_server("leader-election")
    c = Cluster.from_kubeconfig(srv.kubeconfig())
    c.client.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "cm", "namespace": "default"},
        }
    )
    c.stop()
    return srv
