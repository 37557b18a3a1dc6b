"""One thread reads every open watch stream: a selector over their sockets.

A thread per watch makes one runnable thread per cluster under load, and the
GIL is shared among all of them: at 1,000 clusters a controller's workers got
a thousandth of it (24 reconciles/s while the watches kept every thread busy).
Streams handed to the shared reader (`WatchStream.run`) are read by one
thread instead, which decodes the chunked HTTP body itself and hands each
event to the stream's callback; the thread lives while streams are open and
ends with the last one.
"""

from __future__ import annotations

import contextlib
import http.client
import logging
import selectors
import socket
import ssl
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import urllib3

from mcruntime import _json
from mcruntime._forked import in_a_forked_child
from mcruntime._threads import PREFIX, start_thread

__all__ = [
    "BROKEN_CHUNKS",
    "NOT_JSON",
    "ChunkedDecoder",
    "NotEvents",
    "SharedWatch",
    "THREAD_NAME",
    "WOULD_BLOCK",
    "add",
    "event_of",
    "on_reader",
]

log = logging.getLogger("mcruntime.client")

THREAD_NAME = PREFIX + "watches"
#: handling one read's events longer than this (seconds) is reported: it delays every watch
SLOW_HANDLING = 1.0
#: such reports are logged at most this often (seconds)
SLOW_REPORT_INTERVAL = 60.0
_READ_SIZE = 1 << 16
#: longest chunk-size line accepted (the size in hex and any extensions)
_MAX_SIZE_LINE = 4096
#: the reader looks for silent streams at least this often (seconds)
_SCAN_INTERVAL = 1.0
WOULD_BLOCK = (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError, InterruptedError)

_SIZE, _DATA, _DATA_END, _TRAILER, _DONE = range(5)


class ChunkedDecoder:
    """Decodes an HTTP/1.1 chunked body fed in arbitrary pieces (``done`` after the last chunk)."""

    __slots__ = ("_buf", "_state", "_left")

    def __init__(self) -> None:
        self._buf = bytearray()
        self._state = _SIZE
        self._left = 0

    @property
    def done(self) -> bool:
        """True once the terminating chunk and its trailer were read."""
        return self._state == _DONE

    def feed(self, data: bytes) -> bytes:
        """Decode what ``data`` completes; raises ValueError on a malformed body."""
        buf = self._buf
        buf += data
        out = bytearray()
        pos = 0
        end = len(buf)
        state = self._state
        while pos < end or state == _DATA_END:
            if state == _SIZE:
                i = buf.find(b"\r\n", pos)
                if i < 0:
                    if end - pos > _MAX_SIZE_LINE:
                        raise ValueError("chunk size line too long")
                    break
                size = bytes(buf[pos:i]).partition(b";")[0].strip()
                try:
                    self._left = int(size, 16)
                except ValueError:
                    raise ValueError(f"bad chunk size {size[:20]!r}") from None
                pos = i + 2
                state = _DATA if self._left else _TRAILER
            elif state == _DATA:
                take = min(self._left, end - pos)
                out += buf[pos : pos + take]
                pos += take
                self._left -= take
                if self._left:
                    break
                state = _DATA_END
            elif state == _DATA_END:
                if end - pos < 2:
                    break
                if buf[pos : pos + 2] != b"\r\n":
                    raise ValueError("chunk not followed by CRLF")
                pos += 2
                state = _SIZE
            elif state == _TRAILER:
                i = buf.find(b"\r\n", pos)
                if i < 0:
                    break
                empty = i == pos
                pos = i + 2
                if empty:
                    state = _DONE
            else:  # _DONE: anything after the body is ignored
                pos = end
        self._state = state
        del buf[:pos]
        return bytes(out)


class SharedWatch:
    """A chunked stream read by the shared thread: its socket, decoder, callbacks and outcome.

    ``label`` names the stream in logs. ``on_event`` gets each decoded
    event; what it raises ends the stream.
    ``on_read`` is called (with no argument) after each read that returned
    data. ``failed(exc)`` builds the error a broken connection ends with;
    ``closed()`` says whether the stream was closed on purpose (then a broken
    or ended connection ends it quietly); ``finish()`` releases the response
    once the reader let go of the socket. ``silence`` bounds the time between
    two reads (None: unbounded). ``on_end(error)``, when given, is called on
    the reader once the stream ended (after ``done`` is set): it must not block.
    """

    __slots__ = (
        "sock",
        "label",
        "on_event",
        "on_read",
        "failed",
        "closed",
        "finish",
        "silence",
        "on_end",
        "done",
        "error",
        "exited",
        "_decoder",
        "_body",
        "_last_read",
        "_line_since",
        "_leftover",
        "_fd",
    )

    def __init__(
        self,
        sock: socket.socket,
        leftover: bytes,
        *,
        label: str,
        on_event: Callable[[dict[str, Any]], None],
        on_read: Callable[[], None],
        failed: Callable[[BaseException], BaseException],
        closed: Callable[[], bool],
        finish: Callable[[], None],
        silence: float | None,
        on_end: Callable[[BaseException | None], None] | None = None,
    ) -> None:
        self.sock = sock
        self.label = label
        self.on_event = on_event
        self.on_read = on_read
        self.failed = failed
        self.closed = closed
        self.finish = finish
        self.silence = silence
        self.on_end = on_end
        self.done = threading.Event()
        self.error: BaseException | None = None
        #: the reader thread, when it ended because this stream was its last
        self.exited: threading.Thread | None = None
        self._decoder = ChunkedDecoder()
        self._body = bytearray()
        self._last_read = time.monotonic()
        #: when the event line not yet ended began (None: none pending)
        self._line_since: float | None = None
        #: body bytes read before the hand-over
        self._leftover = leftover
        self._fd = -1

    def wait(self) -> None:
        """Block until the stream ended; raise what ended it (None: it ended quietly)."""
        self.join(None)
        if self.error is not None:
            raise self.error

    def join(self, timeout: float | None) -> bool:
        """Wait up to ``timeout`` for the stream to end (and the reader to let go of it, when
        it was its last); True once it did."""
        if not self.done.wait(timeout):
            return False
        if self.exited is not None:
            # the reader let go of its last stream: it has nothing left to do but return
            self.exited.join(5.0 if timeout is None else timeout)
        return True

    def ended(self) -> None:
        """Tell ``on_end`` (on the reader, once ``done`` is set)."""
        if self.on_end is not None:
            try:
                self.on_end(self.error)
            except BaseException:  # a bug in the callback must not end the reader
                log.exception("%s: its end callback failed", self.label)

    def deadline(self) -> float:
        """When the stream counts as silent: ``silence`` after its last read, or after the
        event line still unfinished began (bytes that never end a line are no progress)."""
        if self.silence is None:
            return float("inf")
        since = self._last_read if self._line_since is None else self._line_since
        return since + self.silence

    def _take(self, data: bytes) -> bool:
        """Decode ``data`` and deliver its complete events; True once the body ended."""
        decoder = self._decoder
        try:
            data = decoder.feed(data)
        except ValueError:
            raise NotEvents(BROKEN_CHUNKS) from None
        body = self._body
        body += data
        end = body.rfind(b"\n")
        if end >= 0:
            lines = bytes(body[:end])
            del body[: end + 1]
            on_event = self.on_event
            for line in lines.split(b"\n"):
                if line and not line.isspace():
                    on_event(event_of(line))
        if not body:
            self._line_since = None
        elif end >= 0 or self._line_since is None:
            self._line_since = time.monotonic()  # a line began
        return decoder.done

    def _end_of_body(self) -> None:
        """The connection ended: deliver a last unterminated event."""
        if self._body.strip():
            self.on_event(event_of(bytes(self._body)))
            self._body.clear()


class NotEvents(ValueError):
    """A watch's body is no stream of watch events (a proxy's page in it, broken chunking):
    what it is, never its bytes."""


#: what a watch's body was instead of a stream of watch events
NOT_JSON = "a watch stream with a line that is not JSON"
BROKEN_CHUNKS = "a watch stream whose chunked encoding is broken"


def event_of(line: bytes) -> Any:
    """One watch event decoded from its JSON line; `NotEvents` when it is no JSON."""
    try:
        return _json.loads(line)
    except _json.JSONDecodeError:
        raise NotEvents(NOT_JSON) from None


class _Reader:
    """The shared reader: started by the first stream, ended after the last one."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: streams handed over and not yet taken by the reader; taken one at a time, so
        #: that `_end` sees those still waiting and does not end the reader before them
        self._pending: deque[SharedWatch] = deque()
        self._thread: threading.Thread | None = None
        self._wake: socket.socket | None = None
        self._reported_slow = -SLOW_REPORT_INTERVAL

    def add(self, watch: SharedWatch) -> None:
        with self._lock:
            self._pending.append(watch)
            if self._thread is None:
                sel = selectors.DefaultSelector()
                wake_r, wake_w = socket.socketpair()
                wake_r.setblocking(False)
                wake_w.setblocking(False)
                sel.register(wake_r, selectors.EVENT_READ, None)
                self._wake = wake_w
                self._thread = start_thread(self._run, THREAD_NAME, sel, wake_r, wake_w)
                return
            wake = self._wake
        if wake is not None:
            with contextlib.suppress(OSError):
                wake.send(b"\0")

    def _take_one(self) -> SharedWatch | None:
        with self._lock:
            return self._pending.popleft() if self._pending else None

    def _run(
        self, sel: selectors.BaseSelector, wake_r: socket.socket, wake_w: socket.socket
    ) -> None:
        watches: dict[int, SharedWatch] = {}
        taken: SharedWatch | None = None
        next_scan = 0.0
        try:
            while True:
                while (taken := self._take_one()) is not None:
                    new = taken
                    try:
                        sel.register(new.sock, selectors.EVENT_READ, new)
                    except (OSError, ValueError) as exc:  # closed meanwhile
                        taken = None
                        if self._end(new, watches, sel, None if new.closed() else new.failed(exc)):
                            return
                        continue
                    new._fd = new.sock.fileno()
                    watches[new._fd] = new
                    taken = None
                    next_scan = min(next_scan, new.deadline())
                    # bytes may wait in the TLS layer already, where select() does not see them
                    if self._read(new, watches, sel):
                        return
                now = time.monotonic()
                if now >= next_scan:
                    next_scan = now + _SCAN_INTERVAL
                    for w in list(watches.values()):
                        due = w.deadline()
                        if due <= now:
                            err = None if w.closed() else w.failed(_silent())
                            if self._end(w, watches, sel, err):
                                return
                        else:
                            next_scan = min(next_scan, due)
                for key, _ in sel.select(max(0.0, next_scan - time.monotonic())):
                    w = key.data
                    if w is None:
                        with contextlib.suppress(OSError):
                            while wake_r.recv(4096):
                                pass
                    elif watches.get(w._fd) is w and self._read(w, watches, sel):
                        return
        except BaseException as exc:  # a bug here must not leave readers waiting forever
            with self._lock:
                self._thread = None
                left = [*self._pending]
                self._pending.clear()
            if taken is not None:
                left.append(taken)
            for w in [*watches.values(), *left]:
                w.error = exc
                w.done.set()
                w.ended()
            raise
        finally:
            sel.close()
            wake_r.close()
            wake_w.close()

    def _read(
        self, w: SharedWatch, watches: dict[int, SharedWatch], sel: selectors.BaseSelector
    ) -> bool:
        """Read what ``w``'s socket has; True when that ended the reader."""
        sock = w.sock
        error: BaseException | None = None
        ended = False
        pending, w._leftover = w._leftover, b""
        began = time.monotonic()
        try:
            while True:
                if pending:
                    data, pending = pending, b""
                else:
                    try:
                        data = sock.recv(_READ_SIZE)
                    except WOULD_BLOCK:
                        break
                if not data:
                    if not w.closed():
                        w._end_of_body()
                        if not w._decoder.done:
                            error = w.failed(http.client.IncompleteRead(b""))
                    ended = True
                    break
                w._last_read = time.monotonic()
                w.on_read()
                if w.closed():
                    ended = True
                    break
                if w._take(data):
                    ended = True
                    break
        except (OSError, NotEvents) as exc:
            ended = True
            error = None if w.closed() else w.failed(exc)
        except BaseException as exc:  # what on_event raised
            # any BaseException: a callback's sys.exit() or KeyboardInterrupt ends its own
            # watch (its owner gets it), never the thread every other watch shares
            ended = True
            error = exc
        took = time.monotonic() - began
        if took > SLOW_HANDLING and began - self._reported_slow > SLOW_REPORT_INTERVAL:
            self._reported_slow = began
            log.warning(
                "%s: handling its events took %.1fs on the thread every watch shares, delaying "
                "every other cluster's; event handlers, predicates and map functions must not "
                "block (read the cache, enqueue, return)",
                w.label,
                took,
            )
        if ended:
            return self._end(w, watches, sel, error)
        return False

    def _end(
        self,
        w: SharedWatch,
        watches: dict[int, SharedWatch],
        sel: selectors.BaseSelector,
        error: BaseException | None,
    ) -> bool:
        """Let go of ``w`` and wake its owner; True when it was the last stream (the reader ends)."""
        if watches.get(w._fd) is w:
            del watches[w._fd]
            with contextlib.suppress(OSError, ValueError, KeyError):
                sel.unregister(w.sock)
        with contextlib.suppress(Exception):
            w.finish()
        last = False
        with self._lock:
            if not watches and not self._pending:
                self._thread = None
                self._wake = None
                last = True
        if last:
            w.exited = threading.current_thread()
        w.error = error
        w.done.set()
        w.ended()
        return last


def _silent() -> Exception:
    return urllib3.exceptions.ReadTimeoutError(None, "", "read timed out")  # type: ignore[arg-type]


_reader = _Reader()


def _forget_the_parents_reader() -> None:
    """In a child just forked: the parent's reader thread is not in this process, and its
    streams are the parent's (the child's clients forget them): a reader of the child's own
    starts with its first stream. Its wake-up socket is closed here (in this process only:
    the parent's reader keeps its own)."""
    global _reader
    wake = _reader._wake
    _reader = _Reader()
    if wake is not None:
        with contextlib.suppress(OSError):
            wake.close()


in_a_forked_child(_forget_the_parents_reader)


def add(watch: SharedWatch) -> None:
    """Hand ``watch`` to the shared reader (started if none runs)."""
    _reader.add(watch)


def on_reader() -> bool:
    """Whether the caller runs on the shared reader (a watch's event handler)."""
    return threading.current_thread() is _reader._thread
