"""A storage outage (``APIServer.storage_outage()``) as a client of kube-apiserver sees one.

Written to kube-apiserver's behaviour with etcd down: storage-backed requests wait
for the request deadline, then 504 from the timeout filter; the watch cache,
discovery and ``/version`` keep answering; the etcd health checks fail. Each test
uses a private server with a short request timeout; on other backends they skip.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client import ApiClient

from mcruntime._threads import start_thread, thread_name
from mcruntime.envtest import APIServer, Fleet, wait_for
from mcruntime.envtest.pytest_plugin import KubeBackend

from ._support import Raw, assert_stop_ends_the_waiting_request, configmap, raw

pytestmark = pytest.mark.timeout(60)

#: the server's request timeout here (kube-apiserver's --request-timeout, 60 s by default)
REQUEST_TIMEOUT = 1.0
#: what kube-apiserver's timeout filter writes: a Status without kind (no TypeMeta), the
#: JSON encoder's newline, and no Content-Type of its own (Go sniffs text/plain)
TIMEOUT_STATUS = {
    "metadata": {},
    "status": "Failure",
    "message": "Timeout: request did not complete within the allotted timeout",
    "reason": "Timeout",
    "details": {},
    "code": 504,
}


@pytest.fixture
def server(kube_backend: KubeBackend, make_envtest_server: Callable[..., APIServer]) -> APIServer:
    kube_backend.require_server()
    return make_envtest_server("outage", request_timeout=REQUEST_TIMEOUT)


@pytest.fixture
def slow_server(
    kube_backend: KubeBackend, make_envtest_server: Callable[..., APIServer]
) -> APIServer:
    """A server whose requests wait longer for storage than a test takes."""
    kube_backend.require_server()
    return make_envtest_server("outage-slow", request_timeout=30.0)


def _client_of(server: APIServer) -> Iterator[ApiClient]:
    from kubernetes import config

    api = config.new_client_from_config_dict(server.kubeconfig())
    api.configuration.retries = 0
    try:
        yield api
    finally:
        server.storage_restored()
        api.close()


@pytest.fixture
def api(server: APIServer) -> Iterator[ApiClient]:
    yield from _client_of(server)


@pytest.fixture
def slow_api(slow_server: APIServer) -> Iterator[ApiClient]:
    yield from _client_of(slow_server)


def timed(fn: Callable[[], Raw]) -> tuple[Raw, float]:
    began = time.monotonic()
    resp = fn()
    return resp, time.monotonic() - began


def assert_timed_out(resp: Raw, took: float, deadline: float = REQUEST_TIMEOUT) -> None:
    assert resp.status == 504, resp.data
    assert resp.headers["Content-Type"] == "text/plain; charset=utf-8"
    assert resp.data.endswith(b"\n")
    assert json.loads(resp.data) == TIMEOUT_STATUS
    assert deadline - 0.05 <= took < deadline + 2, took


CM = "/api/v1/namespaces/default/configmaps"


@pytest.mark.parametrize(
    ("method", "path", "query", "body"),
    [
        ("GET", f"{CM}/kept", [], None),
        ("GET", CM, [], None),
        ("GET", CM, [("resourceVersion", "1"), ("resourceVersionMatch", "Exact")], None),
        ("POST", CM, [], configmap("new")),
        ("PUT", f"{CM}/kept", [], configmap("kept", {"k": "changed"})),
        ("DELETE", f"{CM}/kept", [], None),
    ],
    ids=["get", "list", "list-exact", "create", "update", "delete"],
)
def test_requests_that_need_storage_wait_for_the_request_timeout_then_get_504(
    server: APIServer,
    api: ApiClient,
    method: str,
    path: str,
    query: list[tuple[str, Any]],
    body: Any,
) -> None:
    client.CoreV1Api(api).create_namespaced_config_map("default", configmap("kept", {"k": "v"}))
    server.storage_outage()
    assert server.storage_down
    content_type = "application/json" if body is not None else None
    resp, took = timed(
        lambda: raw(api, method, path, query=query, body=body, content_type=content_type)
    )
    assert_timed_out(resp, took)
    # nothing was written meanwhile
    server.storage_restored()
    kept = client.CoreV1Api(api).read_namespaced_config_map("kept", "default")
    assert kept.data == {"k": "v"}
    assert [
        c.metadata.name for c in client.CoreV1Api(api).list_namespaced_config_map("default").items
    ] == ["kept"]


def test_a_shorter_timeout_parameter_shortens_the_wait(
    slow_server: APIServer, slow_api: ApiClient
) -> None:
    slow_server.storage_outage()
    resp, took = timed(lambda: raw(slow_api, "GET", CM, query=[("timeout", "500ms")]))
    assert_timed_out(resp, took, 0.5)


def test_the_watch_cache_discovery_and_version_keep_answering(
    server: APIServer, api: ApiClient
) -> None:
    core = client.CoreV1Api(api)
    core.create_namespaced_config_map("default", configmap("kept"))
    server.storage_outage()
    quick: list[tuple[str, str, list[tuple[str, Any]]]] = [
        ("GET", "/version", []),
        ("GET", "/api", []),
        ("GET", "/api/v1", []),
        ("GET", "/apis", []),
        ("GET", CM, [("resourceVersion", "0")]),
        ("GET", f"{CM}/kept", [("resourceVersion", "0")]),
    ]
    for method, path, query in quick:
        began = time.monotonic()
        resp = raw(api, method, path, query=query)
        took = time.monotonic() - began
        assert resp.status == 200, (path, query, resp.data)
        assert took < REQUEST_TIMEOUT / 2, (path, took)
    listed = json.loads(raw(api, "GET", CM, query=[("resourceVersion", "0")]).data)
    assert [i["metadata"]["name"] for i in listed["items"]] == ["kept"]
    # who am I and what may I do: answered, never stored
    review = client.AuthorizationV1Api(api).create_self_subject_access_review(
        {"spec": {"resourceAttributes": {"verb": "get", "resource": "configmaps"}}}
    )
    assert review.status.allowed
    # a watch opens and stays open, silent (nothing changes without storage)
    resp, took = timed(
        lambda: raw(api, "GET", CM, query=[("watch", "true"), ("timeoutSeconds", "1")])
    )
    assert resp.status == 200
    assert b'"type":"ADDED"' in resp.data.replace(b" ", b"")  # the initial state, from the cache
    assert b'"type":"MODIFIED"' not in resp.data.replace(b" ", b"")


def test_a_watch_opened_before_the_outage_stays_open(server: APIServer, api: ApiClient) -> None:
    core = client.CoreV1Api(api)
    rv = core.list_namespaced_config_map("default").metadata.resource_version
    got: list[bytes] = []
    done = threading.Event()

    def watch() -> None:
        try:
            resp = raw(
                api,
                "GET",
                CM,
                query=[("watch", "true"), ("resourceVersion", rv), ("timeoutSeconds", "3")],
                timeout=10,
            )
            got.append(resp.data)
        finally:
            done.set()

    start_thread(watch, thread_name("conformance-watch", "outage"))
    server.storage_outage()
    assert not done.wait(1.5)  # open, silent
    server.storage_restored()
    core.create_namespaced_config_map("default", configmap("after"))
    assert done.wait(10)
    assert b'"after"' in got[0]


FAILED_READYZ = (
    "[+]ping ok\n[+]log ok\n[-]etcd failed: reason withheld\n"
    "[-]etcd-readiness failed: reason withheld\n"
)


@pytest.mark.parametrize("verbose", [False, True], ids=["plain", "verbose"])
@pytest.mark.parametrize("endpoint", ["readyz", "livez", "healthz"])
def test_health_endpoints_name_the_failed_etcd_checks(
    server: APIServer, api: ApiClient, endpoint: str, verbose: bool
) -> None:
    """kube-apiserver's handleRootHealth is always verbose on failure: every check's line,
    then ``<endpoint> check failed`` (http.Error adds the newline), 500."""
    server.storage_outage()
    resp = raw(api, "GET", f"/{endpoint}", query=[("verbose", "")] if verbose else [])
    assert resp.status == 500
    assert resp.headers["Content-Type"] == "text/plain; charset=utf-8"
    assert resp.headers["X-Content-Type-Options"] == "nosniff"
    text = resp.data.decode()
    lines = text.splitlines()
    assert text.endswith(f"\n{endpoint} check failed\n")
    failed = [line for line in lines if line.startswith("[-]")]
    if endpoint == "readyz":
        assert text.startswith(FAILED_READYZ)
        assert failed == [
            "[-]etcd failed: reason withheld",
            "[-]etcd-readiness failed: reason withheld",
        ]
    else:
        assert failed == ["[-]etcd failed: reason withheld"]
    assert all(line.startswith("[+]") for line in lines[:-1] if line not in failed)


def test_a_single_etcd_check_says_what_failed_and_others_pass(
    server: APIServer, api: ApiClient
) -> None:
    server.storage_outage()
    for path in ("/readyz/etcd", "/livez/etcd", "/readyz/etcd-readiness"):
        one = raw(api, "GET", path)
        assert one.status == 500, path
        assert one.data == (
            b"internal server error: error getting data from etcd: context deadline exceeded\n"
        )
    assert (raw(api, "GET", "/readyz/ping").status, raw(api, "GET", "/readyz/ping").data) == (
        200,
        b"ok",
    )
    # excluding the failed checks makes the rest pass
    query = [("exclude", "etcd"), ("exclude", "etcd-readiness")]
    resp = raw(api, "GET", "/readyz", query=query)
    assert (resp.status, resp.data) == (200, b"ok")
    verbose = raw(api, "GET", "/readyz", query=[("exclude", "etcd")])
    assert verbose.status == 500
    assert "[+]etcd excluded: ok" in verbose.data.decode().splitlines()


def test_restored_storage_serves_the_waiting_requests_at_once(
    slow_server: APIServer, slow_api: ApiClient
) -> None:
    slow_server.storage_outage()
    answers: list[Raw] = []
    writer = start_thread(
        lambda: answers.append(
            raw(
                slow_api,
                "POST",
                CM,
                body=configmap("waited"),
                content_type="application/json",
                timeout=20,
            )
        ),
        thread_name("conformance-writer", "outage"),
    )
    writer.join(0.5)
    assert writer.is_alive() and not answers
    slow_server.storage_restored()
    restored = time.monotonic()
    writer.join(10)
    assert time.monotonic() - restored < 1.0
    assert answers[0].status == 201, answers[0].data
    assert not slow_server.storage_down
    ready = raw(slow_api, "GET", "/readyz")
    assert (ready.status, ready.data) == (200, b"ok")
    read = client.CoreV1Api(slow_api).read_namespaced_config_map("waited", "default")
    assert read.metadata.name == "waited"


def test_stop_ends_the_waiting_requests_and_the_outage_outlasts_a_restart(
    slow_server: APIServer, slow_api: ApiClient
) -> None:
    slow_server.storage_outage()
    assert_stop_ends_the_waiting_request(slow_server, lambda: raw(slow_api, "GET", CM, timeout=20))
    slow_server.start()
    assert slow_server.storage_down  # a restarted kube-apiserver finds etcd still down
    assert raw(slow_api, "GET", "/readyz").status == 500


def test_a_fleet_takes_one_members_storage_away(
    kube_backend: KubeBackend, make_envtest_fleet: Callable[..., Fleet]
) -> None:
    kube_backend.require_server()
    fleet = make_envtest_fleet(2, prefix="outage")
    down, up = fleet.names
    assert fleet.storage_outage(down) is fleet[down]
    try:
        assert fleet[down].storage_down and not fleet[up].storage_down
        wait_for(lambda: not fleet[up].storage_down, 1, "the other member untouched")
    finally:
        assert fleet.storage_restored(down) is fleet[down]
    assert not fleet[down].storage_down


def drop_readyz_from_the_bootstrap_roles(api: ApiClient) -> None:
    """Take ``/readyz`` out of the two bootstrap ClusterRoles that grant it to everyone."""
    for name in ("system:public-info-viewer", "system:discovery"):
        path = f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{name}"
        role = raw(api, "GET", path).json()
        for rule in role["rules"]:
            if "nonResourceURLs" in rule:
                rule["nonResourceURLs"] = [u for u in rule["nonResourceURLs"] if u != "/readyz"]
        resp = raw(api, "PUT", path, body=role, content_type="application/json")
        assert resp.status == 200, resp.data


def test_a_service_account_whose_roles_no_longer_grant_readyz_is_forbidden_it(
    server: APIServer, api: ApiClient
) -> None:
    from kubernetes import config

    prober = config.new_client_from_config_dict(server.kubeconfig(service_account="default/prober"))
    try:
        assert (raw(prober, "GET", "/readyz").status, raw(prober, "GET", "/readyz").data) == (
            200,
            b"ok",
        )
        drop_readyz_from_the_bootstrap_roles(api)
        resp = raw(prober, "GET", "/readyz")
        assert resp.status == 403, resp.data
        assert resp.json() == {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": 'forbidden: User "system:serviceaccount:default:prober" '
            'cannot get path "/readyz"',
            "reason": "Forbidden",
            "details": {},
            "code": 403,
        }
        assert raw(prober, "GET", "/livez").status == 200  # still granted
        assert raw(api, "GET", "/readyz").status == 200  # the admin may get any path
    finally:
        prober.close()
