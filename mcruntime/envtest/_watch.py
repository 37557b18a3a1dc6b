"""Watch streams: per-watcher filtering of shared events and the chunked writer."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mcruntime import _json
from mcruntime.envtest._field_labels import selectable
from mcruntime.envtest._registry import ServedResource
from mcruntime.envtest._schema import in_version
from mcruntime.envtest._storage import ResKey, StoredEvent
from mcruntime.envtest._transform import as_partial

if TYPE_CHECKING:
    from mcruntime._selectors import FieldSelector, LabelSelector
    from mcruntime.envtest._http import Connection
    from mcruntime.envtest._storage import ObjectStore

__all__ = ["Watcher", "MAX_BUFFERED"]

MAX_BUFFERED = 100_000
_TYPES = {t: t.encode() for t in ("ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR")}


def event_line(type: str, obj_json: bytes) -> bytes:
    return b'{"type":"' + _TYPES[type] + b'","object":' + obj_json + b"}\n"


class Watcher:
    """One open watch: filters the server's events and streams them to one client."""

    def __init__(
        self,
        store: ObjectStore,
        resource: ServedResource,
        namespace: str | None,
        labels: LabelSelector | None,
        fields: FieldSelector | None,
        *,
        bookmarks: bool,
        bookmark_interval: float,
        timeout: float | None,
        table: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
        view: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
        metadata: str | None = None,
    ) -> None:
        self.store = store
        self.resource = resource
        self.key: ResKey = resource.key
        self.namespace = namespace
        self.labels = labels
        self.fields = fields
        self.bookmarks = bookmarks
        self.bookmark_interval = bookmark_interval
        self.timeout = timeout
        self.buf: list[bytes] = []
        self.wake = asyncio.Event()
        self.closed = False
        # a watch from a resourceVersion the server has not reached: the watch cache sends
        # nothing at or below it (cacheWatcher.process), bookmarks included
        self.after = 0
        self._api_version = resource.api_version
        self._table = table  # objects sent as Table rows (kubectl get -w)
        self._view = view  # stored form -> the resource's form (events.k8s.io)
        self._metadata = metadata  # objects sent as PartialObjectMetadata of this apiVersion

    def matches(self, obj: dict[str, Any]) -> bool:
        if self._view is not None and self.fields is not None:
            obj = self._view(obj)
        if self.labels is not None and not self.labels.matches(obj["metadata"].get("labels") or {}):
            return False
        return self.fields is None or self.fields.matches(selectable(self.resource, obj))

    def _encode(self, ev: StoredEvent, obj: dict[str, Any]) -> bytes:
        if self._metadata is not None:
            return _json.dumps(as_partial(obj, self._metadata))
        if self._view is not None:
            obj = self._view(obj)
            return _json.dumps(self._table(obj) if self._table is not None else obj)
        if self._table is not None:
            return _json.dumps(self._table(self._versioned(obj)))
        if (
            obj is ev.obj
            and obj.get("apiVersion") == self._api_version
            and not self.resource.read_defaults
        ):
            return ev.object_json()
        return _json.dumps(self._in_version(obj))

    def offer(self, ev: StoredEvent) -> None:
        """Queue ``ev`` if this watch sees it, translated by selector transitions like the watch cache."""
        if self.closed or ev.rv <= self.after:
            return
        if self.namespace is not None and ev.namespace != self.namespace:
            return
        type = ev.type
        if self.labels is not None or self.fields is not None:
            new_match = self.matches(ev.obj)
            if type == "MODIFIED":
                old_match = ev.old is not None and self.matches(ev.old)
                if new_match and not old_match:
                    type = "ADDED"
                elif old_match and not new_match:
                    type = "DELETED"
                elif not new_match:
                    return
            elif not new_match:
                return
        self.push(event_line(type, self._encode(ev, ev.obj)))

    def push(self, line: bytes) -> None:
        self.buf.append(line)
        if len(self.buf) > MAX_BUFFERED:
            # a client this far behind is cut off, as the real server does with slow watchers
            self.close()
        self.wake.set()

    def initial(self, objects: list[dict[str, Any]]) -> None:
        """Synthetic ADDED events for the current state."""
        for obj in objects:
            if self.matches(obj):
                obj = self._versioned(obj)
                if self._table is not None:
                    obj = self._table(obj)
                elif self._metadata is not None:
                    obj = as_partial(obj, self._metadata)
                self.buf.append(event_line("ADDED", _json.dumps(obj)))

    def _versioned(self, obj: dict[str, Any]) -> dict[str, Any]:
        if self._view is not None:
            return self._view(obj)
        return self._in_version(obj)

    def _in_version(self, obj: dict[str, Any]) -> dict[str, Any]:
        res = self.resource
        return in_version(obj, self._api_version, res.schema, res.custom, res.read_defaults)

    def bookmark(self, annotations: dict[str, str] | None = None) -> bytes:
        meta: dict[str, Any] = {"resourceVersion": str(self.store.rv)}
        if annotations:
            meta["annotations"] = annotations
        obj = {"kind": self.resource.kind, "apiVersion": self._api_version, "metadata": meta}
        if self._metadata is not None:
            obj = as_partial(obj, self._metadata)
        return event_line("BOOKMARK", _json.dumps(obj))

    def close(self) -> None:
        self.closed = True
        self.wake.set()

    async def prepare(self, data: bytes) -> bytes:
        """The event lines as sent (a subclass converts their objects)."""
        return data

    async def run(self, conn: Connection) -> None:
        """Stream until timeout, close (drop_watches/stop) or the client goes away."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout if self.timeout is not None else None
        gone = conn.peer_gone()
        gone.add_done_callback(lambda _f: self.close())
        try:
            await conn.start_chunked()
            last_sent = loop.time()
            if self.bookmarks and not self.buf and self.store.rv >= self.after:
                # a prompt first bookmark tells the client the watch is established
                self.buf.append(self.bookmark())
            while True:
                if self.buf:
                    data = b"".join(self.buf)
                    self.buf.clear()
                    await conn.chunk(await self.prepare(data))
                    last_sent = loop.time()
                    continue
                if self.closed:
                    break
                self.wake.clear()
                wait: float | None = None
                now = loop.time()
                if deadline is not None:
                    wait = deadline - now
                    if wait <= 0:
                        break
                if self.bookmarks:
                    until_bookmark = last_sent + self.bookmark_interval - now
                    if until_bookmark <= 0:
                        if self.store.rv >= self.after:
                            self.buf.append(self.bookmark())
                        last_sent = now
                        continue
                    wait = until_bookmark if wait is None else min(wait, until_bookmark)
                if wait is None:
                    await self.wake.wait()
                else:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self.wake.wait(), wait)
            if gone.done() or conn.writer.is_closing():
                return
            if await conn.stop_watching_peer():
                await conn.end_chunked()
        except (ConnectionError, RuntimeError):
            conn.closing = True
        finally:
            self.closed = True
            self.store.remove_watcher(self)
