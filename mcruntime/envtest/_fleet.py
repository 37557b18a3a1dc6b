"""``Fleet``: a set of named API servers, one per simulated cluster."""

from __future__ import annotations

import os
import pathlib
import threading
from collections.abc import Iterator
from types import TracebackType
from typing import Any

from mcruntime.envtest._server import APIServer, Auth, write_kubeconfig_file

__all__ = ["Fleet"]


class Fleet:
    """API servers named ``{prefix}-0`` ... (or ``names``), started and stopped together.

    ``fleet[name]`` is a server, ``len(fleet)`` their number, iterating yields
    the servers in order. Clusters can be added and removed while running.
    Thread-safe. ``server_kwargs`` go to every [`APIServer`][mcruntime.envtest.APIServer]
    (e.g. ``tls=False`` for plain HTTP).
    """

    def __init__(
        self,
        n: int | None = None,
        *,
        prefix: str = "cluster",
        names: list[str] | None = None,
        **server_kwargs: Any,
    ) -> None:
        if names is None:
            if n is None or n < 0:
                raise ValueError(f"Fleet needs a number of clusters >= 0 or names, got {n!r}")
            names = [f"{prefix}-{i}" for i in range(n)]
        else:
            names = list(names)
            if n is not None and n != len(names):
                raise ValueError(f"Fleet got n={n} but {len(names)} names")
        if len(set(names)) != len(names):
            raise ValueError(f"Fleet names must be unique: {names}")
        self.prefix = prefix
        self._kwargs = server_kwargs
        self._lock = threading.Lock()
        self._servers: dict[str, APIServer] = {
            name: APIServer(name, **server_kwargs) for name in names
        }
        self._running = False

    @property
    def names(self) -> list[str]:
        with self._lock:
            return list(self._servers)

    @property
    def servers(self) -> list[APIServer]:
        with self._lock:
            return list(self._servers.values())

    @property
    def running(self) -> bool:
        return self._running

    def __getitem__(self, name: str) -> APIServer:
        with self._lock:
            return self._member(name)

    def _member(self, name: str) -> APIServer:
        """Member ``name`` (``_lock`` held); a `KeyError` naming the members when it is none."""
        server = self._servers.get(name)
        if server is None:
            raise KeyError(f"no cluster {name!r} in the fleet {list(self._servers)}")
        return server

    def __contains__(self, name: object) -> bool:
        with self._lock:
            return name in self._servers

    def __len__(self) -> int:
        with self._lock:
            return len(self._servers)

    def __iter__(self) -> Iterator[APIServer]:
        return iter(self.servers)

    def __repr__(self) -> str:
        return f"<Fleet {self.names} {'running' if self._running else 'stopped'}>"

    def start(self) -> Fleet:
        """Start every server (idempotent)."""
        with self._lock:
            self._running = True
            servers = list(self._servers.values())
        started = []
        try:
            for s in servers:
                s.start()
                started.append(s)
        except BaseException:
            for s in started:
                s.stop()
            self._running = False
            raise
        return self

    def stop(self) -> None:
        """Stop every server (data kept, like [`APIServer.stop()`][mcruntime.envtest.APIServer.stop])."""
        with self._lock:
            self._running = False
            servers = list(self._servers.values())
        for s in servers:
            s.stop()

    def close(self) -> None:
        """Stop every server for good."""
        with self._lock:
            self._running = False
            servers = list(self._servers.values())
        for s in servers:
            s.close()

    def __enter__(self) -> Fleet:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def add(self, name: str) -> APIServer:
        """A new server named ``name``, started if the fleet is running."""
        with self._lock:
            if name in self._servers:
                raise ValueError(f"cluster {name!r} is already in the fleet")
            server = APIServer(name, **self._kwargs)
            self._servers[name] = server
            running = self._running
        if running:
            try:
                server.start()
            except BaseException:
                with self._lock:
                    self._servers.pop(name, None)
                raise
        return server

    def freeze(self, name: str) -> APIServer:
        """Hang member ``name`` (see `APIServer.freeze`); returns the server."""
        server = self[name]
        server.freeze()
        return server

    def thaw(self, name: str) -> APIServer:
        """Let member ``name`` answer again (see `APIServer.thaw`); returns the server."""
        server = self[name]
        server.thaw()
        return server

    def storage_outage(self, name: str) -> APIServer:
        """Take member ``name``'s storage away (see `APIServer.storage_outage`); returns the server."""
        server = self[name]
        server.storage_outage()
        return server

    def storage_restored(self, name: str) -> APIServer:
        """Give member ``name`` its storage back (see `APIServer.storage_restored`); returns the server."""
        server = self[name]
        server.storage_restored()
        return server

    def remove(self, name: str) -> APIServer:
        """Take ``name`` out of the fleet and stop it for good; returns the server."""
        with self._lock:
            server = self._member(name)
            del self._servers[name]
        server.close()
        return server

    def kubeconfig(self, *, auth: Auth = "token") -> dict[str, Any]:
        """One context per cluster (context, cluster and user named after it); current = the first.

        ``auth``: each server's bearer ``"token"`` or a client ``"certificate"``.
        """
        clusters, users, contexts = [], [], []
        for s in self.servers:
            cfg = s.kubeconfig(auth=auth)
            clusters += cfg["clusters"]
            users += cfg["users"]
            contexts += cfg["contexts"]
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "preferences": {},
            "clusters": clusters,
            "users": users,
            "contexts": contexts,
            "current-context": contexts[0]["name"] if contexts else "",
        }

    def write_kubeconfig(
        self, path: str | os.PathLike[str], *, auth: Auth = "token"
    ) -> pathlib.Path:
        """Write [`kubeconfig()`][mcruntime.envtest.Fleet.kubeconfig] to ``path`` (mode 0600)."""
        return write_kubeconfig_file(path, self.kubeconfig(auth=auth))
