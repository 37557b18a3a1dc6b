"""A call's error carries no credential in the locals of its traceback.

Error trackers record the local variables of every frame of an exception's traceback
(Sentry's default ``include_local_variables``, which its logging integration also does
for mcruntime's own ``log.exception`` lines), as ``pytest -l``, ``rich``'s
``show_locals`` and ``traceback.TracebackException(capture_locals=True)`` print them.
The frames of a failed call hold the request's headers: the cluster's bearer token was
in one of them, as was the credential an exec plugin or token file gave. The frames are
walked here as such a tracker does: mappings and sequences item by item, strings as they
are, anything else by its repr.
"""

from __future__ import annotations

import socket
import traceback
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from mcruntime import Cluster
from mcruntime.envtest import APIServer
from mcruntime.errors import APIError, Forbidden, MCRuntimeError, Unreachable

pytestmark = pytest.mark.timeout(60)

SECRET = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "default"}}


@pytest.fixture(scope="module")
def server() -> Iterator[APIServer]:
    with APIServer("tracebacks") as s:
        yield s


def _strings(value: Any, depth: int = 0) -> Iterator[str]:
    """What a tracker records of ``value``."""
    if depth > 6:
        return
    if isinstance(value, str):
        yield value
    elif isinstance(value, bytes | bytearray):
        yield bytes(value).decode(errors="replace")
    elif isinstance(value, Mapping):
        for k, v in value.items():
            yield from _strings(k, depth + 1)
            yield from _strings(v, depth + 1)
    elif isinstance(value, list | tuple | set | frozenset):
        for v in value:
            yield from _strings(v, depth + 1)
    else:
        try:
            yield repr(value)
        except Exception:  # a tracker shows a failed repr as such
            return


def _recorded(exc: BaseException) -> str:
    """The locals of every frame a tracker records of ``exc`` (and the exceptions it
    shows with it), and their rendering with ``capture_locals``."""
    out: list[str] = []
    seen: BaseException | None = exc
    while seen is not None:
        tb = seen.__traceback__
        while tb is not None:
            for name, value in tb.tb_frame.f_locals.items():
                out.append(name)
                out.extend(_strings(value))
            tb = tb.tb_next
        seen = seen.__cause__ or (None if seen.__suppress_context__ else seen.__context__)
    out.extend(traceback.TracebackException.from_exception(exc, capture_locals=True).format())
    return "\n".join(out)


def _failing(call: Callable[[], Any], expected: type[MCRuntimeError]) -> BaseException:
    with pytest.raises(expected) as err:
        call()
    return err.value


def _token_file_kubeconfig(server: APIServer, tmp_path: Path) -> dict[str, Any]:
    path = tmp_path / "token"
    path.write_text(server.read_only_token)
    path.chmod(0o600)
    config = server.kubeconfig(read_only=True)
    config["users"][0]["user"] = {"tokenFile": str(path)}
    return config


@pytest.mark.parametrize("source", ["token", "token-file"])
def test_a_refused_write_holds_no_token_in_its_traceback(
    server: APIServer, tmp_path: Path, source: str
) -> None:
    config = (
        server.kubeconfig(read_only=True)
        if source == "token"
        else _token_file_kubeconfig(server, tmp_path)
    )
    cluster = Cluster.from_kubeconfig(config, name="refused")
    try:
        err = _failing(lambda: cluster.uncached_client.create(dict(SECRET)), Forbidden)
    finally:
        cluster.stop()
    recorded = _recorded(err)
    assert "RESTClient" in recorded  # the client's frames are there, their locals walked
    assert server.read_only_token not in recorded


def test_a_refused_watch_holds_no_token_in_its_traceback(server: APIServer) -> None:
    config = server.kubeconfig(service_account="default/no-rights")
    token = config["users"][0]["user"]["token"]
    cluster = Cluster.from_kubeconfig(config, name="refused-watch")
    try:
        err = _failing(lambda: cluster.rest.watch("/api/v1/namespaces/default/secrets"), APIError)
    finally:
        cluster.stop()
    assert isinstance(err, Forbidden)
    assert token not in _recorded(err)


def test_an_unreachable_cluster_holds_no_token_in_its_traceback(server: APIServer) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed: nothing listens there
    config = server.kubeconfig()
    config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{port}"
    cluster = Cluster.from_kubeconfig(config, name="unreachable")
    try:
        err = _failing(
            lambda: cluster.uncached_client.list("v1/Secret", namespace="default", timeout=5),
            Unreachable,
        )
    finally:
        cluster.stop()
    assert server.token not in _recorded(err)
