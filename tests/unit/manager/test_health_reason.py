"""What a 5xx answer to the health probe's ``GET /readyz`` says in the cluster's reason."""

from __future__ import annotations

from mcruntime.errors import APIError
from mcruntime.manager._health import _not_ready

KUBE_READYZ_500 = (
    b"[+]ping ok\n[+]log ok\n[-]etcd failed: reason withheld\n"
    b"[-]etcd-readiness failed: reason withheld\n[+]informer-sync ok\n"
    b"[+]poststarthook/start-apiextensions-informers ok\n[+]shutdown ok\nreadyz check failed\n"
)


def test_kube_apiservers_failed_checks_are_named() -> None:
    exc = APIError.from_response(500, KUBE_READYZ_500, cluster_name="eu-1")
    assert _not_ready(exc) == "not ready: etcd, etcd-readiness failed"


def test_a_5xx_that_names_no_check_gives_its_status_and_nothing_of_its_body() -> None:
    body = b"<html>upstream connect error; token=s3cr3t</html>"
    reason = _not_ready(APIError.from_response(503, body, cluster_name="eu-1"))
    assert reason == "not ready: GET /readyz answered 503"
    status = b'{"kind":"Status","message":"Timeout: token s3cr3t","reason":"Timeout","code":504}'
    assert _not_ready(APIError.from_response(504, status)) == (
        "not ready: GET /readyz answered 504"
    )


def test_a_check_line_is_read_only_as_a_name() -> None:
    body = b"[-]etcd failed: reason withheld\n[-]$(evil) failed\n[-]x failed\nreadyz check failed\n"
    assert _not_ready(APIError.from_response(500, body)) == "not ready: etcd, x failed"


#: the checks of a kube-apiserver 1.30's /readyz, in its order; it answers a line for each
KUBE_CHECKS = [
    "ping", "log", "etcd", "etcd-readiness", "informer-sync",
    *(
        f"poststarthook/{hook}"
        for hook in (
            "start-apiserver-admission-initializer", "generic-apiserver-start-informers",
            "priority-and-fairness-config-consumer", "priority-and-fairness-filter",
            "storage-object-count-tracker-hook", "start-apiextensions-informers",
            "start-apiextensions-controllers", "crd-informer-synced",
            "start-system-namespaces-controller", "start-cluster-authentication-info-controller",
            "start-kube-apiserver-identity-lease-controller",
            "start-legacy-token-tracking-controller", "start-service-ip-repair-controllers",
            "rbac/bootstrap-roles", "scheduling/bootstrap-system-priority-classes",
            "priority-and-fairness-config-producer", "bootstrap-controller",
            "aggregator-reload-proxy-client-cert", "start-kube-aggregator-informers",
            "apiservice-registration-controller", "apiservice-discovery-controller",
            "kube-apiserver-autoregistration",
        )
    ),
    "autoregister-completion", "shutdown",
]  # fmt: skip


def test_a_check_failing_late_in_a_long_answer_is_named() -> None:
    late = {"poststarthook/rbac/bootstrap-roles", "autoregister-completion"}
    body = (
        "".join(
            f"[-]{c} failed: reason withheld\n" if c in late else f"[+]{c} ok\n"
            for c in KUBE_CHECKS
        )
        + "readyz check failed\n"
    )
    assert len(body) > 1000  # longer than an error keeps of a plain body
    exc = APIError.from_response(500, body.encode(), cluster_name="eu-1")
    assert _not_ready(exc) == (
        "not ready: poststarthook/rbac/bootstrap-roles, autoregister-completion failed"
    )
    assert "[+]" not in exc.message  # the passing checks are not the error's message
