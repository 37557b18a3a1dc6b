"""WatchStream framing: events split across chunks, unframed streams, and server-ended watches.

A tiny HTTP server stands in for the API server so that the byte layout on
the wire is controlled exactly (envtest integration tests cover the rest).
Both ways of reading are covered: iterating on the caller's thread, and
`WatchStream.run`, which hands chunked streams to the thread all watches share.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from kubernetes.client import ApiClient, Configuration

from mcruntime._threads import mcruntime_threads
from mcruntime.client import RESTClient, _watchmux
from mcruntime.client._watchmux import THREAD_NAME, ChunkedDecoder
from mcruntime.envtest import wait_for
from mcruntime.errors import Unreachable

pytestmark = pytest.mark.timeout(20)

EVENTS = [
    b'{"type":"ADDED","object":{"n":%d,"pad":"%s"}}' % (i, b"x" * (i * 700)) for i in range(40)
]
PAYLOAD = b"\n".join(EVENTS) + b"\n"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if "hang" in self.path:  # one event, then silence: a server that stopped answering
            self.send_header("Transfer-Encoding", "chunked")
            if "close" in self.path:  # and says the connection ends with the answer
                self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(EVENTS[0]) + 1, EVENTS[0] + b"\n"))
            self.wfile.flush()
            RELEASE.wait(15)
            self.close_connection = True
        elif "cut" in self.path:  # one event, then the connection ends mid-body
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(EVENTS[0]) + 1, EVENTS[0] + b"\n"))
            self.wfile.flush()
            self.close_connection = True
        elif "chunked" in self.path:
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for i in range(0, len(PAYLOAD), 997):  # chunk borders fall inside events
                part = PAYLOAD[i : i + 997]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
        else:
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(PAYLOAD[:-1])  # last event without a trailing newline
            self.wfile.flush()
            self.close_connection = True


#: set when the module's tests are done: ends the handlers of hung watches
RELEASE = threading.Event()


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a client ending a stream early breaks the handler's pipe: expected here


@pytest.fixture(scope="module")
def rest() -> Iterator[RESTClient]:
    srv = _Server(("127.0.0.1", 0), _Handler)
    t = threading.Thread(target=srv.serve_forever, name="test-http", daemon=True)
    t.start()
    cfg = Configuration()
    cfg.host = f"http://127.0.0.1:{srv.server_port}"
    client = RESTClient(ApiClient(cfg), cluster_name="stub")
    yield client
    RELEASE.set()
    client.close()
    srv.shutdown()
    srv.server_close()


@pytest.mark.parametrize("path", ["/chunked", "/plain"])
def test_every_event_decoded_once_whatever_the_framing(rest: RESTClient, path: str) -> None:
    events = list(rest.watch(path))
    assert [e["object"]["n"] for e in events] == list(range(40))
    assert all(e["type"] == "ADDED" for e in events)


def test_a_stream_is_iterated_once(rest: RESTClient) -> None:
    stream = rest.watch("/chunked")
    list(stream)
    assert stream.closed
    with pytest.raises(RuntimeError):
        iter(stream)


def test_a_stream_closed_before_iteration_yields_nothing(rest: RESTClient) -> None:
    stream = rest.watch("/chunked")
    stream.close()
    assert list(stream) == []


class _Collect:
    """An ``on_event`` that records each event and the thread it came on."""

    def __init__(
        self, fail_at: int | None = None, error: type[BaseException] = LookupError
    ) -> None:
        self.events: list[dict[str, Any]] = []
        self.threads: set[str] = set()
        self.readers: set[threading.Thread] = set()
        self.fail_at = fail_at
        self.error = error
        self.first = threading.Event()

    def __call__(self, event: dict[str, Any]) -> None:
        self.threads.add(threading.current_thread().name)
        self.readers.add(threading.current_thread())
        self.events.append(event)
        self.first.set()
        if self.fail_at is not None and len(self.events) == self.fail_at:
            raise self.error(f"handler failed at event {self.fail_at}")


def _shared_reader_running() -> bool:
    return any(t.name == THREAD_NAME for t in mcruntime_threads())


@pytest.mark.parametrize(("path", "reader"), [("/chunked", THREAD_NAME), ("/plain", "test-main")])
def test_run_delivers_every_event_once_on_the_shared_thread_when_chunked(
    rest: RESTClient, path: str, reader: str
) -> None:
    got = _Collect()
    me = threading.current_thread()
    name, me.name = me.name, "test-main"
    try:
        rest.watch(path).run(got)
    finally:
        me.name = name
    assert [e["object"]["n"] for e in got.events] == list(range(40))
    # a chunked body is read by the shared thread; anything else by the caller's own
    assert got.threads == {reader}
    assert not _shared_reader_running()  # it ended with its last stream, before run() returned


def test_many_streams_share_one_reader_that_ends_with_the_last(rest: RESTClient) -> None:
    collectors = [_Collect() for _ in range(8)]
    streams = [rest.watch("/hang") for _ in collectors]
    runners = [
        threading.Thread(target=s.run, args=(c,), name=f"test-run-{i}")
        for i, (s, c) in enumerate(zip(streams, collectors, strict=True))
    ]
    for t in runners:
        t.start()
    for c in collectors:
        assert c.first.wait(5)
    assert [t.name for t in mcruntime_threads()].count(THREAD_NAME) == 1
    for c in collectors:
        assert c.threads == {THREAD_NAME}
    for s in streams[:-1]:
        s.close()
    for t in runners[:-1]:
        t.join(5)
        assert not t.is_alive()
    assert _shared_reader_running()  # one stream is still open
    streams[-1].close()
    runners[-1].join(5)
    assert not runners[-1].is_alive()
    assert not _shared_reader_running()


def test_a_stream_that_ends_at_once_does_not_end_the_reader_before_the_next_handed_over(
    rest: RESTClient,
) -> None:
    # The reader takes the streams handed over while it was busy together. One of
    # them that ended on its first read, the reader's only registered stream, ended
    # the reader too, and the next one was never read: its run() waited forever
    # (an informer's thread left behind after stop, seen in CI).
    release = threading.Event()

    def busy(event: dict[str, Any]) -> None:  # holds the reader, then ends its stream
        release.wait(10)
        raise LookupError("done with it")

    first = rest.watch("/hang")
    runner_a = threading.Thread(target=_run_quietly, args=(first, busy), daemon=True)
    runner_a.start()
    wait_for(lambda: _shared_reader_running() and not _watchmux._reader._pending)
    ended, later = rest.watch("/hang"), rest.watch("/hang")
    got = _Collect()
    runner_b = threading.Thread(target=ended.run, args=(_Collect(),), daemon=True)
    runner_b.start()
    wait_for(lambda: len(_watchmux._reader._pending) == 1)
    ended.close()  # its first read finds the end
    runner_c = threading.Thread(target=later.run, args=(got,), daemon=True)
    runner_c.start()
    wait_for(lambda: len(_watchmux._reader._pending) == 2)
    release.set()
    runner_a.join(5)
    runner_b.join(5)
    assert not runner_b.is_alive()
    assert got.first.wait(5), "the stream handed over after the ended one was never read"
    later.close()
    runner_c.join(5)
    assert not runner_c.is_alive()
    wait_for(lambda: not _shared_reader_running())


def _run_quietly(stream: Any, on_event: Any) -> None:
    with contextlib.suppress(LookupError):
        stream.run(on_event)


def test_a_silent_stream_ends_at_its_silence_bound_with_unreachable(rest: RESTClient) -> None:
    got = _Collect()
    stream = rest.watch("/hang", timeout=0.5)
    began = time.monotonic()
    with pytest.raises(Unreachable, match="read timed out"):
        stream.run(got)
    took = time.monotonic() - began
    assert len(got.events) == 1
    assert 0.4 < took < 3.0, took
    assert stream.closed


@pytest.mark.parametrize("path", ["/hang", "/hang-close"])
def test_close_from_another_thread_ends_run_at_once_and_quietly(
    rest: RESTClient, path: str
) -> None:
    """Also for an answer saying ``Connection: close`` (a proxy's, an HTTP/1.0 one): its
    connection lets go of the socket, which the response holds on, and is shut down there."""
    got = _Collect()
    stream = rest.watch(path)
    closer = threading.Timer(0.2, stream.close)
    closer.start()
    began = time.monotonic()
    stream.run(got)  # no error: the stream was ended on purpose
    assert time.monotonic() - began < 2.0
    assert len(got.events) == 1
    closer.join()


@pytest.mark.parametrize("error", [LookupError, SystemExit, KeyboardInterrupt])
def test_what_the_callback_raises_ends_its_stream_only(
    rest: RESTClient, error: type[BaseException]
) -> None:
    """A callback's ``sys.exit()`` or ``KeyboardInterrupt`` (not an ``Exception``) ends its
    own stream, raised to its ``run``, and not the thread every other stream shares."""
    healthy = _Collect()
    other = rest.watch("/hang")
    runner = threading.Thread(target=other.run, args=(healthy,), name="test-run-healthy")
    runner.start()
    assert healthy.first.wait(5)
    failing = _Collect(fail_at=3, error=error)
    with pytest.raises(error, match="event 3"):
        rest.watch("/chunked").run(failing)
    assert len(failing.events) == 3
    (reader,) = healthy.readers
    later = _Collect()
    rest.watch("/chunked").run(later)
    assert later.readers == {reader}  # the same reader goes on, not a new one
    assert runner.is_alive() and not other.closed  # the other stream is still being read
    other.close()
    runner.join(5)
    assert not runner.is_alive()


class _Ends:
    """An ``on_end`` that records how the stream ended and on which thread."""

    def __init__(self) -> None:
        self.errors: list[BaseException | None] = []
        self.threads: list[str] = []
        self.done = threading.Event()

    def __call__(self, error: BaseException | None) -> None:
        self.errors.append(error)
        self.threads.append(threading.current_thread().name)
        self.done.set()


def test_start_returns_at_once_and_the_shared_thread_delivers_the_events_and_the_end(
    rest: RESTClient,
) -> None:
    got, ends = _Collect(), _Ends()
    stream = rest.watch("/hang")
    assert stream.start(got, ends) is True  # returns while the stream is open
    assert got.first.wait(5)
    assert not ends.done.is_set()
    stream.close()
    assert stream.join(5)
    assert ends.errors == [None]  # closed on purpose: a quiet end
    assert got.threads == {THREAD_NAME} and ends.threads == [THREAD_NAME]
    assert not _shared_reader_running()  # join waited for the reader to let go of its last


def test_a_started_stream_that_breaks_ends_with_its_error(rest: RESTClient) -> None:
    got, ends = _Collect(), _Ends()
    assert rest.watch("/cut").start(got, ends)
    assert ends.done.wait(5)
    assert len(got.events) == 1
    assert isinstance(ends.errors[0], Unreachable)


def test_start_refuses_a_stream_the_shared_thread_cannot_read(rest: RESTClient) -> None:
    got, ends = _Collect(), _Ends()
    stream = rest.watch("/plain")  # not chunked: read by its caller only
    assert stream.start(got, ends) is False
    assert stream.closed and not got.events and not ends.errors


def test_a_connection_ending_mid_body_is_unreachable_not_a_quiet_end(rest: RESTClient) -> None:
    got = _Collect()
    with pytest.raises(Unreachable, match="mid-answer"):
        rest.watch("/cut").run(got)
    assert len(got.events) == 1


def test_run_and_iteration_share_the_one_read_of_a_stream(rest: RESTClient) -> None:
    stream = rest.watch("/chunked")
    stream.run(_Collect())
    with pytest.raises(RuntimeError):
        stream.run(_Collect())
    with pytest.raises(RuntimeError):
        iter(stream)


def _chunked(body: bytes, size: int) -> bytes:
    parts = [body[i : i + size] for i in range(0, len(body), size)]
    framed = b"".join(b"%x;ext=1\r\n%s\r\n" % (len(p), p) for p in parts)
    return framed + b"0\r\nTrailer: x\r\n\r\n"


@pytest.mark.parametrize("piece", [1, 2, 7, 4096])
def test_the_chunked_decoder_takes_the_body_in_any_pieces(piece: int) -> None:
    wire = _chunked(PAYLOAD, 997)
    dec = ChunkedDecoder()
    out = b"".join(dec.feed(wire[i : i + piece]) for i in range(0, len(wire), piece))
    assert out == PAYLOAD
    assert dec.done


@pytest.mark.parametrize(
    "wire",
    [b"zz\r\nab\r\n", b"2\r\nabX\r\n", b"f" * 5000],
    ids=["bad-size", "no-crlf-after-data", "size-line-too-long"],
)
def test_the_chunked_decoder_refuses_a_malformed_body(wire: bytes) -> None:
    with pytest.raises(ValueError):
        ChunkedDecoder().feed(wire)


def test_a_blocking_callback_is_reported_naming_its_cluster_and_watch(
    rest: RESTClient, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(_watchmux, "SLOW_HANDLING", 0.01)
    monkeypatch.setattr(_watchmux._reader, "_reported_slow", -1e9)
    reads = 0

    def blocking(event: dict[str, Any]) -> None:
        nonlocal reads
        reads += 1
        time.sleep(0.02)  # the fault under test: a handler that blocks

    caplog.set_level(logging.WARNING, "mcruntime.client")
    rest.watch("/chunked").run(blocking)
    assert reads == 40
    slow = [r.getMessage() for r in caplog.records if "must not block" in r.getMessage()]
    assert len(slow) == 1, slow  # once in the report interval, not once per slow read
    assert slow[0].startswith("cluster=stub watch /chunked:"), slow
