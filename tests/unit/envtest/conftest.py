"""Fixtures for the envtest unit tests: a server per test, real clients, and a raw watch reader."""

from __future__ import annotations

import contextlib
import queue
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import orjson
import pytest
from kubernetes import client, config
from kubernetes.client import ApiClient
from kubernetes.watch.watch import iter_resp_lines

from mcruntime.envtest import APIServer

END = {"type": "END"}


class WatchReader:
    """Reads one watch stream in a thread; events arrive as dicts, the end of stream as END.

    The watch request is sent (and its headers received, so the server has
    registered the watch) before the constructor returns.
    """

    def __init__(self, func: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("watch", True)
        self.resp = func(*args, _preload_content=False, **kwargs)
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        self.thread = threading.Thread(target=self._read, name="test-watch-reader", daemon=True)
        self.thread.start()

    def _read(self) -> None:
        try:
            for line in iter_resp_lines(self.resp):
                if line:
                    self.events.put(orjson.loads(line))
        except Exception as e:  # the server cut the connection
            self.events.put({"type": "CUT", "error": repr(e)})
        finally:
            self.events.put(END)

    def next(self, timeout: float = 5.0) -> dict[str, Any]:
        return self.events.get(timeout=timeout)

    def next_of(self, types: set[str], timeout: float = 5.0) -> dict[str, Any]:
        """The next event whose type is in ``types`` (others, e.g. bookmarks, are skipped)."""
        while True:
            ev = self.next(timeout)
            if ev["type"] in types or ev["type"] in ("END", "CUT"):
                return ev

    def take(
        self, n: int, timeout: float = 5.0, skip: set[str] = frozenset({"BOOKMARK"})
    ) -> list[tuple[str, str]]:
        """The next ``n`` events as (type, name), skipping types in ``skip``."""
        out = []
        while len(out) < n:
            ev = self.next(timeout)
            if ev["type"] in skip:
                continue
            out.append((ev["type"], ev.get("object", {}).get("metadata", {}).get("name", "")))
            if ev["type"] in ("END", "CUT"):
                break
        return out

    def until_end(self, timeout: float = 5.0) -> list[dict[str, Any]]:
        out = []
        while True:
            ev = self.next(timeout)
            out.append(ev)
            if ev["type"] in ("END", "CUT"):
                return out

    def close(self) -> None:
        # shut the socket down first: closing it while the reader blocks in recv would deadlock
        conn = getattr(self.resp, "connection", None)
        sock = getattr(conn, "sock", None)
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self.thread.join(5)
        self.resp.close()


@pytest.fixture
def server() -> Iterator[APIServer]:
    srv = APIServer("unit").start()
    try:
        yield srv
    finally:
        srv.close()


@pytest.fixture
def api(server: APIServer) -> Iterator[ApiClient]:
    with config.new_client_from_config_dict(server.kubeconfig()) as c:
        yield c


@pytest.fixture
def core(api: ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api)


@pytest.fixture
def watches() -> Iterator[Callable[..., WatchReader]]:
    opened: list[WatchReader] = []

    def open_watch(func: Callable[..., Any], *args: Any, **kwargs: Any) -> WatchReader:
        w = WatchReader(func, *args, **kwargs)
        opened.append(w)
        return w

    yield open_watch
    for w in opened:
        w.close()
