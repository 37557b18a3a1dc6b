"""The ``cluster-api`` provider plugin: the Cluster CRD (v1beta1 + v1beta2) in an embedded
management server, kubeconfig Secrets pointing at other embedded servers."""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from mcruntime.envtest import wait_for

pytest.importorskip(
    "mcruntime_cluster_api",
    reason="the provider is not installed: pip install -e providers/cluster-api",
)

from mcruntime_cluster_api import Provider, control_plane_initialized  # noqa: E402

from mcruntime.cluster import Cluster  # noqa: E402
from mcruntime.envtest import APIServer, Fleet, Proxy  # noqa: E402
from mcruntime.errors import NoKindMatch  # noqa: E402
from mcruntime.plugins import ProviderError, available_providers, load_provider  # noqa: E402

from .._support import (  # noqa: E402
    READ_SECRETS,
    ConfigMapManager,
    RecordingAware,
    Running,
    check_management_hang_is_said,
    check_refused_list_is_said_and_does_not_hold_start,
    create_configmap,
    delete_secret,
    ensure_namespace,
    grant,
    put_secret,
    stop_while_management_hangs,
)

pytestmark = pytest.mark.timeout(60)

NS = "capi"
CLUSTER_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "clusters.cluster.x-k8s.io"},
    "spec": {
        "group": "cluster.x-k8s.io",
        "scope": "Namespaced",
        "names": {
            "plural": "clusters",
            "singular": "cluster",
            "kind": "Cluster",
            "listKind": "ClusterList",
        },
        "versions": [
            {
                "name": v,
                "served": True,
                "storage": v == "v1beta2",
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                    }
                },
            }
            for v in ("v1beta1", "v1beta2")
        ],
    },
}
V1BETA1_READY = {"controlPlaneReady": True}
V1BETA1_CONDITION = {"conditions": [{"type": "ControlPlaneInitialized", "status": "True"}]}
V1BETA2_READY = {"initialization": {"controlPlaneInitialized": True}}
CAPI_V1BETA2 = "cluster.x-k8s.io/v1beta2/Cluster"


def install_crd(cluster: Cluster) -> None:
    cluster.client.create(CLUSTER_CRD)
    wait_for(lambda: _served(cluster, "v1beta1") and _served(cluster, "v1beta2"))


def _served(cluster: Cluster, version: str) -> bool:
    try:
        cluster.rest_mapper.mapping(f"cluster.x-k8s.io/{version}/Cluster")
        return True
    except NoKindMatch:
        return False


def capi_cluster(
    cluster: Cluster, name: str, version: str = "v1beta2", status: dict[str, Any] | None = None
) -> None:
    cluster.client.create(
        {
            "apiVersion": f"cluster.x-k8s.io/{version}",
            "kind": "Cluster",
            "metadata": {"name": name, "namespace": NS},
            "spec": {},
        }
    )
    if status is not None:
        set_status(cluster, name, status, version)


def set_status(
    cluster: Cluster, name: str, status: dict[str, Any], version: str = "v1beta2"
) -> None:
    cluster.client.patch_status(f"cluster.x-k8s.io/{version}/Cluster", name, {"status": status}, NS)


def kubeconfig_secret(cluster: Cluster, name: str, server: APIServer | str) -> None:
    value = server if isinstance(server, str) else yaml.safe_dump(server.kubeconfig())
    put_secret(
        cluster, NS, f"{name}-kubeconfig", {"value": value}, {"cluster.x-k8s.io/cluster-name": name}
    )


@pytest.fixture
def writer(management: APIServer) -> Iterator[Cluster]:
    cluster = Cluster.from_kubeconfig(management.kubeconfig(), name="writer")
    ensure_namespace(cluster, NS)
    install_crd(cluster)
    yield cluster
    cluster.stop()


@pytest.fixture
def fleet(make_envtest_fleet: Callable[..., Fleet]) -> Fleet:
    return make_envtest_fleet(2)


def new_provider(management: APIServer, **kwargs: Any) -> Provider:
    return Provider(Cluster.from_kubeconfig(management.kubeconfig(), name="management"), **kwargs)


def test_a_misspelled_cluster_options_key_is_refused_at_construction(
    management: APIServer,
) -> None:
    """Else every workload cluster would fail to build, reported as an unusable kubeconfig."""
    with pytest.raises(ValueError) as err:
        new_provider(management, cluster_options={"uncachd": ["v1/Secret"]})
    assert str(err.value) == (
        "provider 'cluster-api': option 'cluster_options': unknown key 'uncachd'; did you "
        "mean 'uncached'? (known: cache_options, uncached)"
    )


def test_readiness_in_both_api_versions() -> None:
    assert control_plane_initialized({"status": V1BETA2_READY})
    assert control_plane_initialized({"status": V1BETA1_READY})
    assert control_plane_initialized({"status": V1BETA1_CONDITION})
    assert control_plane_initialized({"status": {"deprecated": {"v1beta1": V1BETA1_CONDITION}}})
    assert not control_plane_initialized(
        {"status": {"initialization": {"controlPlaneInitialized": False}}}
    )
    assert not control_plane_initialized(
        {"status": {"conditions": [{"type": "ControlPlaneInitialized", "status": "False"}]}}
    )
    assert not control_plane_initialized({})


def test_manager_reconciles_configmaps_of_initialized_workload_clusters(
    management: APIServer,
    writer: Cluster,
    fleet: Fleet,
    configmap_manager: Callable[[Any], ConfigMapManager],
    thread_baseline: Callable[[], None],
) -> None:
    capi_cluster(writer, "eu", "v1beta2", V1BETA2_READY)
    kubeconfig_secret(writer, "eu", fleet["cluster-0"])
    capi_cluster(writer, "us", "v1beta1", V1BETA1_CONDITION)
    kubeconfig_secret(writer, "us", fleet["cluster-1"])

    m = configmap_manager(new_provider(management))
    wait_for(lambda: m.engaged() == ["capi/eu", "capi/us"])
    workload = Cluster.from_kubeconfig(fleet["cluster-1"].kubeconfig())
    try:
        create_configmap(workload, "default", "hello")
        wait_for(lambda: m.saw("capi/us", "default/hello"))
        assert not m.saw("capi/eu", "default/hello")
    finally:
        workload.stop()
    m.mgr.stop()
    thread_baseline()


def test_start_returns_once_the_workload_clusters_present_at_start_are_engaged(
    management: APIServer,
    writer: Cluster,
    fleet: Fleet,
    configmap_manager: Callable[[Any], ConfigMapManager],
) -> None:
    capi_cluster(writer, "eu", "v1beta2", V1BETA2_READY)
    kubeconfig_secret(writer, "eu", fleet["cluster-0"])
    m = configmap_manager(new_provider(management))  # started
    # as with the file and namespace providers: get_cluster works right after start()
    assert m.engaged() == ["capi/eu"]
    assert m.mgr.get_cluster("capi/eu").client.get("v1/Namespace", "default")


def test_a_management_cluster_refusing_the_secrets_list_is_said_and_does_not_hold_start(
    management: APIServer,
    writer: Cluster,
    fleet: Fleet,
    run_provider: Callable[[Any, Any], Running],
) -> None:
    verbs = ["get", "list", "watch"]
    clusters = {"apiGroups": ["cluster.x-k8s.io"], "resources": ["clusters"], "verbs": verbs}
    grant(writer, "capi-provider", [clusters], "default/capi-provider")
    capi_cluster(writer, "eu", "v1beta2", V1BETA2_READY)
    kubeconfig_secret(writer, "eu", fleet["cluster-0"])
    kubeconfig = management.kubeconfig(service_account="default/capi-provider")
    check_refused_list_is_said_and_does_not_hold_start(
        Provider(Cluster.from_kubeconfig(kubeconfig, name="management")),
        run_provider,
        lambda: grant(writer, "capi-provider", [clusters, READ_SECRETS], "default/capi-provider"),
        "capi/eu",
    )


def test_a_hung_management_cluster_is_said_once_and_in_discovery_error(
    management: APIServer,
    writer: Cluster,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    path = Proxy(management).start()
    try:
        check_management_hang_is_said(Provider, path, monkeypatch, caplog)
    finally:
        path.stop()


def test_start_waits_for_the_workload_clusters_of_a_cluster_api_serving_only_v1beta1(
    management: APIServer,
    fleet: Fleet,
    configmap_manager: Callable[[Any], ConfigMapManager],
) -> None:
    # v1beta2 not served is no missing Cluster API: start() still waits for the v1beta1 list
    writer = Cluster.from_kubeconfig(management.kubeconfig(), name="writer")
    try:
        ensure_namespace(writer, NS)
        old = copy.deepcopy(CLUSTER_CRD)
        old["spec"]["versions"] = [
            {**v, "storage": True} for v in old["spec"]["versions"] if v["name"] == "v1beta1"
        ]
        writer.client.create(old)
        wait_for(lambda: _served(writer, "v1beta1"))
        capi_cluster(writer, "eu", "v1beta1", V1BETA1_READY)
        kubeconfig_secret(writer, "eu", fleet["cluster-0"])
    finally:
        writer.stop()
    m = configmap_manager(new_provider(management))  # started
    assert m.engaged() == ["capi/eu"]


def test_engages_on_initialization_re_engages_on_new_kubeconfig_and_disengages_when_gone(
    management: APIServer,
    writer: Cluster,
    fleet: Fleet,
    run_provider: Callable[[Any, Any], Running],
    thread_baseline: Callable[[], None],
) -> None:
    aware = RecordingAware()
    run = run_provider(new_provider(management, namespace=NS), aware)
    capi_cluster(writer, "eu", "v1beta1")
    kubeconfig_secret(writer, "eu", fleet["cluster-0"])
    # a later, initialized Cluster marks the point where "eu" has been looked at
    kubeconfig_secret(writer, "marker", fleet["cluster-1"])
    capi_cluster(writer, "marker", "v1beta2", V1BETA2_READY)
    wait_for(lambda: aware.cluster("capi/marker"))
    assert "capi/eu" not in aware.names()

    set_status(writer, "eu", V1BETA1_READY, "v1beta1")
    first = wait_for(lambda: aware.cluster("capi/eu"))
    assert first.rest.host.rstrip("/") == fleet["cluster-0"].url

    kubeconfig_secret(writer, "eu", fleet["cluster-1"])
    wait_for(lambda: aware.count("engage", "capi/eu") == 2 and aware.count("end", "capi/eu") == 1)
    second = aware.cluster("capi/eu")
    assert second is not None and second.rest.host.rstrip("/") == fleet["cluster-1"].url
    # (stopped by a thread of its own: the handler runs on the thread that reads every watch)
    wait_for(lambda: first.stopped, timeout=5, what="the replaced cluster stopped")

    delete_secret(writer, NS, "eu-kubeconfig")
    wait_for(lambda: "capi/eu" not in aware.names())
    kubeconfig_secret(writer, "eu", fleet["cluster-0"])
    wait_for(lambda: "capi/eu" in aware.names())

    writer.client.delete("cluster.x-k8s.io/v1beta2/Cluster", "eu", NS)
    wait_for(lambda: aware.names() == ["capi/marker"])

    run.stop()
    assert aware.names() == [] and run.error is None
    thread_baseline()


def test_only_kubeconfig_secrets_labelled_as_cluster_api_does_are_read_and_a_missing_one_is_said_once(
    management: APIServer,
    writer: Cluster,
    fleet: Fleet,
    run_provider: Callable[[Any, Any], Running],
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Cluster API's managers cache only Secrets labelled cluster.x-k8s.io/cluster-name, and
    # label the kubeconfig Secrets they write: the provider lists those, not every Secret
    caplog.set_level(logging.INFO, logger="mcruntime.providers.cluster_api")
    aware = RecordingAware()
    run_provider(new_provider(management, namespace=NS), aware)
    value = yaml.safe_dump(fleet["cluster-0"].kubeconfig())
    put_secret(writer, NS, "eu-kubeconfig", {"value": value})  # no label
    capi_cluster(writer, "eu", "v1beta2", V1BETA2_READY)
    kubeconfig_secret(writer, "marker", fleet["cluster-1"])
    capi_cluster(writer, "marker", "v1beta2", V1BETA2_READY)
    wait_for(lambda: aware.cluster("capi/marker"))
    for generation in range(3):  # the Cluster's status changes: no new warning
        set_status(writer, "eu", {**V1BETA2_READY, "phase": f"Provisioned-{generation}"})
    # a Cluster created after those updates marks the point where they have been looked at
    kubeconfig_secret(writer, "marker2", fleet["cluster-1"])
    capi_cluster(writer, "marker2", "v1beta2", V1BETA2_READY)
    wait_for(lambda: aware.cluster("capi/marker2"))
    assert "capi/eu" not in aware.names()
    said = [m for m in caplog.messages if "capi/eu" in m]
    assert said == [
        "provider=cluster-api cluster=capi/eu ready; waiting for its kubeconfig secret "
        "capi/eu-kubeconfig (labelled cluster.x-k8s.io/cluster-name)"
    ], said
    kubeconfig_secret(writer, "eu", fleet["cluster-0"])  # labelled as Cluster API does
    wait_for(lambda: "capi/eu" in aware.names(), what="eu engaged from its labelled Secret")


def test_a_cluster_leaving_the_label_selector_is_disengaged_saying_so(
    management: APIServer,
    writer: Cluster,
    fleet: Fleet,
    run_provider: Callable[[Any, Any], Running],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="mcruntime.providers.cluster_api")
    aware = RecordingAware()
    run_provider(new_provider(management, label_selector="env=prod"), aware)
    writer.client.create(
        {
            "apiVersion": CAPI_V1BETA2.rsplit("/", 1)[0],
            "kind": "Cluster",
            "metadata": {"name": "eu", "namespace": NS, "labels": {"env": "prod"}},
            "spec": {},
        }
    )
    set_status(writer, "eu", V1BETA2_READY)
    kubeconfig_secret(writer, "eu", fleet["cluster-0"])
    wait_for(lambda: "capi/eu" in aware.names())
    obj = writer.api_reader.get(CAPI_V1BETA2, "eu", NS)
    obj["metadata"]["labels"] = {"env": "dev"}
    writer.client.update(obj)
    wait_for(lambda: "capi/eu" not in aware.names())
    assert (
        "provider=cluster-api cluster=capi/eu Cluster deleted or no longer matching "
        "'env=prod': disengaging" in caplog.messages
    ), caplog.messages


def _env_prod(c: Any) -> bool:
    return control_plane_initialized(c) and (c["metadata"].get("labels") or {}).get("env") == "prod"


def test_a_cluster_no_longer_ready_is_disengaged_after_the_grace_period(
    management: APIServer,
    writer: Cluster,
    fleet: Fleet,
    run_provider: Callable[[Any, Any], Running],
) -> None:
    aware = RecordingAware()
    run_provider(
        new_provider(management, namespace=NS, is_ready=_env_prod, unready_grace_period=0.2),
        aware,
    )
    for name, server in (("relabelled", "cluster-0"), ("uninitialized", "cluster-1")):
        capi_cluster(writer, name, "v1beta2", V1BETA2_READY)
        writer.client.patch(CAPI_V1BETA2, name, {"metadata": {"labels": {"env": "prod"}}}, NS)
        kubeconfig_secret(writer, name, fleet[server])
    wait_for(lambda: aware.names() == ["capi/relabelled", "capi/uninitialized"])

    # the docs' is_ready turns false: its label changed, its control plane is no longer initialized
    writer.client.patch(CAPI_V1BETA2, "relabelled", {"metadata": {"labels": {"env": "dev"}}}, NS)
    set_status(writer, "uninitialized", {"initialization": {"controlPlaneInitialized": False}})
    wait_for(lambda: aware.names() == [], what="both disengaged once the grace period ended")


def test_a_cluster_ready_again_within_the_grace_period_keeps_its_engagement(
    management: APIServer,
    writer: Cluster,
    fleet: Fleet,
    run_provider: Callable[[Any, Any], Running],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="mcruntime.providers.cluster_api")
    aware = RecordingAware()
    run_provider(new_provider(management, namespace=NS, unready_grace_period=600), aware)
    capi_cluster(writer, "eu", "v1beta2", V1BETA2_READY)
    kubeconfig_secret(writer, "eu", fleet["cluster-0"])
    wait_for(lambda: aware.names() == ["capi/eu"])
    set_status(writer, "eu", {"initialization": {"controlPlaneInitialized": False}})
    wait_for(lambda: "capi/eu no longer ready; disengaging in 600s" in caplog.text)
    set_status(writer, "eu", V1BETA2_READY)
    wait_for(lambda: "capi/eu ready again" in caplog.text)
    assert aware.names() == ["capi/eu"] and aware.count("engage", "capi/eu") == 1


def _raises_while_labelled_broken(c: Any) -> bool:
    if (c["metadata"].get("labels") or {}).get("broken"):
        raise KeyError("nope")
    return control_plane_initialized(c)


def test_an_is_ready_that_raises_is_logged_once_per_streak_naming_the_cluster(
    management: APIServer,
    writer: Cluster,
    fleet: Fleet,
    run_provider: Callable[[Any, Any], Running],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="mcruntime.providers.cluster_api")
    aware = RecordingAware()
    run_provider(
        new_provider(management, namespace=NS, is_ready=_raises_while_labelled_broken), aware
    )
    capi_cluster(writer, "bad", "v1beta2")
    writer.client.patch(CAPI_V1BETA2, "bad", {"metadata": {"labels": {"broken": "yes"}}}, NS)
    kubeconfig_secret(writer, "bad", fleet["cluster-0"])
    wait_for(lambda: "readiness check (is_ready) failed" in caplog.text)
    for i in range(2):  # Cluster and Secret events: each runs the check again
        set_status(writer, "bad", {**V1BETA2_READY, "observedGeneration": i})
    kubeconfig_secret(writer, "bad", fleet["cluster-1"])
    wait_for(lambda: "readiness check (is_ready) still failing (4)" in caplog.text)
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, caplog.text
    assert warnings[0].levelno == logging.WARNING
    assert "cluster=capi/bad provider=cluster-api:" in warnings[0].getMessage()
    assert "readiness check (is_ready) failed: KeyError" in warnings[0].getMessage()
    assert "treated as not ready" in warnings[0].getMessage()
    assert aware.names() == []

    writer.client.patch(CAPI_V1BETA2, "bad", {"metadata": {"labels": {"broken": None}}}, NS)
    wait_for(lambda: aware.names() == ["capi/bad"])
    assert "cluster=capi/bad provider=cluster-api: readiness check (is_ready) works again" in (
        caplog.text
    )


def test_broken_kubeconfig_is_logged_without_content_and_others_keep_running(
    management: APIServer,
    writer: Cluster,
    fleet: Fleet,
    run_provider: Callable[[Any, Any], Running],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="mcruntime.providers.cluster_api")
    secret_token = "TOPSECRET-capi-77"
    capi_cluster(writer, "good", "v1beta2", V1BETA2_READY)
    kubeconfig_secret(writer, "good", fleet["cluster-0"])
    capi_cluster(writer, "bad", "v1beta2", V1BETA2_READY)
    kubeconfig_secret(writer, "bad", f"users: [{{token: {secret_token}")

    aware = RecordingAware()
    run_provider(new_provider(management), aware)
    wait_for(lambda: aware.names() == ["capi/good"])
    wait_for(lambda: any("cluster=capi/bad" in r.getMessage() for r in caplog.records))
    assert "secret capi/bad-kubeconfig" in caplog.text and "not valid YAML" in caplog.text
    assert secret_token not in caplog.text

    kubeconfig_secret(writer, "bad", fleet["cluster-1"])
    wait_for(lambda: aware.names() == ["capi/bad", "capi/good"])


def test_a_kubeconfig_secret_that_runs_a_command_is_refused_unless_allowed(
    management: APIServer,
    writer: Cluster,
    fleet: Fleet,
    run_provider: Callable[[Any, Any], Running],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="mcruntime.providers.cluster_api")
    doc = fleet["cluster-0"].kubeconfig()
    doc["users"][0]["user"] = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": "/bin/sh",
            "interactiveMode": "Never",
        }
    }
    capi_cluster(writer, "runs", "v1beta2", V1BETA2_READY)
    kubeconfig_secret(writer, "runs", yaml.safe_dump(doc))
    capi_cluster(writer, "plain", "v1beta2", V1BETA2_READY)
    kubeconfig_secret(writer, "plain", fleet["cluster-1"])

    aware = RecordingAware()
    refusing = run_provider(new_provider(management), aware)
    wait_for(lambda: aware.names() == ["capi/plain"])
    wait_for(lambda: "cluster=capi/runs" in caplog.text, what="the Secret refused")
    assert "runs the exec plugin 'sh'" in caplog.text and "allow_exec is off" in caplog.text
    refusing.stop()

    allowed = RecordingAware()
    run_provider(new_provider(management, allow_exec=True), allowed)
    wait_for(lambda: allowed.names() == ["capi/plain", "capi/runs"])


def test_waits_for_the_cluster_api_crd_and_is_found_by_name(
    management: APIServer,
    fleet: Fleet,
    tmp_path: Path,
    run_provider: Callable[[Any, Any], Running],
    caplog: pytest.LogCaptureFixture,
    thread_baseline: Callable[[], None],
) -> None:
    caplog.set_level(logging.WARNING, logger="mcruntime.providers.cluster_api")
    assert "cluster-api" in available_providers()
    path = management.write_kubeconfig(tmp_path / "management.yaml")
    provider = load_provider("cluster-api", kubeconfig=str(path), namespace=NS)
    assert isinstance(provider, Provider)

    aware = RecordingAware()
    run = run_provider(provider, aware)
    wait_for(lambda: "install Cluster API" in caplog.text)

    writer = Cluster.from_kubeconfig(management.kubeconfig(), name="writer")
    try:
        ensure_namespace(writer, NS)
        install_crd(writer)
        capi_cluster(writer, "late", "v1beta2", V1BETA2_READY)
        kubeconfig_secret(writer, "late", fleet["cluster-0"])
        wait_for(lambda: aware.names() == ["capi/late"], timeout=30)
    finally:
        writer.stop()
    run.stop()
    assert provider.management.stopped and aware.names() == []
    thread_baseline()


@pytest.mark.timeout(20)
def test_stop_cuts_the_discovery_of_a_hung_management_cluster(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, thread_baseline: Callable[[], None]
) -> None:
    caplog.set_level(logging.WARNING, logger="mcruntime.providers.cluster_api")
    stop_while_management_hangs("cluster-api", tmp_path, namespace=NS)
    assert "discovery failed" not in caplog.text  # a stop is no failure
    thread_baseline()


def test_bad_options_are_rejected_by_name() -> None:
    with pytest.raises(ProviderError) as err:
        load_provider("cluster-api", version="v1alpha3")
    assert "'version'" in str(err.value) and "'cluster-api'" in str(err.value)


def test_a_bad_label_selector_is_refused_at_construction_naming_the_option(
    management: APIServer,
) -> None:
    # refused before any list: the API server would refuse the Clusters' selector for ever
    with pytest.raises(ProviderError) as err:
        load_provider("cluster-api", label_selector="env in prod")
    assert str(err.value).startswith(
        "provider 'cluster-api': option 'label_selector': invalid label selector 'env in prod'"
    ), str(err.value)
    with pytest.raises(ValueError) as err2:
        new_provider(management, label_selector="env in prod")
    assert str(err2.value).startswith(
        "provider 'cluster-api': option 'label_selector': invalid label selector 'env in prod'"
    ), str(err2.value)
    assert new_provider(management, label_selector="env in (prod),!legacy").label_selector
    with pytest.raises(ProviderError, match="option 'namespace': 'Fleet_NS' is not a valid"):
        load_provider("cluster-api", namespace="Fleet_NS")
    with pytest.raises(ValueError, match="option 'namespace': 'Fleet_NS' is not a valid"):
        new_provider(management, namespace="Fleet_NS")


def test_an_empty_kubeconfig_key_is_reported_as_empty_not_missing(
    management: APIServer,
    writer: Cluster,
    run_provider: Callable[[Any, Any], Running],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="mcruntime.providers.cluster_api")
    run_provider(new_provider(management, namespace=NS), RecordingAware())
    capi_cluster(writer, "empty", "v1beta2", V1BETA2_READY)
    kubeconfig_secret(writer, "empty", "")
    wait_for(lambda: "capi/empty-kubeconfig" in caplog.text)
    assert "secret capi/empty-kubeconfig: data key 'value' is empty" in caplog.text, caplog.text
