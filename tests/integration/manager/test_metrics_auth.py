"""A secured metrics endpoint: HTTPS, and scrapes let in by the local cluster's RBAC.

As kubebuilder scaffolds it with controller-runtime: Prometheus scrapes with its service
account's token, the manager asks the local API server whom the token belongs to (a
TokenReview) and whether that user may ``get /metrics`` (a SubjectAccessReview). The
API server here is envtest over real HTTPS, with the real ``kubernetes`` client.
"""

from __future__ import annotations

import logging
import socket
import ssl
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import mcruntime
from mcruntime.envtest import APIServer, wait_for
from mcruntime.manager import ManagerOptions
from mcruntime.webhook import generate_certificates

pytestmark = pytest.mark.timeout(90)

RBAC = "rbac.authorization.k8s.io/v1"
#: what Prometheus is told when it scrapes a self-signed endpoint (kubebuilder's default)
INSECURE = ssl._create_unverified_context()  # noqa: S323


def scrape(
    mgr: mcruntime.Manager,
    token: str | None = None,
    *,
    context: ssl.SSLContext = INSECURE,
    scheme: str = "https",
) -> tuple[int, str]:
    address = mgr.metrics_address
    assert address is not None
    req = urllib.request.Request(f"{scheme}://127.0.0.1:{address[1]}/metrics")
    if token is not None:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=20, context=context) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def service_account(server: APIServer, name: str, *, metrics_reader: bool) -> str:
    """A service account's token; with ``metrics_reader``, bound to a ClusterRole that may
    get /metrics (kubebuilder's ``metrics-reader``)."""
    client = mcruntime.Cluster.from_kubeconfig(server.kubeconfig(), name="setup").client
    client.create(
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": name, "namespace": "default"},
        }
    )
    if metrics_reader:
        role = f"{name}:metrics-reader"
        client.create(
            {
                "apiVersion": RBAC,
                "kind": "ClusterRole",
                "metadata": {"name": role},
                "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}],
            }
        )
        client.create(
            {
                "apiVersion": RBAC,
                "kind": "ClusterRoleBinding",
                "metadata": {"name": role},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": role,
                },
                "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": "default"}],
            }
        )
    return server.service_account_token(f"default/{name}")


@pytest.fixture
def manager(envtest_server: APIServer) -> Iterator[mcruntime.Manager]:
    mgr = mcruntime.Manager(
        envtest_server.kubeconfig(),
        options=ManagerOptions(
            metrics_bind_address="127.0.0.1:0", metrics_secure=True, metrics_auth=True
        ),
    )
    mgr.start()
    yield mgr
    mgr.stop()


def test_a_scrape_is_let_in_by_the_local_clusters_rbac(
    envtest_server: APIServer, manager: mcruntime.Manager, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    reader = service_account(envtest_server, "prometheus", metrics_reader=True)
    stranger = service_account(envtest_server, "stranger", metrics_reader=False)

    status, body = scrape(manager, reader)
    assert status == 200
    assert "controller_runtime_active_workers" in body or "# HELP" in body
    assert scrape(manager) == (401, "Unauthorized\n")
    assert scrape(manager, "not-a-token") == (401, "Unauthorized\n")
    status, body = scrape(manager, stranger)
    assert status == 403
    assert (
        body
        == 'forbidden: User "system:serviceaccount:default:stranger" cannot get path "/metrics"\n'
    )
    # over plain HTTP the endpoint answers nothing (and no token is sent in clear)
    with pytest.raises((urllib.error.URLError, ConnectionError)):
        scrape(manager, reader, scheme="http")
    for token in (reader, stranger):
        assert not any(token in r.getMessage() for r in caplog.records)


def test_answers_are_cached_and_a_hung_api_server_fails_a_scrape_in_time(
    envtest_server: APIServer, manager: mcruntime.Manager, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="mcruntime.manager")
    reader = service_account(envtest_server, "prometheus", metrics_reader=True)
    late = [service_account(envtest_server, f"late-{i}", metrics_reader=True) for i in range(2)]
    assert scrape(manager, reader)[0] == 200
    envtest_server.freeze()  # accepts connections, never answers
    try:
        # what was reviewed is remembered: Prometheus' scrapes every 15 s cost no review
        assert scrape(manager, reader)[0] == 200
        caplog.clear()
        for token in late:  # new tokens need the API server
            began = time.monotonic()
            status, body = scrape(manager, token)
            assert (status, body) == (503, "the API server did not answer the review\n")
            assert time.monotonic() - began < 9  # the review's 5 s deadline, and no retry past it
        warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(warnings) == 1, [r.getMessage() for r in warnings]
        assert (
            warnings[0]
            .getMessage()
            .startswith("cluster=local metrics: reviewing the scraper's token failed: ")
        )
        assert "the scrape is refused with 503" in warnings[0].getMessage()
    finally:
        envtest_server.thaw()
    assert scrape(manager, late[0])[0] == 200
    recoveries = [r.getMessage() for r in caplog.records if "works again" in r.getMessage()]
    assert recoveries == [
        "cluster=local metrics: reviewing scrapes works again after 2 failed attempts"
    ]


def test_a_rejected_token_is_remembered_a_scraper_retrying_it_costs_no_review(
    envtest_server: APIServer, manager: mcruntime.Manager
) -> None:
    assert scrape(manager, "not-a-token") == (401, "Unauthorized\n")
    envtest_server.freeze()  # a review now would wait out its 5 s deadline and fail with 503
    try:
        began = time.monotonic()
        for _ in range(3):
            assert scrape(manager, "not-a-token") == (401, "Unauthorized\n")
        assert time.monotonic() - began < 2
    finally:
        envtest_server.thaw()


def test_concurrent_scrapes_with_one_new_token_wait_for_one_review(
    envtest_server: APIServer,
) -> None:
    from mcruntime.manager._metrics_auth import Denied, MetricsAuth

    cluster = mcruntime.Cluster.from_kubeconfig(envtest_server.kubeconfig(), name="local")
    auth = MetricsAuth(cluster, timeout=1.0)
    sent: list[str] = []
    review = auth._review

    def counted(path: str, body: Any, what: str) -> Any:  # a spy: the review is the real one
        sent.append(path)
        return review(path, body, what)

    auth._review = counted  # type: ignore[method-assign]
    answers: list[int] = []

    def scrape() -> None:
        try:
            auth.check("Bearer one-new-token", "/metrics")
        except Denied as denied:
            answers.append(denied.status)

    envtest_server.freeze()  # the first review waits out its deadline: the others arrive
    try:
        scrapes = [threading.Thread(target=scrape) for _ in range(20)]
        for t in scrapes:
            t.start()
        for t in scrapes:
            t.join(10)
    finally:
        envtest_server.thaw()
    assert answers == [503] * 20
    assert len(sent) == 1, sent


def test_a_manager_that_may_not_review_says_so(
    envtest_server: APIServer, caplog: pytest.LogCaptureFixture
) -> None:
    reader = service_account(envtest_server, "prometheus", metrics_reader=True)
    mcruntime.Cluster.from_kubeconfig(envtest_server.kubeconfig(), name="setup").client.create(
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "operator", "namespace": "default"},
        }
    )
    # the operator's own credentials, without system:auth-delegator
    mgr = mcruntime.Manager(
        envtest_server.kubeconfig(service_account="default/operator"),
        options=ManagerOptions(
            metrics_bind_address="127.0.0.1:0", metrics_secure=True, metrics_auth=True
        ),
    )
    with mgr:
        assert scrape(mgr, reader) == (500, "the API server refused the review\n")
    warning = next(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    assert "tokenreviews" in warning and "forbidden" in warning.lower()
    assert reader not in warning


def test_a_certificate_from_a_directory_is_verified_and_reloaded(
    envtest_server: APIServer, tmp_path: Path
) -> None:
    first = generate_certificates(["127.0.0.1"])
    first.write(tmp_path)
    mgr = mcruntime.Manager(
        envtest_server.kubeconfig(),
        options=ManagerOptions(
            metrics_bind_address="127.0.0.1:0", metrics_secure=True, metrics_cert_dir=str(tmp_path)
        ),
    )
    with mgr:
        trusting_first = ssl.create_default_context(cadata=first.ca_pem.decode())
        assert scrape(mgr, context=trusting_first)[0] == 200
        second = generate_certificates(["127.0.0.1"])  # another CA: cert-manager rotated it
        second.write(tmp_path)
        trusting_second = ssl.create_default_context(cadata=second.ca_pem.decode())

        def served_by_second() -> bool:
            try:
                return scrape(mgr, context=trusting_second)[0] == 200
            except urllib.error.URLError:
                return False

        wait_for(served_by_second, 10, "the rotated certificate served")
        with pytest.raises(urllib.error.URLError):
            scrape(mgr, context=trusting_first)


def test_a_silent_connection_neither_holds_a_thread_nor_the_stop(
    envtest_server: APIServer,
) -> None:
    mgr = mcruntime.Manager(
        envtest_server.kubeconfig(),
        options=ManagerOptions(metrics_bind_address="127.0.0.1:0", metrics_secure=True),
    )
    mgr.start()
    address = mgr.metrics_address
    assert address is not None
    silent = socket.create_connection(("127.0.0.1", address[1]))  # no TLS handshake, ever
    try:
        wait_for(
            lambda: any(t.name.endswith("metrics-connection") for t in threading.enumerate()),
            10,
            "the silent connection's thread",
        )
        began = time.monotonic()
        mgr.stop()
        assert time.monotonic() - began < 5
        # stop() joined them: no thread of the server is left, the silent one's included
        assert not [t.name for t in threading.enumerate() if "metrics" in t.name]
    finally:
        silent.close()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"metrics_auth": True}, "metrics_auth needs metrics_secure"),
        ({"metrics_cert_dir": "/tmp"}, "metrics_cert_dir is set but metrics_secure is not"),
    ],
)
def test_options_that_cannot_work_are_refused(
    envtest_server: APIServer, options: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        mcruntime.Manager(
            envtest_server.kubeconfig(),
            options=ManagerOptions(metrics_bind_address="127.0.0.1:0", **options),  # type: ignore[arg-type]
        )


def test_metrics_auth_needs_a_local_cluster() -> None:
    from mcruntime.providers.clusters import Provider

    with pytest.raises(ValueError, match="metrics_auth needs a local cluster"):
        mcruntime.Manager(
            provider=Provider(),
            options=ManagerOptions(metrics_secure=True, metrics_auth=True),
        )
