"""A slow client of the library's own servers: bytes trickled until the server closes."""

from __future__ import annotations

import socket
import threading
import time


def closed_by_server(sock: socket.socket) -> bool:
    """Whether the server closed ``sock`` (a TLS socket too), without waiting."""
    before = sock.gettimeout()
    sock.settimeout(0.01)
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False
    except OSError:
        return True
    finally:
        sock.settimeout(before)


def trickle_until_closed(sock: socket.socket, limit: float, pace: float = 0.1) -> float:
    """Send a byte every ``pace`` seconds (well within a per-read timeout) until the server
    closes ``sock``; returns the seconds that took. Fails past ``limit`` seconds."""
    started = time.monotonic()
    paced = threading.Event()  # never set: the client's pace between two bytes
    while not closed_by_server(sock):
        assert time.monotonic() - started < limit, "the server still reads the trickle"
        try:
            sock.sendall(b"X")
        except OSError:
            break
        paced.wait(pace)
    return time.monotonic() - started
