"""Answers the server marks as text stay text: a pod's log whose lines are JSON is not a dict.

kube-apiserver answers ``pods/log`` with ``text/plain``; structured logging makes many
logs JSON lines, and a one-line log parsed as JSON would come back as a dict.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mcruntime import Cluster
from mcruntime.errors import BadRequest, Invalid
from tests._httpserver import Handler, serving

pytestmark = pytest.mark.timeout(30)

_LOG = b'{"level":"info","msg":"ready"}\n'


class _Kubelike(Handler):
    """Answers as kube-apiserver does: a log as text/plain, the rest as JSON."""

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        if self.path.startswith("/api/v1/namespaces/default/pods/p/log"):
            if "latin" in self.path:
                self.answer(200, "café\n".encode("latin-1"), "text/plain; charset=ISO-8859-1")
            else:
                self.answer(200, _LOG, "text/plain")
        else:
            self.answer(200, b'{"kind":"APIVersions","versions":["v1"]}')


@pytest.fixture
def kubelike() -> Iterator[Cluster]:
    with serving(_Kubelike, "kubelike") as cluster:
        yield cluster


def test_a_log_line_that_is_json_comes_back_as_text(kubelike: Cluster) -> None:
    got = kubelike.rest.request("GET", "/api/v1/namespaces/default/pods/p/log")
    assert got == _LOG.decode()
    # JSON answers are still decoded
    assert kubelike.rest.request("GET", "/api")["kind"] == "APIVersions"


def test_a_text_answer_is_decoded_in_the_charset_it_names(kubelike: Cluster) -> None:
    got = kubelike.rest.request("GET", "/api/v1/namespaces/default/pods/p/log", query={"latin": 1})
    assert got == "café\n"


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    from mcruntime.envtest import APIServer

    with APIServer("logs") as server:
        c = Cluster.from_kubeconfig(server.kubeconfig(), name="logs")
        c.client.create(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "web", "namespace": "default"},
                "spec": {
                    "containers": [
                        {"name": "app", "image": "nginx"},
                        {"name": "sidecar", "image": "busybox"},
                    ]
                },
            }
        )
        try:
            yield c
        finally:
            c.stop()


def test_the_log_of_a_pod_not_yet_on_a_node_is_empty_text(cluster: Cluster) -> None:
    log = cluster.client.subresource("log").get(
        "v1/Pod", "web", "default", query={"container": "app", "tailLines": 10}
    )
    assert log == ""


def test_log_options_reach_the_server(cluster: Cluster) -> None:
    logs = cluster.client.subresource("log")
    with pytest.raises(BadRequest, match="a container name must be specified for pod web"):
        logs.get("v1/Pod", "web", "default")
    with pytest.raises(BadRequest, match="container nope is not valid for pod web"):
        logs.get("v1/Pod", "web", "default", query={"container": "nope"})
    with pytest.raises(Invalid, match="tailLines"):
        logs.get("v1/Pod", "web", "default", query={"container": "app", "tailLines": -1})
    # a boolean option is sent as kube reads it
    assert logs.get("v1/Pod", "web", "default", query={"container": "app", "previous": False}) == ""
