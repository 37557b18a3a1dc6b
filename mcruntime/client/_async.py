"""``AsyncClient``: the `Client`'s calls as coroutines, for `async def` reconcilers.

A blocking call inside a coroutine stalls the event loop and with it every
other reconcile on that loop: twelve writes at 0.5 s latency then take six
seconds whatever `max_concurrent_reconciles` says. Each method here runs the
same call of the wrapped `Client` on a worker thread and awaits it, so the
loop keeps serving the other reconciles. A `Cluster`'s ``aclient`` runs its
calls on threads of that cluster's own (at most `ASYNC_CALL_THREADS`, made as
needed, ended when the cluster stops): calls stuck on one cluster never keep
another's waiting. An `AsyncClient` made by hand uses the running loop's
default executor. The call's context goes with it: an enclosing
[`deadline`][mcruntime.client.deadline] (e.g. the reconcile's) bounds it, and
a cluster leaving cuts it with `ClusterLeft`, exactly as for the sync client.
When the coroutine awaiting a call is cancelled (a reconcile's timeout, an
``asyncio.timeout``, a ``TaskGroup`` sibling's failure), the call is cut too:
the connection it uses is shut down and its thread freed at once, not at the
call's deadline.

Cache reads need no thread: they are in-memory and cheap, so `async def`
code may keep calling `cluster.client.get()`/`list()` for cached kinds;
`AsyncClient.get`/`list` are for API reads (or a first read that waits for a
new informer's initial list).
"""

from __future__ import annotations

import asyncio
import builtins
import contextvars
import functools
import threading
import weakref
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal, ParamSpec, TypeVar, overload

from mcruntime._forked import in_a_forked_child
from mcruntime._local import display_name
from mcruntime.client._client import APIReader, Client, PatchType
from mcruntime.client._kinds import GroupVersionKind, KindLike
from mcruntime.client._metadata import MetadataOnly
from mcruntime.client._rest import CallCut, call_cut
from mcruntime.client._subresource import SubResourceClient

__all__ = [
    "ASYNC_CALL_THREADS",
    "AsyncAPIReader",
    "AsyncClient",
    "AsyncSubResourceClient",
    "CallThreads",
]

T = TypeVar("T")
_P = ParamSpec("_P")

#: the most threads one cluster's `AsyncClient` calls run on at once (made as needed)
ASYNC_CALL_THREADS = 32


#: every `CallThreads` of the process, for `_forget_the_parents_threads`
_all_call_threads: weakref.WeakSet[CallThreads] = weakref.WeakSet()


def _forget_the_parents_threads() -> None:
    """In a child just forked: a pool's threads are the parent's, not in this process, and
    the pool took work for them (idle, it starts no more): every call would wait for ever.
    Each `CallThreads` makes a pool of its own at its next call."""
    for threads in list(_all_call_threads):
        threads._lock = threading.Lock()  # (a parent thread may have held it at the fork)
        threads._pool = None


in_a_forked_child(_forget_the_parents_threads)


class CallThreads:
    """The threads of one cluster's `AsyncClient` calls: at most ``size``, made as needed,
    ended by `close` (the cluster's stop). Its own, so calls stuck on a cluster that stopped
    answering never keep another cluster's calls waiting for a thread."""

    def __init__(self, cluster_name: str, size: int = ASYNC_CALL_THREADS) -> None:
        self.cluster_name = cluster_name
        self.size = size
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._closed = False
        _all_call_threads.add(self)

    def executor(self) -> ThreadPoolExecutor | None:
        """The pool (made at the first call); None once closed (the loop's default then:
        the call meets the stopped cluster's `ClusterLeft`)."""
        pool = self._pool
        if pool is not None or self._closed:
            return pool
        with self._lock:
            if self._pool is None and not self._closed:
                self._pool = ThreadPoolExecutor(
                    self.size,
                    thread_name_prefix=f"mcruntime/client/{display_name(self.cluster_name)}/async",
                )
            return self._pool

    def close(self) -> None:
        """End the threads once their calls end (the cluster's stop cut them); idempotent."""
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)


async def _call(threads: CallThreads | None, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run ``fn`` on a thread with this context (deadlines and the current request go
    along); cut the call if the coroutine awaiting it is cancelled."""
    cut = CallCut()
    ctx = contextvars.copy_context()
    ctx.run(call_cut.set, cut)
    loop = asyncio.get_running_loop()
    executor = threads.executor() if threads is not None else None
    future = loop.run_in_executor(executor, functools.partial(ctx.run, fn, *args, **kwargs))
    try:
        return await future
    except asyncio.CancelledError:
        cut.cancel()  # its thread is freed now, not at its deadline
        raise


class AsyncClient:
    """Awaitable twins of every [`Client`][mcruntime.client.Client] method (same arguments, same errors)."""

    def __init__(self, client: Client, *, threads: CallThreads | None = None) -> None:
        self.client = client
        self.cluster_name = client.cluster_name
        #: the threads its calls run on (None: the running loop's default executor)
        self.threads = threads

    def __repr__(self) -> str:
        return f"AsyncClient(cluster={display_name(self.cluster_name)!r})"

    async def _run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await _call(self.threads, fn, *args, **kwargs)

    @overload
    async def get(
        self,
        kind: KindLike,
        name: str,
        namespace: str | None = None,
        *,
        timeout: float | None = None,
        metadata_only: Literal[True],
    ) -> MetadataOnly: ...
    @overload
    async def get(
        self,
        kind: type[T],
        name: str,
        namespace: str | None = None,
        *,
        timeout: float | None = None,
        metadata_only: Literal[False] = False,
    ) -> T: ...
    @overload
    async def get(
        self,
        kind: str | GroupVersionKind,
        name: str,
        namespace: str | None = None,
        *,
        timeout: float | None = None,
        metadata_only: bool = False,
    ) -> dict[str, Any]: ...
    @overload
    async def get(
        self,
        kind: type[T],
        name: str,
        namespace: str | None = None,
        *,
        timeout: float | None = None,
        metadata_only: bool = False,
    ) -> T | MetadataOnly: ...
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

    @overload
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
        metadata_only: Literal[True],
    ) -> builtins.list[MetadataOnly]: ...
    @overload
    async def list(
        self,
        kind: type[T],
        namespace: str | None = None,
        *,
        labels: str | Mapping[str, str] | None = None,
        fields: str | Mapping[str, str] | None = None,
        index: tuple[str, str] | None = None,
        limit: int | None = None,
        timeout: float | None = None,
        metadata_only: Literal[False] = False,
    ) -> builtins.list[T]: ...
    @overload
    async def list(
        self,
        kind: str | GroupVersionKind,
        namespace: str | None = None,
        *,
        labels: str | Mapping[str, str] | None = None,
        fields: str | Mapping[str, str] | None = None,
        index: tuple[str, str] | None = None,
        limit: int | None = None,
        timeout: float | None = None,
        metadata_only: bool = False,
    ) -> builtins.list[dict[str, Any]]: ...
    @overload
    async def list(
        self,
        kind: type[T],
        namespace: str | None = None,
        *,
        labels: str | Mapping[str, str] | None = None,
        fields: str | Mapping[str, str] | None = None,
        index: tuple[str, str] | None = None,
        limit: int | None = None,
        timeout: float | None = None,
        metadata_only: bool = False,
    ) -> builtins.list[T | MetadataOnly]: ...
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
    ) -> builtins.list[Any]:
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

    async def run_sync(self, fn: Callable[_P, T], /, *args: _P.args, **kwargs: _P.kwargs) -> T:
        """Await ``fn(*args, **kwargs)``, a blocking function that calls the API through this
        cluster's sync clients (a `controllerutil` helper given ``aclient.client``), run as
        this client's own calls are: on the cluster's call threads (not the event loop's few,
        shared by every cluster), with this context's deadline, its calls cut at once if the
        coroutine awaiting it is cancelled (``asyncio.to_thread`` leaves them running until
        their deadline).

            await cluster.aclient.run_sync(create_or_update, cluster.client, obj, mutate)
        """
        return await self._run(fn, *args, **kwargs)

    @property
    def api_reader(self) -> AsyncAPIReader:
        """The wrapped client's [`api_reader`][mcruntime.client.APIReader], its reads as
        coroutines (the synchronous one, handed through, blocked the event loop)."""
        return AsyncAPIReader(self.client.api_reader, threads=self.threads)

    def with_field_manager(self, field_manager: str) -> AsyncClient:
        """`Client.with_field_manager`: this client, writing as ``field_manager``."""
        return AsyncClient(self.client.with_field_manager(field_manager), threads=self.threads)

    def subresource(self, subresource: str) -> AsyncSubResourceClient:
        """`Client.subresource`, its calls as coroutines."""
        return AsyncSubResourceClient(self.client.subresource(subresource), threads=self.threads)

    @overload
    async def create(
        self,
        obj: dict[str, Any],
        *,
        dry_run: bool = False,
        field_manager: str | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]: ...
    @overload
    async def create(
        self,
        obj: T,
        *,
        dry_run: bool = False,
        field_manager: str | None = None,
        timeout: float | None = None,
    ) -> T: ...
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

    @overload
    async def update(
        self,
        obj: dict[str, Any],
        *,
        dry_run: bool = False,
        field_manager: str | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]: ...
    @overload
    async def update(
        self,
        obj: T,
        *,
        dry_run: bool = False,
        field_manager: str | None = None,
        timeout: float | None = None,
    ) -> T: ...
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

    @overload
    async def update_status(
        self,
        obj: dict[str, Any],
        *,
        dry_run: bool = False,
        field_manager: str | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]: ...
    @overload
    async def update_status(
        self,
        obj: T,
        *,
        dry_run: bool = False,
        field_manager: str | None = None,
        timeout: float | None = None,
    ) -> T: ...
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

    @overload
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
        metadata_only: Literal[True],
    ) -> MetadataOnly: ...
    @overload
    async def patch(
        self,
        kind: type[T],
        name: str,
        patch: Any,
        namespace: str | None = None,
        *,
        type: PatchType = "merge",
        dry_run: bool = False,
        field_manager: str | None = None,
        timeout: float | None = None,
        metadata_only: Literal[False] = False,
    ) -> T: ...
    @overload
    async def patch(
        self,
        kind: str | GroupVersionKind,
        name: str,
        patch: Any,
        namespace: str | None = None,
        *,
        type: PatchType = "merge",
        dry_run: bool = False,
        field_manager: str | None = None,
        timeout: float | None = None,
        metadata_only: bool = False,
    ) -> dict[str, Any]: ...
    @overload
    async def patch(
        self,
        kind: type[T],
        name: str,
        patch: Any,
        namespace: str | None = None,
        *,
        type: PatchType = "merge",
        dry_run: bool = False,
        field_manager: str | None = None,
        timeout: float | None = None,
        metadata_only: bool = False,
    ) -> T | MetadataOnly: ...
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

    @overload
    async def patch_status(
        self,
        kind: type[T],
        name: str,
        patch: Any,
        namespace: str | None = None,
        *,
        type: PatchType = "merge",
        dry_run: bool = False,
        field_manager: str | None = None,
        timeout: float | None = None,
    ) -> T: ...
    @overload
    async def patch_status(
        self,
        kind: str | GroupVersionKind,
        name: str,
        patch: Any,
        namespace: str | None = None,
        *,
        type: PatchType = "merge",
        dry_run: bool = False,
        field_manager: str | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]: ...
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

    @overload
    async def apply(
        self,
        obj: dict[str, Any],
        *,
        field_manager: str | None = None,
        force: bool = False,
        dry_run: bool = False,
        timeout: float | None = None,
    ) -> dict[str, Any]: ...
    @overload
    async def apply(
        self,
        obj: T,
        *,
        field_manager: str | None = None,
        force: bool = False,
        dry_run: bool = False,
        timeout: float | None = None,
    ) -> T: ...
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

    @overload
    async def apply_status(
        self,
        obj: dict[str, Any],
        *,
        field_manager: str | None = None,
        force: bool = False,
        dry_run: bool = False,
        timeout: float | None = None,
    ) -> dict[str, Any]: ...
    @overload
    async def apply_status(
        self,
        obj: T,
        *,
        field_manager: str | None = None,
        force: bool = False,
        dry_run: bool = False,
        timeout: float | None = None,
    ) -> T: ...
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


class AsyncAPIReader:
    """An [`APIReader`][mcruntime.client.APIReader]'s reads as coroutines (``aclient.api_reader``):
    each runs on the `AsyncClient`'s threads, as its other calls do."""

    def __init__(self, reader: APIReader, *, threads: CallThreads | None = None) -> None:
        self.reader = reader
        self.threads = threads

    def __repr__(self) -> str:
        return f"AsyncAPIReader(cluster={display_name(self.reader.rest.cluster_name)!r})"

    async def get(
        self,
        kind: KindLike,
        name: str,
        namespace: str | None = None,
        *,
        timeout: float | None = None,
        metadata_only: bool = False,
    ) -> dict[str, Any]:
        """`APIReader.get` as a coroutine."""
        return await _call(
            self.threads,
            self.reader.get,
            kind,
            name,
            namespace,
            timeout=timeout,
            metadata_only=metadata_only,
        )

    async def list(
        self,
        kind: KindLike,
        namespace: str | None = None,
        *,
        labels: str | Mapping[str, str] | None = None,
        fields: str | Mapping[str, str] | None = None,
        limit: int | None = None,
        timeout: float | None = None,
        metadata_only: bool = False,
    ) -> list[dict[str, Any]]:
        """`APIReader.list` as a coroutine."""
        return await _call(
            self.threads,
            self.reader.list,
            kind,
            namespace,
            labels=labels,
            fields=fields,
            limit=limit,
            timeout=timeout,
            metadata_only=metadata_only,
        )

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise AttributeError(
            f"AsyncAPIReader has no {name!r}: it awaits get() and list(); for the "
            f"synchronous APIReader's {name!r} (it blocks: run it off the event loop, as in "
            f"await asyncio.to_thread(...)) use aclient.client.api_reader.{name}"
        )


class AsyncSubResourceClient:
    """Awaitable twins of [`SubResourceClient`][mcruntime.client.SubResourceClient]'s calls."""

    def __init__(self, sub: SubResourceClient, *, threads: CallThreads | None = None) -> None:
        self.sub = sub
        self.threads = threads

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
        return await _call(
            self.threads, self.sub.get, kind, name, namespace, query=query, timeout=timeout
        )

    @overload
    async def create(
        self,
        kind: KindLike,
        name: str,
        body: dict[str, Any],
        namespace: str | None = None,
        *,
        dry_run: bool = False,
        field_manager: str | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]: ...
    @overload
    async def create(
        self,
        kind: KindLike,
        name: str,
        body: T,
        namespace: str | None = None,
        *,
        dry_run: bool = False,
        field_manager: str | None = None,
        timeout: float | None = None,
    ) -> T | dict[str, Any]: ...
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
        return await _call(
            self.threads,
            self.sub.create,
            kind,
            name,
            body,
            namespace,
            dry_run=dry_run,
            field_manager=field_manager,
            timeout=timeout,
        )

    @overload
    async def update(
        self,
        kind: KindLike,
        name: str,
        body: dict[str, Any],
        namespace: str | None = None,
        *,
        dry_run: bool = False,
        field_manager: str | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]: ...
    @overload
    async def update(
        self,
        kind: KindLike,
        name: str,
        body: T,
        namespace: str | None = None,
        *,
        dry_run: bool = False,
        field_manager: str | None = None,
        timeout: float | None = None,
    ) -> T | dict[str, Any]: ...
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
        return await _call(
            self.threads,
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
        return await _call(
            self.threads,
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
