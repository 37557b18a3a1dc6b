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
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from mcruntime import Cluster
from mcruntime.envtest import APIServer
from mcruntime.errors import APIError, ConfigError, Forbidden, MCRuntimeError, Unreachable
from tests._tracebacks import recorded

pytestmark = pytest.mark.timeout(60)

SECRET = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "default"}}


@pytest.fixture(scope="module")
def server() -> Iterator[APIServer]:
    with APIServer("tracebacks") as s:
        yield s


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
    said = recorded(err)
    assert "RESTClient" in said  # the client's frames are there, their locals walked
    assert server.read_only_token not in said


def test_a_refused_watch_holds_no_token_in_its_traceback(server: APIServer) -> None:
    config = server.kubeconfig(service_account="default/no-rights")
    token = config["users"][0]["user"]["token"]
    cluster = Cluster.from_kubeconfig(config, name="refused-watch")
    try:
        err = _failing(lambda: cluster.rest.watch("/api/v1/namespaces/default/secrets"), APIError)
    finally:
        cluster.stop()
    assert isinstance(err, Forbidden)
    assert token not in recorded(err)


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
    assert server.token not in recorded(err)


@pytest.mark.parametrize("fault", ["unknown context", "missing user", "unusable key"])
def test_a_kubeconfig_file_refused_at_load_leaves_its_secrets_out_of_the_traceback(
    server: APIServer, tmp_path: Path, fault: str
) -> None:
    # the loader's frames held the file's whole content (every user's token and key) as
    # locals: a program stopped at its start by a broken kubeconfig sent them to its tracker
    config = server.kubeconfig(auth="certificate")
    key = config["users"][0]["user"]["client-key-data"]
    config["users"].append({"name": "other", "user": {"token": server.token}})
    context = None
    if fault == "unknown context":
        context = "nope"
    elif fault == "missing user":
        config["contexts"][0]["context"]["user"] = "missing"
    else:
        config["users"][0]["user"]["client-key-data"] = key[:-40] + "A" * 40
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(config))
    err = _failing(lambda: Cluster.from_kubeconfig(path, context, name="broken"), ConfigError)
    said = recorded(err)
    assert "load_config" in said  # the loading's entry is there, its locals walked
    for secret in (server.token, key[40:80], key[-80:-40]):
        assert secret not in said
