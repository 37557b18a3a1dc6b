"""The event loop thread the APIServers of a process share: a forked child starts its own,
and a call it does not finish in time says what it waited for."""

from __future__ import annotations

import asyncio
import http.client
import multiprocessing
from multiprocessing.connection import Connection
from typing import Any

import pytest

from mcruntime.envtest import APIServer, _loop

pytestmark = pytest.mark.timeout(30)


def _version(server: APIServer) -> int:
    """The status of ``GET /version`` on ``server``, over real HTTP(S)."""
    host, port = server.url.split("://")[1].split(":")
    if server.url.startswith("https"):
        conn: http.client.HTTPConnection = http.client.HTTPSConnection(
            host, int(port), context=server.client_ssl_context(), timeout=10
        )
    else:
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        conn.request("GET", "/version", headers={"Authorization": f"Bearer {server.token}"})
        return conn.getresponse().status
    finally:
        conn.close()


def _start_a_server(conn: Connection) -> None:
    """In the forked child: start an APIServer, ask it its version, say how it went."""
    try:
        server = APIServer("child").start()
        try:
            conn.send(f"answered {_version(server)}")
        finally:
            server.stop()
    except BaseException as exc:
        conn.send(f"{type(exc).__name__}: {exc}")
    finally:
        conn.close()


# forking a process with threads is what the test is about: Python 3.12+ warns of it
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_child_forked_while_a_server_runs_starts_a_server_of_its_own(
    envtest_server: Any,
) -> None:
    """Before, the child found the parent's loop in the module's globals, without its
    thread, and waited 30 s for it before a bare ``TimeoutError('')``."""
    assert _loop.loop_or_none() is not None  # the parent's loop runs
    ctx = multiprocessing.get_context("fork")
    ours, theirs = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_start_a_server, args=(theirs,), name="test/fork-child")
    child.start()
    theirs.close()
    try:
        assert ours.poll(10), "the child said nothing within 10 s"
        said = ours.recv()
        assert said == "answered 200", said
    finally:
        child.join(10)
        if child.is_alive():
            child.kill()
            child.join(5)
    assert child.exitcode == 0
    assert _version(envtest_server) == 200  # the parent's server still answers


async def _never() -> None:
    await asyncio.Event().wait()


async def _own_timeout() -> None:
    raise TimeoutError("the coroutine's own")


def test_a_call_not_finished_in_time_names_what_it_waited_for() -> None:
    _loop.acquire()
    try:
        with pytest.raises(TimeoutError) as err:
            _loop.run(_never(), timeout=0.05)
        assert str(err.value) == (
            "envtest: _never did not finish on the envtest event loop within 0.05s "
            "(its thread is busy)"
        )
        with pytest.raises(TimeoutError, match="^the coroutine's own$"):
            _loop.run(_own_timeout(), timeout=5)
    finally:
        _loop.release()
