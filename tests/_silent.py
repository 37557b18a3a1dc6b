"""A server that hangs: it accepts connections, and reads and answers nothing."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from typing import Any

__all__ = ["SilentServer", "silent_server"]


class SilentServer:
    """A cluster that hangs: it accepts connections, reads nothing, answers nothing (plain HTTP)."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self.accepted: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, name="test/silent", daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return  # closed
            self.accepted.append(conn)

    def kubeconfig(self) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "silent", "cluster": {"server": self.url}}],
            "users": [{"name": "silent", "user": {}}],
            "contexts": [{"name": "silent", "context": {"cluster": "silent", "user": "silent"}}],
            "current-context": "silent",
        }

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # ends the accept() waiting
        self._listener.close()
        self._thread.join(5)
        for conn in self.accepted:
            conn.close()


@contextlib.contextmanager
def silent_server() -> Iterator[SilentServer]:
    server = SilentServer()
    try:
        yield server
    finally:
        server.close()
