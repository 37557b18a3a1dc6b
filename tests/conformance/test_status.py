"""The status subresource: ``/status`` writes only status; the main endpoint ignores status."""

from __future__ import annotations

import pytest
from kubernetes import client
from kubernetes.client import ApiClient

from ._support import deployment, raises_status, raw, to_dict, unique, widget

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def widgets(
    custom: client.CustomObjectsApi, widget_crds: dict[str, str], ns: str
) -> tuple[client.CustomObjectsApi, str, str, str, str]:
    return custom, widget_crds["group"], widget_crds["version"], ns, widget_crds["widgets"]


def test_status_on_create_is_dropped_when_kind_has_status_subresource(widgets: tuple) -> None:
    custom, g, v, ns, plural = widgets
    body = widget(unique("w"))
    body["status"] = {"phase": "Faked"}
    created = custom.create_namespaced_custom_object(g, v, ns, plural, body)
    assert "phase" not in (created.get("status") or {})


def test_main_endpoint_ignores_status_changes(widgets: tuple) -> None:
    custom, g, v, ns, plural = widgets
    name = unique("w")
    custom.create_namespaced_custom_object(g, v, ns, plural, widget(name, {"size": 1}))
    custom.patch_namespaced_custom_object_status(g, v, ns, plural, name, {"status": {"ok": 1}})
    patched = custom.patch_namespaced_custom_object(
        g, v, ns, plural, name, {"spec": {"size": 2}, "status": {"ok": 2}}
    )
    assert patched["spec"] == {"size": 2}
    assert patched["status"] == {"ok": 1}
    current = custom.get_namespaced_custom_object(g, v, ns, plural, name)
    current["status"] = {"ok": 3}
    current["spec"] = {"size": 3}
    replaced = custom.replace_namespaced_custom_object(g, v, ns, plural, name, current)
    assert replaced["spec"] == {"size": 3}
    assert replaced["status"] == {"ok": 1}


def test_status_endpoint_changes_only_status(widgets: tuple) -> None:
    custom, g, v, ns, plural = widgets
    name = unique("w")
    custom.create_namespaced_custom_object(
        g, v, ns, plural, widget(name, {"size": 1}, labels={"a": "1"})
    )
    patched = custom.patch_namespaced_custom_object_status(
        g,
        v,
        ns,
        plural,
        name,
        {"spec": {"size": 99}, "status": {"ready": True}},
    )
    assert patched["status"] == {"ready": True}
    assert patched["spec"] == {"size": 1}
    current = custom.get_namespaced_custom_object_status(g, v, ns, plural, name)
    assert current["status"] == {"ready": True}
    current["status"] = {"ready": False}
    current["spec"] = {"size": 42}
    replaced = custom.replace_namespaced_custom_object_status(g, v, ns, plural, name, current)
    assert replaced["status"] == {"ready": False}
    assert replaced["spec"] == {"size": 1}
    assert replaced["metadata"]["generation"] == 1


def test_status_endpoint_uses_optimistic_concurrency(widgets: tuple) -> None:
    custom, g, v, ns, plural = widgets
    name = unique("w")
    stale = custom.create_namespaced_custom_object(g, v, ns, plural, widget(name))
    custom.patch_namespaced_custom_object(g, v, ns, plural, name, {"spec": {"size": 5}})
    stale["status"] = {"ready": True}
    with raises_status(409, "Conflict"):
        custom.replace_namespaced_custom_object_status(g, v, ns, plural, name, stale)


def test_kind_without_status_subresource_stores_status_on_main_endpoint(
    custom: client.CustomObjectsApi, widget_crds: dict[str, str], api: ApiClient
) -> None:
    g, v, plural = widget_crds["group"], widget_crds["version"], widget_crds["gadgets"]
    name = unique("g")
    body = {
        "apiVersion": f"{g}/{v}",
        "kind": "Gadget",
        "metadata": {"name": name},
        "spec": {"x": 1},
        "status": {"seen": True},
    }
    try:
        created = custom.create_cluster_custom_object(g, v, plural, body)
        assert created["status"] == {"seen": True}
        assert raw(api, "GET", f"/apis/{g}/{v}/{plural}/{name}/status").status == 404
    finally:
        custom.delete_cluster_custom_object(g, v, plural, name)


def test_deployment_status_subresource_separates_spec_and_status(
    apps: client.AppsV1Api, ns: str
) -> None:
    name = unique("deploy")
    apps.create_namespaced_deployment(ns, deployment(name, replicas=1))
    ignored = apps.patch_namespaced_deployment(
        name, ns, {"status": {"observedGeneration": 42}, "spec": {"replicas": 2}}
    )
    assert ignored.spec.replicas == 2
    assert (ignored.status.observed_generation if ignored.status else None) != 42
    written = apps.patch_namespaced_deployment_status(
        name, ns, {"status": {"observedGeneration": 42}, "spec": {"replicas": 7}}
    )
    assert written.status.observed_generation == 42
    assert written.spec.replicas == 2


PAUSE = "registry.k8s.io/pause:3.9"


@pytest.mark.parametrize(
    ("resources", "qos"),
    [
        ({}, "BestEffort"),
        ({"requests": {"cpu": "100m"}}, "Burstable"),
        ({"limits": {"cpu": "1", "memory": "64Mi"}}, "Guaranteed"),  # requests from limits
        (
            {
                "requests": {"cpu": "0.5", "memory": "64Mi"},
                "limits": {"cpu": "500m", "memory": "64Mi"},
            },
            "Guaranteed",
        ),
        ({"requests": {"cpu": "0.5"}, "limits": {"cpu": "1", "memory": "64Mi"}}, "Burstable"),
    ],
)
def test_a_created_pod_is_pending_with_its_qos_class(
    core: client.CoreV1Api, ns: str, resources: dict, qos: str
) -> None:
    """Whatever status the request carried, a new pod's is the strategy's: Pending, and
    the QoS class kubectl describe shows and eviction reads."""
    container = {"name": "main", "image": PAUSE, "resources": resources}
    body = {
        "metadata": {"name": unique("pod")},
        "spec": {"containers": [container]},
        "status": {"phase": "Running", "podIP": "10.0.0.1"},
    }
    status = core.create_namespaced_pod(ns, body).status
    assert (status.phase, status.qos_class, status.pod_ip) == ("Pending", qos, None)


def test_a_gated_pod_says_why_it_is_not_scheduled(core: client.CoreV1Api, ns: str) -> None:
    spec = {
        "schedulingGates": [{"name": "example.com/wait"}],
        "containers": [{"name": "main", "image": PAUSE}],
    }
    status = core.create_namespaced_pod(
        ns, {"metadata": {"name": unique("pod")}, "spec": spec}
    ).status
    (condition,) = status.conditions
    assert (condition.type, condition.status, condition.reason) == (
        "PodScheduled",
        "False",
        "SchedulingGated",
    )
    assert condition.message == "Scheduling is blocked due to non-empty scheduling gates"


def _gated_pod(core: client.CoreV1Api, ns: str) -> str:
    """A pod no scheduler or kubelet touches (its gate is never removed): only the test
    writes its status."""
    name = unique("pod")
    spec = {
        "schedulingGates": [{"name": "example.com/wait"}],
        "containers": [{"name": "main", "image": PAUSE}],
    }
    core.create_namespaced_pod(ns, {"metadata": {"name": name}, "spec": spec})
    return name


def _ips(api: ApiClient, status: client.V1PodStatus) -> tuple[str | None, list[str]]:
    written = to_dict(api, status)
    return written.get("podIP"), [ip["ip"] for ip in written.get("podIPs") or ()]


@pytest.mark.parametrize(
    ("sent", "stored"),
    [
        ({"podIP": "10.0.0.5"}, ("10.0.0.5", ["10.0.0.5"])),
        (
            {"podIPs": [{"ip": "10.0.0.5"}, {"ip": "fd00::5"}]},
            ("10.0.0.5", ["10.0.0.5", "fd00::5"]),
        ),
        (
            {"podIP": "10.0.0.5", "podIPs": [{"ip": "10.0.0.5"}, {"ip": "fd00::5"}]},
            ("10.0.0.5", ["10.0.0.5", "fd00::5"]),
        ),
    ],
)
def test_a_pods_ip_and_its_ips_are_one_field(
    api: ApiClient, core: client.CoreV1Api, ns: str, sent: dict, stored: tuple
) -> None:
    """kube's core/v1 conversion: podIP is podIPs[0], whichever of the two is written."""
    name = _gated_pod(core, ns)
    written = core.patch_namespaced_pod_status(name, ns, {"status": sent}).status
    assert _ips(api, written) == stored
    assert _ips(api, core.read_namespaced_pod_status(name, ns).status) == stored


def test_a_client_that_writes_only_the_pod_ip_replaces_the_ips(
    api: ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    """When podIP and podIPs[0] differ, podIP wins (an older client patched it alone)."""
    name = _gated_pod(core, ns)
    both = {"podIP": "10.0.0.5", "podIPs": [{"ip": "10.0.0.5"}, {"ip": "fd00::5"}]}
    core.patch_namespaced_pod_status(name, ns, {"status": both})
    written = core.patch_namespaced_pod_status(name, ns, {"status": {"podIP": "10.0.0.6"}})
    assert _ips(api, written.status) == ("10.0.0.6", ["10.0.0.6"])


def test_a_pods_first_host_ip_must_be_its_host_ip(
    api: ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    """hostIP and hostIPs are two fields (neither fills the other), validated together."""
    name = _gated_pod(core, ns)
    with raises_status(422, "Invalid") as status:
        core.patch_namespaced_pod_status(
            name, ns, {"status": {"hostIP": "10.1.0.1", "hostIPs": [{"ip": "10.1.0.2"}]}}
        )
    assert status["details"]["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "message": 'Invalid value: "10.1.0.2": must be equal to `hostIP`',
            "field": "status.hostIPs[0].ip",
        }
    ]
    with raises_status(422, "Invalid"):
        core.patch_namespaced_pod_status(name, ns, {"status": {"hostIPs": [{"ip": "10.1.0.1"}]}})
    written = to_dict(
        api, core.patch_namespaced_pod_status(name, ns, {"status": {"hostIP": "10.1.0.1"}}).status
    )
    assert (written.get("hostIP"), written.get("hostIPs")) == ("10.1.0.1", None)


_BAD_IP = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"
_ONE_PER_FAMILY = "may specify no more than one IP for each IP family"


def _causes(status: dict) -> list[tuple[str, str]]:
    return [(c["field"], c["reason"]) for c in status["details"]["causes"]]


@pytest.mark.parametrize("field", ["podIPs", "hostIPs"])
@pytest.mark.parametrize(
    ("ips", "refused"),
    [
        (["not-an-ip"], [("[0]", "FieldValueInvalid")]),
        (["10.0.0.1", "10.0.0.2"], [("", "FieldValueInvalid")]),
        (["fd00::1", "fd00::2"], [("", "FieldValueInvalid")]),
        (["10.0.0.1", "fd00::1", "10.0.0.2"], [("", "FieldValueInvalid")]),
    ],
)
def test_a_pods_ips_and_host_ips_are_valid_ips_one_of_each_family(
    core: client.CoreV1Api, ns: str, field: str, ips: list[str], refused: list[tuple[str, str]]
) -> None:
    """validatePodIPs and validateHostIPs: each a valid IP, at most one per family."""
    name = _gated_pod(core, ns)
    status: dict = {field: [{"ip": ip} for ip in ips]}
    if field == "hostIPs":
        status["hostIP"] = ips[0]  # hostIPs[0] must be hostIP: not the fault tested here
    with raises_status(422, "Invalid") as refusal:
        core.patch_namespaced_pod_status(
            name, ns, {"status": status}, _content_type="application/merge-patch+json"
        )
    at = f"status.{field}"
    assert _causes(refusal) == [(at + suffix, reason) for suffix, reason in refused]
    message = refusal["details"]["causes"][0]["message"]
    if len(ips) == 1:
        assert message == f'Invalid value: "{ips[0]}": {_BAD_IP}'
    else:
        assert message.startswith("Invalid value: ")
        assert message.endswith(f": {_ONE_PER_FAMILY}")
    assert refusal["message"].startswith(f'Pod "{name}" is invalid: {at}')


@pytest.mark.parametrize("field", ["podIPs", "hostIPs"])
def test_a_pods_ip_listed_twice_is_a_duplicate(
    api: ApiClient, core: client.CoreV1Api, ns: str, field: str
) -> None:
    """Two IPs of one family, the same twice: refused for the family and as a duplicate
    (validateHostIPs looks for duplicates first); one of each family is taken."""
    name = _gated_pod(core, ns)
    extra = {"hostIP": "10.0.0.1"} if field == "hostIPs" else {}
    twice = {field: [{"ip": "10.0.0.1"}, {"ip": "10.0.0.1"}], **extra}
    with raises_status(422, "Invalid") as refusal:
        core.patch_namespaced_pod_status(
            name, ns, {"status": twice}, _content_type="application/merge-patch+json"
        )
    at = f"status.{field}"
    duplicate = (f"{at}[1]", "FieldValueDuplicate")
    family = (at, "FieldValueInvalid")
    expected = [duplicate, family] if field == "hostIPs" else [family, duplicate]
    assert _causes(refusal) == expected
    messages = [c["message"] for c in refusal["details"]["causes"]]
    assert messages[expected.index(duplicate)].startswith("Duplicate value: ")
    assert "10.0.0.1" in messages[expected.index(duplicate)]
    dual = {field: [{"ip": "10.0.0.1"}, {"ip": "fd00::1"}], **extra}
    written = to_dict(api, core.patch_namespaced_pod_status(name, ns, {"status": dual}).status)
    assert [ip["ip"] for ip in written[field]] == ["10.0.0.1", "fd00::1"]


def test_without_status_subresource_a_status_change_bumps_the_generation(
    custom: client.CustomObjectsApi, widget_crds: dict[str, str]
) -> None:
    # gadgets have no status subresource (Argo CD's Application is such a kind): every
    # change outside metadata is a new generation, as apiextensions' PrepareForUpdate says
    g, v, plural = widget_crds["group"], widget_crds["version"], widget_crds["gadgets"]
    name = unique("g")
    body = widget(name, {"size": 1})
    body["kind"] = "Gadget"
    created = custom.create_cluster_custom_object(g, v, plural, body)
    assert created["metadata"]["generation"] == 1
    try:
        patched = custom.patch_cluster_custom_object(
            g, v, plural, name, {"status": {"phase": "Synced"}}
        )
        assert patched["status"] == {"phase": "Synced"}
        assert patched["metadata"]["generation"] == 2
        patched = custom.patch_cluster_custom_object(
            g, v, plural, name, {"metadata": {"labels": {"a": "b"}}}
        )
        assert patched["metadata"]["generation"] == 2
        patched = custom.patch_cluster_custom_object(g, v, plural, name, {"spec": {"size": 2}})
        assert patched["metadata"]["generation"] == 3
    finally:
        custom.delete_cluster_custom_object(g, v, plural, name)
