"""A call whose connection pool is closed as it takes it (the pools are closed when a client
certificate rotates) is sent on a new pool, not failed."""

from __future__ import annotations

from typing import Any

import pytest

from mcruntime.cluster import Cluster

pytestmark = pytest.mark.timeout(30)


def test_a_call_whose_pool_was_closed_as_it_took_it_is_sent_on_a_new_one(
    make_envtest_server: Any,
) -> None:
    server = make_envtest_server()
    cluster = Cluster.from_kubeconfig(server.kubeconfig(), name="m1")
    try:
        manager = cluster.rest._pool
        take = manager.connection_from_host
        closed: list[Any] = []

        def taken_as_closed(*args: Any, **kwargs: Any) -> Any:
            pool = take(*args, **kwargs)
            if not closed:  # the pools closed between the call taking its pool and using it
                closed.append(pool)
                manager.clear()
                pool.close()
            return pool

        manager.connection_from_host = taken_as_closed  # type: ignore[method-assign]
        namespace = cluster.uncached_client.get("v1/Namespace", "default")
        assert namespace["metadata"]["name"] == "default"
        assert closed, "the pool was not closed as the call took it"
        assert cluster.rest.request_counts() == {("GET", "200"): 1}  # sent once
    finally:
        cluster.stop()
