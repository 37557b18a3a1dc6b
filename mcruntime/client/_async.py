"""``AsyncClient``: the `Client`'s calls as coroutines, for `async def` reconcilers.

A blocking call inside a coroutine stalls the event loop and with it every
other reconcile on that loop: twelve writes at 0.5 s latency then take six
seconds whatever `max_concurrent_reconciles` says. Each method here runs the
same call of the wrapped `Client` on a worker thread (the running loop's
default executor) and awaits it, so the loop keeps serving the other
reconciles. The call's context goes with it: an enclosing
[`deadline`][mcruntime.client.deadline] (e.g. the reconcile's) bounds it, and
a cluster leaving cuts it with `ClusterLeft`, exactly as for the sync client.

Cache reads need no thread: they are in-memory and cheap, so `async def`
code may keep calling `cluster.client.get()`/`list()` for cached kinds;
`AsyncClient.get`/`list` are for API reads (or a first read that waits for a
new informer's initial list).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Mapping
from typing import Any, Literal, TypeVar

from mcruntime._local import display_name
from mcruntime.client._client import Client, PatchType
from mcruntime.client._kinds import KindLike
from mcruntime.client._subresource import SubResourceClient

__all__ = ["AsyncClient", "AsyncSubResourceClient"]

T = TypeVar("T")


class AsyncClient:
    """Awaitable twins of every [`Client`][mcruntime.client.Client] method (same arguments, same errors)."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.cluster_name = client.cluster_name

    def __repr__(self) -> str:
        return f"AsyncClient(cluster={display_name(self.cluster_name)!r})"

    @staticmethod
    async def _run(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        # asyncio.to_thread copies the context: deadlines and the current request go along
        return await asyncio.to_thread(functools.partial(fn, *args, **kwargs))

    async def get(
        self,
        kind: KindLike,
        name: str,
        namespace: str | None = None,
        *,
        timeout: float | None = None,
        metadata_only: bool = False,
    ) -> Any:
        """`Client.get` as a coroutine."""
        return await self._run(
            self.client.get, kind, name, namespace, timeout=timeout, metadata_only=metadata_only
        )

    async def list(
        self,
        kind: KindLike,
        namespace: str | None = None,
        *,
        labels: str | Mapping[str, str] | None = None,
        fields: str | Mapping[str, str] | None = None,
        index: tuple[str, str] | None = None,
        limit: int | None = None,
        timeout: float | None = None,
        metadata_only: bool = False,
    ) -> list[Any]:
        """`Client.list` as a coroutine."""
        return await self._run(
            self.client.list,
            kind,
            namespace,
            labels=labels,
            fields=fields,
            index=index,
            limit=limit,
            timeout=timeout,
            metadata_only=metadata_only,
        )

    def with_field_manager(self, field_manager: str) -> AsyncClient:
        """`Client.with_field_manager`: this client, writing as ``field_manager``."""
        return AsyncClient(self.client.with_field_manager(field_manager))

    def subresource(self, subresource: str) -> AsyncSubResourceClient:
        """`Client.subresource`, its calls as coroutines."""
        return AsyncSubResourceClient(self.client.subresource(subresource))

    async def create(
        self,
        obj: Any,
        *,
        dry_run: bool = False,
        field_manager: str | None = None,
        timeout: float | None = None,
    ) -> Any:
        """`Client.create` as a coroutine."""
        return await self._run(
            self.client.create, obj, dry_run=dry_run, field_manager=field_manager, timeout=timeout
        )

    async def update(
        self,
        obj: Any,
        *,
        dry_run: bool = False,
        field_manager: str | None = None,
        timeout: float | None = None,
    ) -> Any:
        """`Client.update` as a coroutine."""
        return await self._run(
            self.client.update, obj, dry_run=dry_run, field_manager=field_manager, timeout=timeout
        )

    async def update_status(
        self,
        obj: Any,
        *,
        dry_run: bool = False,
        field_manager: str | None = None,
        timeout: float | None = None,
    ) -> Any:
        """`Client.update_status` as a coroutine."""
        return await self._run(
            self.client.update_status,
            obj,
            dry_run=dry_run,
            field_manager=field_manager,
            timeout=timeout,
        )

    async def delete(
        self,
        kind: KindLike | Any,
        name: str | None = None,
        namespace: str | None = None,
        *,
        propagation: Literal["Foreground", "Background", "Orphan"] | str | None = None,
        preconditions: Mapping[str, Any] | None = None,
        grace_period_seconds: int | None = None,
        dry_run: bool = False,
        timeout: float | None = None,
    ) -> None:
        """`Client.delete` as a coroutine."""
        await self._run(
            self.client.delete,
            kind,
            name,
            namespace,
            propagation=propagation,
            preconditions=preconditions,
            grace_period_seconds=grace_period_seconds,
            dry_run=dry_run,
            timeout=timeout,
        )

    async def delete_all_of(
        self,
        kind: KindLike,
        namespace: str | None = None,
        *,
        labels: str | Mapping[str, str] | None = None,
        fields: str | Mapping[str, str] | None = None,
        propagation: Literal["Foreground", "Background", "Orphan"] | str | None = None,
        grace_period_seconds: int | None = None,
        dry_run: bool = False,
        timeout: float | None = None,
    ) -> None:
        """`Client.delete_all_of` as a coroutine."""
        await self._run(
            self.client.delete_all_of,
            kind,
            namespace,
            labels=labels,
            fields=fields,
            propagation=propagation,
            grace_period_seconds=grace_period_seconds,
            dry_run=dry_run,
            timeout=timeout,
        )

    async def patch(
        self,
        kind: KindLike,
        name: str,
        patch: Any,
        namespace: str | None = None,
        *,
        type: PatchType = "merge",
        dry_run: bool = False,
        field_manager: str | None = None,
        timeout: float | None = None,
        metadata_only: bool = False,
    ) -> Any:
        """`Client.patch` as a coroutine."""
        return await self._run(
            self.client.patch,
            kind,
            name,
            patch,
            namespace,
            type=type,
            dry_run=dry_run,
            field_manager=field_manager,
            timeout=timeout,
            metadata_only=metadata_only,
        )

    async def patch_status(
        self,
        kind: KindLike,
        name: str,
        patch: Any,
        namespace: str | None = None,
        *,
        type: PatchType = "merge",
        dry_run: bool = False,
        field_manager: str | None = None,
        timeout: float | None = None,
    ) -> Any:
        """`Client.patch_status` as a coroutine."""
        return await self._run(
            self.client.patch_status,
            kind,
            name,
            patch,
            namespace,
            type=type,
            dry_run=dry_run,
            field_manager=field_manager,
            timeout=timeout,
        )

    async def apply(
        self,
        obj: Any,
        *,
        field_manager: str | None = None,
        force: bool = False,
        dry_run: bool = False,
        timeout: float | None = None,
    ) -> Any:
        """`Client.apply` (server-side apply) as a coroutine."""
        return await self._run(
            self.client.apply,
            obj,
            field_manager=field_manager,
            force=force,
            dry_run=dry_run,
            timeout=timeout,
        )

    async def apply_status(
        self,
        obj: Any,
        *,
        field_manager: str | None = None,
        force: bool = False,
        dry_run: bool = False,
        timeout: float | None = None,
    ) -> Any:
        """`Client.apply_status` as a coroutine."""
        return await self._run(
            self.client.apply_status,
            obj,
            field_manager=field_manager,
            force=force,
            dry_run=dry_run,
            timeout=timeout,
        )

    def __getattr__(self, name: str) -> Any:
        """Any other `Client` method, as a coroutine function."""
        attr = getattr(self.client, name)
        if not callable(attr) or name.startswith("_"):
            return attr

        async def call(*args: Any, **kwargs: Any) -> Any:
            return await self._run(attr, *args, **kwargs)

        return call


class AsyncSubResourceClient:
    """Awaitable twins of [`SubResourceClient`][mcruntime.client.SubResourceClient]'s calls."""

    def __init__(self, sub: SubResourceClient) -> None:
        self.sub = sub

    def __repr__(self) -> str:
        return f"Async{self.sub!r}"

    async def get(
        self,
        kind: KindLike,
        name: str,
        namespace: str | None = None,
        *,
        query: Mapping[str, str | int | bool] | None = None,
        timeout: float | None = None,
    ) -> Any:
        """`SubResourceClient.get` as a coroutine."""
        return await AsyncClient._run(
            self.sub.get, kind, name, namespace, query=query, timeout=timeout
        )

    async def create(
        self,
        kind: KindLike,
        name: str,
        body: Any,
        namespace: str | None = None,
        *,
        dry_run: bool = False,
        field_manager: str | None = None,
        timeout: float | None = None,
    ) -> Any:
        """`SubResourceClient.create` as a coroutine."""
        return await AsyncClient._run(
            self.sub.create,
            kind,
            name,
            body,
            namespace,
            dry_run=dry_run,
            field_manager=field_manager,
            timeout=timeout,
        )

    async def update(
        self,
        kind: KindLike,
        name: str,
        body: Any,
        namespace: str | None = None,
        *,
        dry_run: bool = False,
        field_manager: str | None = None,
        timeout: float | None = None,
    ) -> Any:
        """`SubResourceClient.update` as a coroutine."""
        return await AsyncClient._run(
            self.sub.update,
            kind,
            name,
            body,
            namespace,
            dry_run=dry_run,
            field_manager=field_manager,
            timeout=timeout,
        )

    async def patch(
        self,
        kind: KindLike,
        name: str,
        patch: Any,
        namespace: str | None = None,
        *,
        type: PatchType = "merge",
        dry_run: bool = False,
        field_manager: str | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """`SubResourceClient.patch` as a coroutine."""
        return await AsyncClient._run(
            self.sub.patch,
            kind,
            name,
            patch,
            namespace,
            type=type,
            dry_run=dry_run,
            field_manager=field_manager,
            timeout=timeout,
        )
