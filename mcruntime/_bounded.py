"""Answers read whole by a deadline: a socket's timeout bounds one read, not an answer.

`BoundedResponse` is `http.client`'s response class for urllib3 connections; it reads
within the deadline that whoever sends the request sets in `answer_by` (the client's
calls, an oidc refresh). A server that trickles an answer in a byte at a time then ends
at the deadline with `TooSlow`, not one read timeout per byte later.
"""

from __future__ import annotations

import contextlib
import http.client
import io
import socket
import time
from contextvars import ContextVar
from typing import Any

import urllib3

__all__ = [
    "TOO_SLOW",
    "WATCH_TOO_SLOW",
    "BoundedReads",
    "BoundedResponse",
    "BoundedSocket",
    "TooSlow",
    "answer_by",
    "stream_unbounded",
]

#: when the answer of the request being sent in this thread must have come in full (set by
#: the client's `RESTClient._attempt`); for a watch, whose stream has no end, when its headers must have
#: (`RESTClient.watch` lifts the bound once they came: `stream_unbounded`)
answer_by: ContextVar[float | None] = ContextVar("mcruntime_clientanswer_by", default=None)


TOO_SLOW = "an answer was coming in, too slowly to end in time"
WATCH_TOO_SLOW = "the watch's answer was coming in, too slowly to begin in time"


class TooSlow(TimeoutError):
    """The call's deadline came while its answer was being read."""


class BoundedReads(io.RawIOBase):
    """A socket's reads (``socket.makefile``'s, unbuffered), each given only the time left
    before ``end``.

    A socket's timeout bounds one read: a server that sends a byte now and then (an
    overloaded API server, a congested link) would keep a call alive long past its
    deadline, one read at a time. So each read gets the time left, and none starts after.
    """

    def __init__(self, sock: socket.socket, end: float) -> None:
        self._sock = sock
        # makefile's reader holds the socket open until it is closed (http.client closes
        # the connection of a "Connection: close" answer before reading its body)
        self._raw = sock.makefile("rb", buffering=0)
        self._end = end
        self._began = False  # a byte of the answer came

    def readable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._raw.fileno()

    def close(self) -> None:
        self._raw.close()
        super().close()

    def readinto(self, buffer: Any) -> int | None:
        left = self._end - time.monotonic()
        if left <= 0:
            raise TooSlow(TOO_SLOW) if self._began else TimeoutError("timed out")
        sock, before = self._sock, self._sock.gettimeout()
        sock.settimeout(left if before is None else min(before, left))
        try:
            n = self._raw.readinto(buffer)
        except TimeoutError:
            if not self._began:
                raise  # no answer at all: a hung server
            raise TooSlow(TOO_SLOW) from None
        finally:
            with contextlib.suppress(OSError):  # (cut meanwhile: the read says so)
                sock.settimeout(before)
        self._began = self._began or bool(n)
        return n

    def unbound(self) -> None:
        """Read from now on as the socket's own timeout says: a watch's stream, once open.
        (An attribute of this reader, so the bounded reads of every other call pay no test.)"""
        self.readinto = self._raw.readinto  # type: ignore[method-assign,assignment]


class BoundedSocket:
    """What `BoundedResponse` reads from: ``makefile`` is all `http.client` asks of it."""

    def __init__(self, sock: socket.socket, end: float) -> None:
        self._sock = sock
        self._end = end
        self.reads: BoundedReads | None = None

    def makefile(self, mode: str) -> io.BufferedReader:
        self.reads = BoundedReads(self._sock, self._end)
        return io.BufferedReader(self.reads)


class BoundedResponse(http.client.HTTPResponse):
    """`http.client`'s response, whose headers and body come in by the call's deadline."""

    def __init__(self, sock: Any, debuglevel: int = 0, method: str | None = None, url: Any = None):
        end = answer_by.get()
        if end is not None:
            sock = self._mcr_bounded = BoundedSocket(sock, end)
        super().__init__(sock, debuglevel, method, url)


def stream_unbounded(resp: urllib3.BaseHTTPResponse) -> None:
    """Lift the deadline of a watch's reads once its headers came: its stream has no end."""
    bounded = getattr(getattr(resp, "_fp", None), "_mcr_bounded", None)
    if bounded is not None and bounded.reads is not None:
        bounded.reads.unbound()
