"""A member behind a proxy that answers with its own page: typed calls raise, never return it.

An authenticating proxy (OAuth2 proxy, Rancher, a captive portal) whose session expired
answers every path ``200 text/html``. client-go decodes a typed answer with the negotiated
serializer and fails on anything else (k8s.io/client-go rest/request.go
``transformResponse``: "Body was not decodable"): a read, a write, a list or a watch gets an
error, never the page as the object. Raw requests keep answering text (test_text_answers.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from mcruntime import Cluster
from mcruntime.cache import Informer
from mcruntime.envtest import wait_for
from mcruntime.errors import NotKubernetesAnswer, ServerError, Unauthorized, Unreachable
from tests._httpserver import Handler, serving
from tests.integration.cache._cache_helpers import CONFIGMAPS

pytestmark = pytest.mark.timeout(30)

_PAGE = b"<html><body>Please log in <input name=csrf value=SECRET-TOKEN></body></html>"
_CM = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "default"}}


class _LoginPage(Handler):
    """Every path answers 200 with an HTML login page, as an expired proxy session does;
    ``/list`` paths answer a JSON list and ``/empty`` ones nothing."""

    def _page(self) -> None:
        if "namespaces/listed" in self.path:
            self.answer(200, b'[{"kind": "ConfigMap"}]')
        elif "namespaces/empty" in self.path:
            self.answer(200, b"")
        elif "namespaces/bad-gateway" in self.path:  # a load balancer with no live backend
            self.answer(502, _PAGE, "text/html")
        elif "namespaces/session-expired" in self.path:  # an authenticating proxy
            self.answer(401, _PAGE, "text/html; charset=utf-8")
        elif "namespaces/plain" in self.path:  # an API server's own plain-text error
            self.answer(503, b"the storage is down", "text/plain; charset=utf-8")
        else:
            self.answer(200, _PAGE, "text/html; charset=utf-8")

    do_GET = do_POST = do_PUT = do_PATCH = _page  # noqa: N815 (http.server's names)


@pytest.fixture(scope="module")
def proxied() -> Iterator[Cluster]:
    with serving(_LoginPage, "proxied") as cluster:
        yield cluster


_CALLS: dict[str, tuple[str, str, Callable[[Cluster], Any]]] = {
    "get": (
        "GET",
        "/configmaps/x",
        lambda c: c.uncached_client.get("v1/ConfigMap", "x", "default"),
    ),
    "get metadata": (
        "GET",
        "/configmaps/x",
        lambda c: c.uncached_client.get("v1/ConfigMap", "x", "default", metadata_only=True),
    ),
    "list": ("GET", "/configmaps", lambda c: c.uncached_client.list("v1/ConfigMap", "default")),
    "create": ("POST", "/configmaps", lambda c: c.uncached_client.create(dict(_CM))),
    "update": ("PUT", "/configmaps/x", lambda c: c.uncached_client.update(dict(_CM))),
    "patch": (
        "PATCH",
        "/configmaps/x",
        lambda c: c.uncached_client.patch("v1/ConfigMap", "x", {"data": {"a": "b"}}, "default"),
    ),
    "watch": (
        "WATCH",
        "/configmaps",
        lambda c: c.rest.watch("/api/v1/namespaces/default/configmaps"),
    ),
}


@pytest.mark.parametrize("call", list(_CALLS))
def test_a_login_page_is_an_error_naming_the_cluster_call_status_and_type_not_the_body(
    proxied: Cluster, call: str
) -> None:
    method, path, do = _CALLS[call]
    with pytest.raises(NotKubernetesAnswer) as info:
        do(proxied)
    err = info.value
    assert str(err) == (
        f"[cluster proxied] {method} /api/v1/namespaces/default{path}: answered 200 with "
        "text/html, not a Kubernetes object (a proxy in front of the API server?)"
    )
    assert (err.cluster_name, err.status, err.content_type) == ("proxied", 200, "text/html")
    # the API server was not reached: callers that wait for a cluster to answer wait for this
    assert isinstance(err, Unreachable)
    assert "SECRET" not in str(err) and "html>" not in str(err)


@pytest.mark.parametrize(
    ("namespace", "what"),
    [
        ("listed", "JSON that is not an object (application/json)"),
        ("empty", "an empty body (application/json)"),
    ],
)
def test_a_json_list_or_an_empty_answer_is_no_object_either(
    proxied: Cluster, namespace: str, what: str
) -> None:
    with pytest.raises(NotKubernetesAnswer, match=f"answered 200 with {re.escape(what)}"):
        proxied.uncached_client.get("v1/ConfigMap", "x", namespace)
    with pytest.raises(NotKubernetesAnswer, match="not a Kubernetes object"):
        proxied.uncached_client.list("v1/ConfigMap", namespace)


@pytest.mark.parametrize(
    ("namespace", "error", "status"),
    [
        ("bad-gateway", ServerError, "502 Bad Gateway"),
        ("session-expired", Unauthorized, "401 Unauthorized"),
    ],
)
@pytest.mark.parametrize("call", ["get", "watch"])
def test_an_error_page_is_the_statuss_error_naming_its_type_not_its_body(
    proxied: Cluster, namespace: str, error: type[Exception], status: str, call: str
) -> None:
    """A load balancer's 502 page, an authenticating proxy's 401 login page: the error of
    the status (retried, or reported, as the status says), its message the page's type,
    never the page (it was the message, verbatim: the first 500 characters of the HTML,
    tokens included)."""
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    with pytest.raises(error) as info:
        if call == "get":
            proxied.uncached_client.get("v1/ConfigMap", "x", namespace)
        else:
            proxied.rest.watch(path)
    assert str(info.value) == (
        f"[cluster proxied] answered {status} with text/html, not a Kubernetes Status (a "
        "proxy or load balancer in front of the API server?)"
    )
    assert info.value.status == int(status.split()[0])  # type: ignore[attr-defined]


def test_a_plain_text_error_body_is_still_its_message(proxied: Cluster) -> None:
    """An API server's own errors in plain text (a failed /readyz, "404 page not found")
    say what is wrong: they stay the message."""
    with pytest.raises(ServerError, match=r"^\[cluster proxied\] the storage is down$"):
        proxied.uncached_client.get("v1/ConfigMap", "x", "plain")


class _BrokenWatch(Handler):
    """Lists at once; a watch's stream carries a proxy's page as a line (``page`` in the
    path), or chunking that does not parse (``chunks``)."""

    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # noqa: N802
        if "watch=true" not in self.path:
            self.answer(
                200, b'{"kind":"ConfigMapList","metadata":{"resourceVersion":"7"},"items":[]}'
            )
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        event = b'{"type":"ADDED","object":{"kind":"ConfigMap","metadata":{"name":"a"}}}\n'
        if "page" in self.path:
            body = b"%x\r\n%s\r\n" % (len(event), event) + b"%x\r\n%s\r\n" % (
                len(_PAGE) + 1,
                _PAGE + b"\n",
            )
        else:
            body = b"%x\r\n%s\r\n" % (len(event), event) + b"SECRET-TOKEN\r\n"
        self.wfile.write(body + b"0\r\n\r\n")
        self.close_connection = True


@pytest.mark.parametrize(
    ("namespace", "what", "shared", "before"),
    [
        ("page", "a watch stream with a line that is not JSON", True, ["a"]),
        ("page", "a watch stream with a line that is not JSON", False, ["a"]),
        # (the bytes of a read whose chunking breaks are not delivered: here, all of them)
        ("chunks", "a watch stream whose chunked encoding is broken", True, []),
    ],
)
def test_a_watch_stream_that_is_no_events_ends_naming_the_cluster_and_watch_not_the_body(
    namespace: str, what: str, shared: bool, before: list[str]
) -> None:
    """A proxy's page in a watch's stream, or chunking that does not parse: the stream ends
    with `NotKubernetesAnswer` naming the cluster and the watch, after the events before it,
    never quoting the body. It ended with the decoder's own ``JSONDecodeError: unexpected
    character ...`` or ``ValueError: bad chunk size b'SECRET-TOKEN'``."""
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    events: list[dict[str, Any]] = []
    with serving(_BrokenWatch, "broken-watch") as cluster:
        stream = cluster.rest.watch(path)
        with pytest.raises(NotKubernetesAnswer) as info:
            if shared:  # the thread that reads every watch
                stream.run(events.append)
            else:
                events.extend(stream)
    assert [e["object"]["metadata"]["name"] for e in events] == before
    assert str(info.value) == (
        f"[cluster broken-watch] WATCH {path}: answered 200 with {what} (application/json), "
        "not a Kubernetes object (a proxy in front of the API server?)"
    )
    assert "SECRET" not in str(info.value)


def test_a_raw_request_still_gets_the_page_as_text(proxied: Cluster) -> None:
    """`RESTClient.request` without ``expect_object`` returns what the server marks as text
    (a pod's log, /healthz): only the calls that must answer an object refuse it."""
    assert proxied.rest.request("GET", "/healthz") == _PAGE.decode()


def test_an_informer_s_list_of_a_login_page_fails_with_it_and_is_retried(proxied: Cluster) -> None:
    """The informer names the problem (it said ``AttributeError: 'str' object has no
    attribute 'get'``), and retries with backoff as for any failed list."""
    inf = Informer(proxied.rest, CONFIGMAPS, cluster_name="proxied")
    inf.start()
    try:
        wait_for(lambda: inf.last_error is not None, what="the list failed")
        assert isinstance(inf.last_error, NotKubernetesAnswer)
        assert not inf.has_synced()
    finally:
        inf.stop()


def test_lease_reads_and_writes_behind_a_login_page_fail_with_it(proxied: Cluster) -> None:
    """A leader election's Lease reads and writes refuse the page too: taken for the Lease, it
    failed deep in the elector with a TypeError that named nothing."""
    from mcruntime.leaderelection import LeaseClient, LeaseRecord

    leases = LeaseClient(proxied, "default")
    record = LeaseRecord(holder="me", lease_duration_seconds=15)
    for call in (
        lambda: leases.get("lock", timeout=2),
        lambda: leases.list(timeout=2),
        lambda: leases.create("lock", record, timeout=2),
        lambda: leases.update({"metadata": {"name": "lock"}}, record, timeout=2),
    ):
        with pytest.raises(NotKubernetesAnswer, match="not a Kubernetes object"):
            call()
