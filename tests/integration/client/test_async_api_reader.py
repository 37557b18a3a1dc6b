"""``aclient.api_reader``: the API reader's reads as coroutines, never blocking the event loop."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest

from mcruntime.client import AsyncAPIReader
from mcruntime.cluster import Cluster
from mcruntime.envtest import APIServer
from mcruntime.errors import DeadlineExceeded

pytestmark = pytest.mark.timeout(60)


def test_the_async_clients_api_reader_awaits_its_reads_off_the_loop(
    make_envtest_server: Callable[..., APIServer],
) -> None:
    server = make_envtest_server("async-api-reader")
    cluster = Cluster.from_kubeconfig(server.kubeconfig())
    cluster.uncached_client.create(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "default"}}
    )
    reader = cluster.aclient.api_reader
    assert isinstance(reader, AsyncAPIReader)

    async def main() -> float:
        got = await reader.get("v1/ConfigMap", "a", "default")
        assert got["metadata"]["name"] == "a"
        assert [o["metadata"]["name"] for o in await reader.list("v1/ConfigMap", "default")] == [
            "a"
        ]
        ticks: list[float] = []

        async def ticker() -> None:
            while True:
                ticks.append(time.monotonic())
                await asyncio.sleep(0.02)

        task = asyncio.create_task(ticker())
        await asyncio.sleep(0.05)
        server.freeze()
        try:
            with pytest.raises(DeadlineExceeded):
                await reader.get("v1/ConfigMap", "a", "default", timeout=1)
        finally:
            server.thaw()
        await asyncio.sleep(0.05)
        task.cancel()
        # the sync reader handed through held the loop for the whole call (1 s)
        return max(b - a for a, b in zip(ticks, ticks[1:], strict=False))

    try:
        assert asyncio.run(main()) < 0.5
        with pytest.raises(AttributeError, match=r"aclient\.client\.api_reader\.pages"):
            reader.pages  # noqa: B018
    finally:
        cluster.stop()
