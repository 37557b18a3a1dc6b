"""Webhooks built with ``webhook_managed_by`` serve every engaged cluster, installed per cluster.

A fleet of embedded API servers calls the manager's webhook server; each
request names its cluster; a cluster that leaves loses its configuration and
is refused by the server.
"""

from __future__ import annotations

import json
import logging
import ssl
import threading
import time
import urllib.request
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest
from kubernetes import client, config
from kubernetes.client import ApiException

import mcruntime
from mcruntime._threads import mcruntime_threads
from mcruntime.client import Model, Resource
from mcruntime.envtest import wait_for
from mcruntime.providers import clusters
from mcruntime.webhook import AdmissionRequest, Denied, WebhookServer, WebhookServerOptions
from tests._logs import logged

pytestmark = pytest.mark.timeout(60)

GROUP = "hooks.mcruntime.io"


class WidgetSpec(Model):
    size: str = "small"
    replicas: int | None = None


class Widget(Resource):
    api_version: ClassVar[str] = f"{GROUP}/v1"
    kind: ClassVar[str] = "Widget"
    spec: WidgetSpec = WidgetSpec()


CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"widgets.{GROUP}"},
    "spec": {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                    }
                },
            }
        ],
    },
}


class SizeValidator:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str]] = []
        self.lock = threading.Lock()

    def _check(self, request: AdmissionRequest, obj: Widget) -> list[str]:
        with self.lock:
            self.calls.append((request.cluster_name, request.operation, obj.metadata.name or ""))
        if obj.spec.size == "huge":
            raise Denied(f"spec.size huge is not allowed in {request.cluster_name}")
        return [f"validated in {request.cluster_name}"]

    def validate_create(self, request: AdmissionRequest, obj: Widget) -> list[str]:
        return self._check(request, obj)

    def validate_update(self, request: AdmissionRequest, old: Widget, new: Widget) -> list[str]:
        return self._check(request, new)

    def validate_delete(self, request: AdmissionRequest, obj: Widget) -> None:
        with self.lock:
            self.calls.append((request.cluster_name, "DELETE", obj.metadata.name or ""))


def default(request: AdmissionRequest, obj: Widget) -> None:
    if obj.spec.replicas is None:
        obj.spec.replicas = 1
    obj.metadata.labels = {**(obj.metadata.labels or {}), "cluster": request.cluster_name}


def custom_api(server: Any) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(config.new_client_from_config_dict(server.kubeconfig()))


def widget(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/v1", "kind": "Widget", "metadata": {"name": name}, "spec": spec}


@pytest.fixture
def fleet_with_webhooks(make_envtest_fleet: Any) -> Iterator[tuple[Any, Any, Any, SizeValidator]]:
    fleet = make_envtest_fleet(2)
    for srv in fleet:
        client.ApiextensionsV1Api(
            config.new_client_from_config_dict(srv.kubeconfig())
        ).create_custom_resource_definition(CRD)
    provider = clusters.Provider()
    for srv in fleet:
        provider.add(srv.name, mcruntime.Cluster.from_kubeconfig(srv.kubeconfig(), name=srv.name))
    server = WebhookServer(WebhookServerOptions(host="127.0.0.1", port=0, install=True))
    mgr = mcruntime.Manager(
        provider=provider,
        options=mcruntime.ManagerOptions(
            webhook_server=server, health_probe_bind_address="127.0.0.1:0"
        ),
    )
    validator = SizeValidator()
    paths = (
        mcruntime.webhook_managed_by(mgr)
        .for_(Widget)
        .with_defaulter(default)
        .with_validator(validator)
        .complete()
    )
    assert paths == [
        "/mutate-hooks-mcruntime-io-v1-widget",
        "/validate-hooks-mcruntime-io-v1-widget",
    ]
    mgr.start()
    try:
        wait_for(
            lambda: server.installed_clusters() == ["cluster-0", "cluster-1"], what="installed"
        )
        # installed_clusters() names a cluster once its first configuration is in: wait for
        # both, else a test that removes a cluster races the install of the second
        for srv in fleet:
            wait_for(lambda srv=srv: len(configurations(srv)) == 2, what=f"{srv.name} configured")
        yield fleet, provider, mgr, validator
    finally:
        mgr.stop()


def test_every_cluster_gets_defaults_and_validation_with_its_own_name(
    fleet_with_webhooks: Any,
) -> None:
    fleet, _provider, _mgr, validator = fleet_with_webhooks
    for srv in fleet:
        api = custom_api(srv)
        made = api.create_namespaced_custom_object(GROUP, "v1", "default", "widgets", widget("w"))
        assert made["spec"] == {"size": "small", "replicas": 1} or made["spec"]["replicas"] == 1
        assert made["metadata"]["labels"] == {"cluster": srv.name}
        with pytest.raises(ApiException) as err:
            api.create_namespaced_custom_object(
                GROUP, "v1", "default", "widgets", widget("big", size="huge")
            )
        assert err.value.status == 403
        assert f"spec.size huge is not allowed in {srv.name}" in err.value.body
        api.delete_namespaced_custom_object(GROUP, "v1", "default", "widgets", "w")
    assert ("cluster-0", "CREATE", "w") in validator.calls
    assert ("cluster-1", "DELETE", "w") in validator.calls


def test_the_installed_configuration_points_at_the_clusters_own_url_with_the_ca_bundle(
    fleet_with_webhooks: Any,
) -> None:
    fleet, _provider, mgr, _ = fleet_with_webhooks
    server = mgr.get_webhook_server()
    adm = client.AdmissionregistrationV1Api(
        config.new_client_from_config_dict(fleet["cluster-1"].kubeconfig())
    )
    cfg = adm.read_validating_webhook_configuration("mcruntime-webhooks")
    hook = cfg.webhooks[0]
    assert hook.client_config.url == server.url_for(
        "/validate-hooks-mcruntime-io-v1-widget", "cluster-1"
    )
    assert hook.rules[0].resources == ["widgets"]
    assert hook.rules[0].operations == ["CREATE", "UPDATE", "DELETE"]
    import base64

    assert base64.b64decode(hook.client_config.ca_bundle) == server.ca_bundle


def test_a_cluster_that_leaves_loses_its_configuration_and_is_refused(
    fleet_with_webhooks: Any,
) -> None:
    fleet, provider, mgr, _ = fleet_with_webhooks
    server = mgr.get_webhook_server()
    provider.remove("cluster-1")
    wait_for(lambda: server.installed_clusters() == ["cluster-0"], what="uninstalled")
    wait_for(lambda: not configurations(fleet["cluster-1"]), what="its configuration removed")
    wait_for(lambda: not [t.name for t in mcruntime_threads() if "/cluster-1" in t.name])
    # objects are admitted by nobody now
    custom_api(fleet["cluster-1"]).create_namespaced_custom_object(
        GROUP, "v1", "default", "widgets", widget("free", size="huge")
    )
    answer = review_create(server, "/validate-hooks-mcruntime-io-v1-widget", "cluster-1")
    assert answer["response"]["allowed"] is False
    assert "cluster-1" in answer["response"]["status"]["message"]


def review_create(server: WebhookServer, path: str, cluster: str) -> dict[str, Any]:
    """The answer of ``server``'s hook at ``path`` for ``cluster`` to a Widget's CREATE,
    asked directly (not through an API server)."""
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": "u-1", "operation": "CREATE", "object": widget("x")},
    }
    ctx = ssl.create_default_context(cadata=server.ca_bundle.decode())
    req = urllib.request.Request(
        server.url_for(path, cluster),
        data=json.dumps(review).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, context=ctx, timeout=10) as resp:
        answer: dict[str, Any] = json.load(resp)
    return answer


def configurations(srv: Any) -> list[str]:
    """The webhook configurations in ``srv``'s cluster."""
    adm = client.AdmissionregistrationV1Api(config.new_client_from_config_dict(srv.kubeconfig()))
    return [
        f"{kind}/{item.metadata.name}"
        for kind, items in (
            ("validating", adm.list_validating_webhook_configuration().items),
            ("mutating", adm.list_mutating_webhook_configuration().items),
        )
        for item in items
    ]


def test_removing_hung_clusters_does_not_wait_for_their_configurations_removal(
    fleet_with_webhooks: Any,
) -> None:
    # removing a configuration from a hung cluster waits up to install_timeout (10 s): not
    # on the provider's thread, which would remove several hung clusters one after another
    fleet, provider, mgr, _ = fleet_with_webhooks
    for srv in fleet:
        srv.freeze()
    try:
        began = time.monotonic()
        for srv in fleet:
            provider.remove(srv.name)
        took = time.monotonic() - began
        assert took < 2.0, f"removing 2 hung clusters took {took:.1f}s"
        assert mgr.get_webhook_server().installed_clusters() == []
    finally:
        for srv in fleet:
            srv.thaw()
    # thawed within the removals' deadline: they finish, nothing of the fleet is left
    for srv in fleet:
        wait_for(lambda srv=srv: not configurations(srv), what=f"{srv.name}'s removal")
    mgr.stop()
    assert not [t.name for t in mcruntime_threads() if "/cluster-" in t.name]


def test_probes_report_the_webhook_server(fleet_with_webhooks: Any) -> None:
    _fleet, _provider, mgr, _ = fleet_with_webhooks
    host, port = mgr.health_probe_address
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz?verbose", timeout=5) as resp:
        body = resp.read().decode()
    assert "[+]webhook ok" in body
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz/webhook", timeout=5) as resp:
        assert resp.status == 200


def _grant_webhook_configurations(admin: Any, name: str, resources: list[str]) -> None:
    """Let the service account default/operator do anything with ``resources``."""
    rbac = "rbac.authorization.k8s.io"
    admin.client.create(
        {
            "apiVersion": f"{rbac}/v1",
            "kind": "ClusterRole",
            "metadata": {"name": name},
            "rules": [
                {
                    "apiGroups": ["admissionregistration.k8s.io"],
                    "resources": resources,
                    "verbs": ["*"],
                }
            ],
        }
    )
    admin.client.create(
        {
            "apiVersion": f"{rbac}/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": "operator", "namespace": "default"}],
        }
    )


def test_a_cluster_is_said_to_be_installed_once_its_whole_configuration_is(
    make_envtest_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # the mutating configuration may be written, the validating one not (yet): the cluster is
    # not installed, and what was written is removed when it leaves
    srv = make_envtest_server("partial")
    admin = mcruntime.Cluster.from_kubeconfig(srv.kubeconfig(), name="admin")
    admin.client.create(CRD)
    _grant_webhook_configurations(admin, "mutating", ["mutatingwebhookconfigurations"])
    provider = clusters.Provider()
    provider.add(
        "partial",
        mcruntime.Cluster.from_kubeconfig(
            srv.kubeconfig(service_account="default/operator"), name="partial"
        ),
    )
    server = WebhookServer(WebhookServerOptions(host="127.0.0.1", port=0, install=True))
    mgr = mcruntime.Manager(
        provider=provider, options=mcruntime.ManagerOptions(webhook_server=server)
    )
    (
        mcruntime.webhook_managed_by(mgr)
        .for_(Widget)
        .with_defaulter(default)
        .with_validator(SizeValidator())
        .complete()
    )
    caplog.set_level(logging.INFO, logger="mcruntime.webhook")
    mgr.start()
    try:
        wait_for(
            lambda: logged(caplog, logging.WARNING, starting="cluster=partial webhook: "),
            what="the validating configuration refused",
        )
        assert configurations(srv) == ["mutating/mcruntime-webhooks"]
        assert server.installed_clusters() == []
        _grant_webhook_configurations(admin, "validating", ["validatingwebhookconfigurations"])
        wait_for(lambda: server.installed_clusters() == ["partial"], 20, what="installed")
        assert sorted(configurations(srv)) == [
            "mutating/mcruntime-webhooks",
            "validating/mcruntime-webhooks",
        ]
    finally:
        mgr.stop()
    assert configurations(srv) == []
    admin.stop()


def test_a_cluster_that_refuses_the_configuration_is_named_once_per_failure_streak(
    make_envtest_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    srv = make_envtest_server("refusing")
    admin = mcruntime.Cluster.from_kubeconfig(srv.kubeconfig(), name="admin")
    admin.client.create(CRD)
    # the manager's credentials: a service account without the rights on webhook configurations
    operator = mcruntime.Cluster.from_kubeconfig(
        srv.kubeconfig(service_account="default/operator"), name="refusing"
    )
    provider = clusters.Provider()
    provider.add("refusing", operator)
    server = WebhookServer(WebhookServerOptions(host="127.0.0.1", port=0, install=True))
    mgr = mcruntime.Manager(
        provider=provider, options=mcruntime.ManagerOptions(webhook_server=server)
    )
    mcruntime.webhook_managed_by(mgr).for_(Widget).with_defaulter(default).complete()
    caplog.set_level(logging.DEBUG, logger="mcruntime.webhook")
    installing = "cluster=refusing webhook: installing the webhook configuration "

    def lines(level: int) -> list[str]:
        return logged(caplog, level, starting=installing)

    mgr.start()
    try:
        wait_for(
            lambda: any("still failing (2)" in m for m in lines(logging.DEBUG)),
            what="two failed installs",
        )
        (warning,) = lines(logging.WARNING)
        assert warning.startswith(f"{installing}failed: ")
        assert "mutatingwebhookconfigurations" in warning and "forbidden" in warning
        assert server.installed_clusters() == []
        _grant_webhook_configurations(
            admin, "webhooks", ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"]
        )
        wait_for(lambda: lines(logging.INFO), timeout=20, what="installed once granted")
        assert server.installed_clusters() == ["refusing"]
        (recovery,) = lines(logging.INFO)
        assert recovery.startswith(f"{installing}works again after ")
        assert len(lines(logging.WARNING)) == 1
    finally:
        mgr.stop()
        admin.stop()


def test_one_function_validates_creates_and_updates(make_envtest_server: Any) -> None:
    # kopf's @kopf.on.validate: one function (request, obj), not a Validator's three methods
    srv = make_envtest_server("local")
    api = config.new_client_from_config_dict(srv.kubeconfig())
    client.ApiextensionsV1Api(api).create_custom_resource_definition(CRD)
    seen: list[tuple[str, str]] = []

    def no_huge(request: AdmissionRequest, obj: Widget) -> list[str]:
        seen.append((request.operation, obj.spec.size))
        if obj.spec.size == "huge":
            raise Denied("spec.size huge is not allowed")
        return [f"{obj.spec.size} is fine"]

    server = WebhookServer(WebhookServerOptions(host="127.0.0.1", port=0, install=True))
    mgr = mcruntime.Manager(
        srv.kubeconfig(), options=mcruntime.ManagerOptions(webhook_server=server)
    )
    mcruntime.webhook_managed_by(mgr).for_(Widget).with_validator(no_huge).complete()
    custom = client.CustomObjectsApi(api)
    with mgr:
        wait_for(lambda: server.installed_clusters() == [""], what="installed")
        cfg = client.AdmissionregistrationV1Api(api).read_validating_webhook_configuration(
            "mcruntime-webhooks"
        )
        assert cfg.webhooks[0].rules[0].operations == ["CREATE", "UPDATE"]
        with pytest.raises(ApiException) as refused:
            custom.create_namespaced_custom_object(
                GROUP, "v1", "default", "widgets", widget("w", size="huge")
            )
        assert "spec.size huge is not allowed" in refused.value.body
        custom.create_namespaced_custom_object(
            GROUP, "v1", "default", "widgets", widget("w", size="small")
        )
        with pytest.raises(ApiException) as refused:
            custom.patch_namespaced_custom_object(
                GROUP, "v1", "default", "widgets", "w", {"spec": {"size": "huge"}}
            )
        assert "spec.size huge is not allowed" in refused.value.body
        custom.delete_namespaced_custom_object(GROUP, "v1", "default", "widgets", "w")
    assert seen == [("CREATE", "huge"), ("CREATE", "small"), ("UPDATE", "huge")]


def test_the_removal_leaves_alone_a_configuration_this_replica_does_not_hold(
    make_envtest_server: Any,
) -> None:
    # a write that got no answer is looked for by the removal (it may have been made); when
    # it was not, what is there under that name is someone else's and stays as it is
    from mcruntime.client import RESTClient
    from mcruntime.webhook._install import MUTATING

    srv = make_envtest_server("theirs")
    admin = mcruntime.Cluster.from_kubeconfig(srv.kubeconfig(), name="admin")
    server = WebhookServer(WebhookServerOptions(host="127.0.0.1", port=0, install=True))
    theirs = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": server.options.install_name},
        "webhooks": [],
    }
    admin.client.create(theirs)
    rest = RESTClient(admin.api_client, cluster_name="theirs")
    try:
        others = server._installer._release(rest, MUTATING, time.monotonic() + 5)
    finally:
        rest.close()
    assert others == []
    assert configurations(srv) == [f"mutating/{server.options.install_name}"]
    admin.stop()


def webhook_samples(mgr: Any) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """The samples of the ``controller_runtime_webhook_*`` families /metrics serves."""
    from prometheus_client.parser import text_string_to_metric_families

    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(mgr.metrics.exposition().decode())
        if f.name.startswith("controller_runtime_webhook_")
        for s in f.samples
    }


def test_webhook_metrics_count_each_clusters_requests_and_go_with_the_cluster(
    fleet_with_webhooks: Any,
) -> None:
    # controller-runtime's controller_runtime_webhook_{requests_total,latency_seconds,
    # requests_in_flight}, with the cluster the request came for
    fleet, provider, mgr, _ = fleet_with_webhooks
    validate = "/validate-hooks-mcruntime-io-v1-widget"
    for srv in fleet:
        api = custom_api(srv)
        api.create_namespaced_custom_object(GROUP, "v1", "default", "widgets", widget("w"))
        with pytest.raises(ApiException):  # refused: still an HTTP 200 answer
            api.create_namespaced_custom_object(
                GROUP, "v1", "default", "widgets", widget("big", size="huge")
            )
    # a request is counted once its answer is sent: the API server may have read that answer
    # (and our call returned) before the webhook server's thread counted it
    in_flight = ("controller_runtime_webhook_requests_in_flight", (("webhook", validate),))
    wait_for(lambda: webhook_samples(mgr)[in_flight] == 0, what="every request counted")
    samples = webhook_samples(mgr)
    for name in fleet.names:
        labels = (("cluster", name), ("code", "200"), ("webhook", validate))
        assert samples[("controller_runtime_webhook_requests_total", labels)] == 2
        count = (("cluster", name), ("webhook", validate))
        assert samples[("controller_runtime_webhook_latency_seconds_count", count)] == 2

    server = mgr.get_webhook_server()
    # (waiting for the end of the work that needs the cluster after it left: the manager
    # has stopped serving it by then, so the review below is of a cluster not served)
    provider.remove("cluster-1", wait=10)
    assert server.installed_clusters() == ["cluster-0"]
    assert review_create(server, validate, "cluster-1")["response"]["allowed"] is False
    wait_for(lambda: webhook_samples(mgr)[in_flight] == 0, what="the review counted")
    samples = webhook_samples(mgr)
    # a request for a cluster not engaged is counted under no cluster's name, and nothing of
    # the cluster gone stays (a name in a URL must not grow the endpoint)
    assert [k for k in samples if ("cluster", "cluster-1") in k[1]] == []
    not_engaged = (("cluster", ""), ("code", "200"), ("webhook", validate))
    assert samples[("controller_runtime_webhook_requests_total", not_engaged)] == 1
    assert (
        samples[
            (
                "controller_runtime_webhook_requests_total",
                (("cluster", "cluster-0"), ("code", "200"), ("webhook", validate)),
            )
        ]
        == 2
    )
