"""Built-in kinds that operators own besides their workloads: HorizontalPodAutoscalers (v2, and
v1 converted to and from it), PodDisruptionBudgets, PriorityClasses, ResourceQuotas and
LimitRanges, with the defaults and checks kube-apiserver applies to them; and the rest of
kube 1.31's kinds an operator meets (ReplicationControllers and their /scale,
PersistentVolumes, PodTemplates, ControllerRevisions, NetworkPolicies, IngressClasses,
StorageClasses, CSIDrivers, CSINodes, VolumeAttachments, RuntimeClasses), served with
kube-apiserver's discovery attributes and scheme defaults."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client import ApiClient

from tests._protobuf_wire import CONTENT_TYPE as PB_CONTENT_TYPE
from tests._protobuf_wire import body as pb_body

from ._support import raw, unique

pytestmark = pytest.mark.timeout(30)

HPA_V1 = "/apis/autoscaling/v1/namespaces/{ns}/horizontalpodautoscalers"
HPA_V2 = "/apis/autoscaling/v2/namespaces/{ns}/horizontalpodautoscalers"
PRIORITY_CLASSES = "/apis/scheduling.k8s.io/v1/priorityclasses"
TARGET = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}


def created(api: ApiClient, path: str, body: dict[str, Any]) -> dict[str, Any]:
    resp = raw(api, "POST", path, body=body)
    assert resp.status == 201, resp.data
    return resp.json()  # type: ignore[no-any-return]


def got(api: ApiClient, path: str) -> dict[str, Any]:
    resp = raw(api, "GET", path)
    assert resp.status == 200, resp.data
    return resp.json()  # type: ignore[no-any-return]


def cpu(utilization: int) -> dict[str, Any]:
    target = {"type": "Utilization", "averageUtilization": utilization}
    return {"type": "Resource", "resource": {"name": "cpu", "target": target}}


def test_an_hpa_gets_kube_apiservers_defaults(api: ApiClient, ns: str) -> None:
    hpa = created(
        api,
        HPA_V2.format(ns=ns),
        {
            "apiVersion": "autoscaling/v2",
            "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": unique("hpa")},
            "spec": {"scaleTargetRef": TARGET, "maxReplicas": 4, "behavior": {"scaleDown": {}}},
        },
    )
    spec = hpa["spec"]
    assert spec["minReplicas"] == 1
    assert spec["metrics"] == [cpu(80)]
    assert spec["behavior"]["scaleDown"]["stabilizationWindowSeconds"] == 300
    assert spec["behavior"]["scaleUp"]["selectPolicy"] == "Max"


def test_a_v1_hpa_is_the_v2_one_converted(api: ApiClient, ns: str) -> None:
    name = unique("hpa")
    v1 = created(
        api,
        HPA_V1.format(ns=ns),
        {
            "apiVersion": "autoscaling/v1",
            "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": name},
            "spec": {
                "scaleTargetRef": TARGET,
                "maxReplicas": 3,
                "targetCPUUtilizationPercentage": 50,
            },
        },
    )
    assert v1["apiVersion"] == "autoscaling/v1"
    assert v1["spec"]["targetCPUUtilizationPercentage"] == 50
    v2 = got(api, f"{HPA_V2.format(ns=ns)}/{name}")
    assert v2["spec"]["metrics"] == [cpu(50)]
    assert v2["spec"]["minReplicas"] == 1


def test_what_v1_cannot_hold_survives_a_v1_update(api: ApiClient, ns: str) -> None:
    name = unique("hpa")
    memory = {
        "type": "Resource",
        "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "500Mi"}},
    }
    created(
        api,
        HPA_V2.format(ns=ns),
        {
            "apiVersion": "autoscaling/v2",
            "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": name},
            "spec": {"scaleTargetRef": TARGET, "maxReplicas": 3, "metrics": [cpu(70), memory]},
        },
    )
    v1 = got(api, f"{HPA_V1.format(ns=ns)}/{name}")
    assert v1["spec"]["targetCPUUtilizationPercentage"] == 70
    assert "autoscaling.alpha.kubernetes.io/metrics" in v1["metadata"]["annotations"]
    v1["spec"]["maxReplicas"] = 6
    resp = raw(api, "PUT", f"{HPA_V1.format(ns=ns)}/{name}", body=v1)
    assert resp.status == 200, resp.data
    v2 = got(api, f"{HPA_V2.format(ns=ns)}/{name}")
    assert v2["spec"]["maxReplicas"] == 6
    assert v2["spec"]["metrics"] == [cpu(70), memory]
    assert "autoscaling.alpha.kubernetes.io/metrics" not in (
        v2["metadata"].get("annotations") or {}
    )


def test_a_pdb_takes_min_available_or_max_unavailable(api: ApiClient, ns: str) -> None:
    path = f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets"
    selector = {"matchLabels": {"app": "web"}}

    def pdb(**spec: Any) -> dict[str, Any]:
        return {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": unique("pdb")},
            "spec": {"selector": selector, **spec},
        }

    made = created(api, path, pdb(minAvailable="50%"))
    assert made["spec"]["minAvailable"] == "50%"
    both = raw(api, "POST", path, body=pdb(minAvailable=1, maxUnavailable=1))
    assert both.status == 422, both.data
    assert "minAvailable and maxUnavailable cannot be both set" in both.json()["message"]


def test_every_cluster_has_the_system_priority_classes(api: ApiClient) -> None:
    for name, value in (
        ("system-node-critical", 2000001000),
        ("system-cluster-critical", 2000000000),
    ):
        assert got(api, f"{PRIORITY_CLASSES}/{name}")["value"] == value


def test_a_priority_class_is_checked_and_defaulted(api: ApiClient) -> None:
    name = unique("conformance-pc")

    def pc(value: int, pc_name: str = name) -> dict[str, Any]:
        return {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": pc_name},
            "value": value,
        }

    made = created(api, PRIORITY_CLASSES, pc(1000))
    try:
        assert made["preemptionPolicy"] == "PreemptLowerPriority"
        changed = raw(api, "PUT", f"{PRIORITY_CLASSES}/{name}", body={**made, "value": 2000})
        assert changed.status == 422, changed.data
        too_high = raw(
            api, "POST", PRIORITY_CLASSES, body=pc(1_000_000_001, unique("conformance-pc"))
        )
        assert too_high.status == 422, too_high.data
        assert "maximum allowed value of a user defined priority" in too_high.json()["message"]
        reserved = raw(api, "POST", PRIORITY_CLASSES, body=pc(5, unique("system-conformance")))
        assert reserved.status == 422, reserved.data
    finally:
        raw(api, "DELETE", f"{PRIORITY_CLASSES}/{name}")


def test_quotas_and_limit_ranges_are_stored(api: ApiClient, ns: str) -> None:
    quota = created(
        api,
        f"/api/v1/namespaces/{ns}/resourcequotas",
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "q"},
            "spec": {"hard": {"pods": "10"}},
        },
    )
    assert quota["spec"]["hard"] == {"pods": "10"}
    limits = {"limits": [{"type": "Container", "default": {"cpu": "500m"}}]}
    created(
        api,
        f"/api/v1/namespaces/{ns}/limitranges",
        {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "l"}, "spec": limits},
    )
    assert got(api, f"/api/v1/namespaces/{ns}/limitranges/l")["spec"]["limits"][0]["default"] == {
        "cpu": "500m"
    }


# ------------------------------------------------ the rest of kube 1.31's built-in kinds

_TEMPLATE = {
    "metadata": {"labels": {"app": "web"}},
    "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]},
}
#: (group, version, plural): (kind, namespaced, shortNames, categories, subresources)
SERVED: dict[tuple[str, str, str], tuple[str, bool, list[str], list[str], set[str]]] = {
    ("", "v1", "replicationcontrollers"): (
        "ReplicationController",
        True,
        ["rc"],
        ["all"],
        {"status", "scale"},
    ),
    ("", "v1", "persistentvolumes"): ("PersistentVolume", False, ["pv"], [], {"status"}),
    ("", "v1", "podtemplates"): ("PodTemplate", True, [], [], set()),
    ("apps", "v1", "controllerrevisions"): ("ControllerRevision", True, [], [], set()),
    ("networking.k8s.io", "v1", "networkpolicies"): ("NetworkPolicy", True, ["netpol"], [], set()),
    ("networking.k8s.io", "v1", "ingressclasses"): ("IngressClass", False, [], [], set()),
    ("storage.k8s.io", "v1", "storageclasses"): ("StorageClass", False, ["sc"], [], set()),
    ("storage.k8s.io", "v1", "csidrivers"): ("CSIDriver", False, [], [], set()),
    ("storage.k8s.io", "v1", "csinodes"): ("CSINode", False, [], [], set()),
    ("storage.k8s.io", "v1", "volumeattachments"): ("VolumeAttachment", False, [], [], {"status"}),
    ("node.k8s.io", "v1", "runtimeclasses"): ("RuntimeClass", False, [], [], set()),
}


def _collection(group: str, version: str, plural: str, ns: str | None) -> str:
    base = f"/apis/{group}/{version}" if group else f"/api/{version}"
    return f"{base}/namespaces/{ns}/{plural}" if ns else f"{base}/{plural}"


@pytest.mark.parametrize(
    ("group", "version", "plural"), list(SERVED), ids=[p for _, _, p in SERVED]
)
def test_discovery_lists_the_kind_as_kube_apiserver_does(
    api: ApiClient, group: str, version: str, plural: str
) -> None:
    kind, namespaced, short_names, categories, subresources = SERVED[(group, version, plural)]
    listed = got(api, f"/apis/{group}/{version}" if group else f"/api/{version}")["resources"]
    by_name = {r["name"]: r for r in listed}
    entry = by_name[plural]
    assert entry["kind"] == kind
    assert entry["singularName"] == kind.lower()
    assert entry["namespaced"] is namespaced
    assert sorted(entry["verbs"]) == sorted(
        ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
    )
    assert entry.get("shortNames", []) == short_names
    assert entry.get("categories", []) == categories
    served = {name.split("/", 1)[1] for name in by_name if name.startswith(plural + "/")}
    assert served == subresources
    if "scale" in subresources:
        scale = by_name[plural + "/scale"]
        assert (scale["group"], scale["version"], scale["kind"]) == ("autoscaling", "v1", "Scale")


def _manifests(name: str) -> dict[tuple[str, str, str], dict[str, Any]]:
    """One valid object of each kind, named ``name``."""
    return {
        ("", "v1", "replicationcontrollers"): {
            "spec": {"selector": {"app": "web"}, "template": _TEMPLATE}
        },
        ("", "v1", "persistentvolumes"): {
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "hostPath": {"path": f"/tmp/{name}"},
            }
        },
        ("", "v1", "podtemplates"): {"template": _TEMPLATE},
        ("apps", "v1", "controllerrevisions"): {"revision": 1, "data": {"spec": {}}},
        ("networking.k8s.io", "v1", "networkpolicies"): {"spec": {"podSelector": {}}},
        ("networking.k8s.io", "v1", "ingressclasses"): {
            "spec": {"controller": "example.com/ingress"}
        },
        ("storage.k8s.io", "v1", "storageclasses"): {"provisioner": "example.com/disk"},
        ("storage.k8s.io", "v1", "csidrivers"): {"spec": {}},
        ("storage.k8s.io", "v1", "csinodes"): {"spec": {"drivers": []}},
        ("storage.k8s.io", "v1", "volumeattachments"): {
            "spec": {
                "attacher": "example.com/disk",
                "nodeName": "node-1",
                "source": {"persistentVolumeName": "pv-1"},
            }
        },
        ("node.k8s.io", "v1", "runtimeclasses"): {"handler": "runc"},
    }


@pytest.mark.parametrize(
    ("group", "version", "plural"), list(SERVED), ids=[p for _, _, p in SERVED]
)
def test_each_kind_is_created_read_listed_and_deleted(
    api: ApiClient, ns: str, group: str, version: str, plural: str
) -> None:
    kind, namespaced = SERVED[(group, version, plural)][:2]
    name = unique("conformance-kind")
    path = _collection(group, version, plural, ns if namespaced else None)
    body = {
        "apiVersion": f"{group}/{version}" if group else version,
        "kind": kind,
        "metadata": {"name": name},
        **_manifests(name)[(group, version, plural)],
    }
    made = created(api, path, body)
    try:
        assert (made["kind"], made["metadata"]["name"]) == (kind, name)
        assert got(api, f"{path}/{name}")["metadata"]["uid"] == made["metadata"]["uid"]
        listed = got(api, path)
        assert listed["kind"] == kind + "List"
        assert name in [item["metadata"]["name"] for item in listed["items"]]
    finally:
        deleted = raw(api, "DELETE", f"{path}/{name}")
        assert deleted.status in (200, 202), deleted.data
    assert raw(api, "GET", f"{path}/{name}").status == 404


def test_the_typed_client_reads_the_new_kinds(api: ApiClient, ns: str) -> None:
    # the models' required fields are there (RC's status.replicas, as kube-apiserver writes it)
    name = unique("typed")
    rc_path = _collection("", "v1", "replicationcontrollers", ns)
    created(api, rc_path, {"metadata": {"name": name}, "spec": {"template": _TEMPLATE}})
    rc = client.CoreV1Api(api).read_namespaced_replication_controller(name, ns)
    assert rc.spec.replicas == 1 and rc.status.replicas == 0
    policies = client.NetworkingV1Api(api).list_namespaced_network_policy(ns).items
    assert policies == []
    assert isinstance(client.StorageV1Api(api).list_storage_class().items, list)
    assert isinstance(client.NodeV1Api(api).list_runtime_class().items, list)


def test_storage_classes_and_volumes_get_their_scheme_defaults(api: ApiClient) -> None:
    sc_name, pv_name = unique("conformance-sc"), unique("conformance-pv")
    sc_path, pv_path = "/apis/storage.k8s.io/v1/storageclasses", "/api/v1/persistentvolumes"
    sc = created(
        api,
        sc_path,
        {"metadata": {"name": sc_name}, "provisioner": "example.com/disk"},
    )
    try:
        assert sc["reclaimPolicy"] == "Delete"
        assert sc["volumeBindingMode"] == "Immediate"
        assert "generation" not in sc["metadata"]
        pv = created(
            api,
            pv_path,
            {
                "metadata": {"name": pv_name},
                "spec": {
                    "capacity": {"storage": "1Gi"},
                    "accessModes": ["ReadWriteOnce"],
                    "storageClassName": sc_name,
                    "hostPath": {"path": "/tmp/pv"},
                },
            },
        )
        assert pv["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
        assert pv["spec"]["volumeMode"] == "Filesystem"
        assert pv["spec"]["hostPath"] == {"path": "/tmp/pv", "type": ""}
        assert pv["status"]["phase"] == "Pending"
    finally:
        raw(api, "DELETE", f"{pv_path}/{pv_name}")
        raw(api, "DELETE", f"{sc_path}/{sc_name}")


def test_a_csi_driver_gets_its_scheme_defaults(api: ApiClient) -> None:
    name = unique("conformance.csi.example.com")
    path = "/apis/storage.k8s.io/v1/csidrivers"
    driver = created(api, path, {"metadata": {"name": name}, "spec": {}})
    try:
        assert driver["spec"] == {
            "attachRequired": True,
            "podInfoOnMount": False,
            "storageCapacity": False,
            "fsGroupPolicy": "ReadWriteOnceWithFSType",
            "volumeLifecycleModes": ["Persistent"],
            "requiresRepublish": False,
            "seLinuxMount": False,
        }
    finally:
        raw(api, "DELETE", f"{path}/{name}")


def test_network_policies_get_their_policy_types_and_a_generation(api: ApiClient, ns: str) -> None:
    path = f"/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies"
    ingress_only = created(
        api,
        path,
        {
            "metadata": {"name": unique("np")},
            "spec": {"podSelector": {}, "ingress": [{"ports": [{"port": 80}]}]},
        },
    )
    assert ingress_only["spec"]["policyTypes"] == ["Ingress"]
    assert ingress_only["spec"]["ingress"][0]["ports"] == [{"port": 80, "protocol": "TCP"}]
    assert ingress_only["metadata"]["generation"] == 1
    both = created(
        api,
        path,
        {"metadata": {"name": unique("np")}, "spec": {"podSelector": {}, "egress": [{}]}},
    )
    assert both["spec"]["policyTypes"] == ["Ingress", "Egress"]
    name = ingress_only["metadata"]["name"]
    changed = raw(
        api,
        "PATCH",
        f"{path}/{name}",
        body={"spec": {"podSelector": {"matchLabels": {"app": "web"}}}},
        content_type="application/merge-patch+json",
    )
    assert changed.status == 200, changed.data
    assert changed.json()["metadata"]["generation"] == 2


def test_an_ingress_class_parameters_scope_defaults_to_cluster(api: ApiClient) -> None:
    name = unique("conformance-ic")
    path = "/apis/networking.k8s.io/v1/ingressclasses"
    params = {"apiGroup": "example.com", "kind": "Params", "name": "p"}
    made = created(
        api,
        path,
        {
            "metadata": {"name": name},
            "spec": {"controller": "example.com/ic", "parameters": params},
        },
    )
    try:
        assert made["spec"]["parameters"] == {**params, "scope": "Cluster"}
        assert made["metadata"]["generation"] == 1
    finally:
        raw(api, "DELETE", f"{path}/{name}")


def test_a_replication_controller_is_defaulted_and_scaled(api: ApiClient, ns: str) -> None:
    name = unique("rc")
    path = _collection("", "v1", "replicationcontrollers", ns)
    rc = created(api, path, {"metadata": {"name": name}, "spec": {"template": _TEMPLATE}})
    # SetDefaults_ReplicationController: selector and labels from the template, one replica
    assert rc["spec"]["selector"] == {"app": "web"}
    assert rc["metadata"]["labels"] == {"app": "web"}
    assert rc["spec"]["replicas"] == 1
    assert rc["metadata"]["generation"] == 1
    assert rc["spec"]["template"]["spec"]["restartPolicy"] == "Always"
    scale = got(api, f"{path}/{name}/scale")
    assert (scale["apiVersion"], scale["kind"]) == ("autoscaling/v1", "Scale")
    assert scale["spec"] == {"replicas": 1}
    assert scale["status"] == {"replicas": 0, "selector": "app=web"}
    scale["spec"]["replicas"] = 3
    resp = raw(api, "PUT", f"{path}/{name}/scale", body=scale)
    assert resp.status == 200, resp.data
    assert resp.json()["spec"]["replicas"] == 3
    after = got(api, f"{path}/{name}")
    assert after["spec"]["replicas"] == 3
    assert after["metadata"]["generation"] == 2


def test_a_protobuf_storage_class_is_created(api: ApiClient) -> None:
    # StorageClass{metadata: 1 {name: 1}, provisioner: 2, reclaimPolicy: 4}, as client-go writes it
    name = unique("conformance-pb-sc")
    path = "/apis/storage.k8s.io/v1/storageclasses"
    sc = [(1, [(1, name)]), (2, "example.com/disk"), (4, "Retain")]
    resp = raw(
        api,
        "POST",
        path,
        body=pb_body("storage.k8s.io/v1", "StorageClass", sc),
        content_type=PB_CONTENT_TYPE,
    )
    try:
        assert resp.status == 201, resp.data
        stored = got(api, f"{path}/{name}")
        assert stored["provisioner"] == "example.com/disk"
        assert stored["reclaimPolicy"] == "Retain"
        assert stored["volumeBindingMode"] == "Immediate"
    finally:
        raw(api, "DELETE", f"{path}/{name}")


def test_a_claim_gets_its_scheme_defaults(api: ApiClient, ns: str) -> None:
    # SetDefaults_PersistentVolumeClaim(Spec): a file-system volume, Pending until bound
    path = f"/api/v1/namespaces/{ns}/persistentvolumeclaims"
    spec = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    claim = created(api, path, {"metadata": {"name": "data"}, "spec": spec})
    assert claim["spec"]["volumeMode"] == "Filesystem"
    assert claim["status"]["phase"] == "Pending"
    read = raw(api, "GET", f"{path}/data").json()
    assert (read["spec"]["volumeMode"], read["status"]["phase"]) == ("Filesystem", "Pending")
