"""kube-apiserver's built-in admission plugins that change every Pod: ServiceAccount, Priority
and DefaultTolerationSeconds (enabled by default), which a controller comparing the pod it
created with the live one must expect."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client import ApiClient

from ._support import PAUSE, pod, raises_status, to_dict, unique
from .test_admission_webhooks import Hooks, admission, hooks, rules_for

__all__ = ["admission", "hooks"]  # the webhook fixtures, used here too

pytestmark = pytest.mark.timeout(60)

DEFAULT_TOLERATIONS = [
    {
        "key": "node.kubernetes.io/not-ready",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
    {
        "key": "node.kubernetes.io/unreachable",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
]


def owned_spec_fields(created: dict[str, Any]) -> set[str]:
    """The ``spec`` fields any manager of ``created`` owns."""
    owned: set[str] = set()
    for entry in created["metadata"].get("managedFields") or ():
        owned.update((entry.get("fieldsV1") or {}).get("f:spec", {}))
    return owned


def pod_hook(hooks: Hooks, path: str, ns: str) -> dict[str, Any]:
    """A mutating webhook at ``path`` on the pods created in ``ns``."""
    return hooks.config(
        "MutatingWebhookConfiguration",
        unique("m"),
        path,
        rules=rules_for("", "pods", "CREATE"),
        namespaceSelector={"matchLabels": {"kubernetes.io/metadata.name": ns}},
    )


@pytest.fixture
def scheduling(kube_api_client: ApiClient) -> client.SchedulingV1Api:
    return client.SchedulingV1Api(kube_api_client)


@pytest.fixture
def priority_class(scheduling: client.SchedulingV1Api) -> Iterator[str]:
    """A user PriorityClass of value 1000 that never preempts; deleted after the test."""
    name = unique("pc")
    body = {"metadata": {"name": name}, "value": 1000, "preemptionPolicy": "Never"}
    scheduling.create_priority_class(body)
    try:
        yield name
    finally:
        scheduling.delete_priority_class(name)


def test_a_pod_without_a_class_gets_priority_zero_and_the_default_tolerations(
    api: ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    name = unique("pod")
    created = to_dict(api, core.create_namespaced_pod(ns, pod(name)))
    spec = created["spec"]
    assert spec["priority"] == 0
    assert spec["preemptionPolicy"] == "PreemptLowerPriority"
    assert "priorityClassName" not in spec
    assert spec["tolerations"] == DEFAULT_TOLERATIONS
    # set by admission, after the field manager recorded the request: nobody's fields
    assert owned_spec_fields(created).isdisjoint({"f:priority", "f:tolerations"})
    assert "f:preemptionPolicy" not in owned_spec_fields(created)
    assert to_dict(api, core.read_namespaced_pod(name, ns)) == created


def test_a_pod_gets_the_value_and_preemption_policy_of_its_class(
    api: ApiClient, core: client.CoreV1Api, ns: str, priority_class: str
) -> None:
    created = to_dict(
        api, core.create_namespaced_pod(ns, pod(unique("pod"), priorityClassName=priority_class))
    )
    spec = created["spec"]
    assert (spec["priorityClassName"], spec["priority"], spec["preemptionPolicy"]) == (
        priority_class,
        1000,
        "Never",
    )
    system = to_dict(
        api,
        core.create_namespaced_pod(
            ns, pod(unique("pod"), priorityClassName="system-cluster-critical")
        ),
    )
    assert system["spec"]["priority"] == 2_000_000_000
    assert system["spec"]["preemptionPolicy"] == "PreemptLowerPriority"


@pytest.mark.parametrize(
    ("field", "why"),
    [
        ("priorityClassName", "no PriorityClass with name nobody was found"),
        (
            "serviceAccountName",
            'error looking up service account {ns}/nobody: serviceaccount "nobody" not found',
        ),
    ],
)
def test_an_unknown_class_or_account_is_forbidden(
    core: client.CoreV1Api, ns: str, field: str, why: str
) -> None:
    name = unique("pod")
    with raises_status(403, "Forbidden") as status:
        core.create_namespaced_pod(ns, pod(name, **{field: "nobody"}))
    assert status["message"] == f'pods "{name}" is forbidden: {why.format(ns=ns)}'
    assert (status["details"]["name"], status["details"]["kind"]) == (name, "pods")


def test_a_priority_or_policy_other_than_the_class_s_is_forbidden(
    api: ApiClient, core: client.CoreV1Api, ns: str, priority_class: str
) -> None:
    name = unique("pod")
    with raises_status(403, "Forbidden") as status:
        core.create_namespaced_pod(ns, pod(name, priority=5))
    assert status["message"] == (
        f'pods "{name}" is forbidden: the integer value of priority (5) must not be provided '
        "in pod spec; priority admission controller computed 0 from the given PriorityClass name"
    )
    with raises_status(403, "Forbidden") as status:
        core.create_namespaced_pod(
            ns, pod(name, priorityClassName=priority_class, preemptionPolicy="PreemptLowerPriority")
        )
    assert status["message"] == (
        f'pods "{name}" is forbidden: the string value of PreemptionPolicy '
        "(PreemptLowerPriority) must not be provided in pod spec; priority admission "
        "controller computed Never from the given PriorityClass name"
    )
    # the same values as the class's are accepted
    same = pod(name, priorityClassName=priority_class, priority=1000, preemptionPolicy="Never")
    assert to_dict(api, core.create_namespaced_pod(ns, same))["spec"]["priority"] == 1000


def test_a_pod_that_tolerates_a_taint_keeps_its_own_toleration(
    api: ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    own = {
        "key": "node.kubernetes.io/not-ready",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 30,
    }
    created = to_dict(api, core.create_namespaced_pod(ns, pod(unique("pod"), tolerations=[own])))
    assert created["spec"]["tolerations"] == [own, DEFAULT_TOLERATIONS[1]]

    # a toleration of every taint (empty key, Exists, any effect) tolerates both
    everything = {"operator": "Exists"}
    created = to_dict(
        api, core.create_namespaced_pod(ns, pod(unique("pod"), tolerations=[everything]))
    )
    assert created["spec"]["tolerations"] == [everything]

    # another effect of the same key does not
    no_schedule = {
        "key": "node.kubernetes.io/unreachable",
        "operator": "Exists",
        "effect": "NoSchedule",
    }
    created = to_dict(
        api, core.create_namespaced_pod(ns, pod(unique("pod"), tolerations=[no_schedule]))
    )
    assert created["spec"]["tolerations"] == [no_schedule, *DEFAULT_TOLERATIONS]


def test_an_update_leaving_them_out_keeps_them(
    api: ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    name = unique("pod")
    created = to_dict(api, core.create_namespaced_pod(ns, pod(name)))
    body = to_dict(api, core.read_namespaced_pod(name, ns))
    for field in ("priority", "preemptionPolicy", "tolerations"):
        del body["spec"][field]
    body["metadata"]["labels"] = {"updated": "yes"}
    updated = to_dict(api, core.replace_namespaced_pod(name, ns, body))
    assert updated["metadata"]["labels"] == {"updated": "yes"}
    for field in ("priority", "preemptionPolicy", "tolerations"):
        assert updated["spec"][field] == created["spec"][field]


def test_a_dry_run_shows_them(api: ApiClient, core: client.CoreV1Api, ns: str) -> None:
    name = unique("pod")
    shown = to_dict(api, core.create_namespaced_pod(ns, pod(name), dry_run="All"))
    assert shown["spec"]["priority"] == 0
    assert shown["spec"]["tolerations"] == DEFAULT_TOLERATIONS
    with raises_status(404, "NotFound"):
        core.read_namespaced_pod(name, ns)


def test_mutating_webhooks_see_what_the_plugins_set(
    api: ApiClient, hooks: Hooks, admission: Any, core: client.CoreV1Api, ns: str
) -> None:
    """kube-apiserver runs the built-in plugins before the MutatingAdmissionWebhook plugin;
    what both set belongs to no field manager."""
    admission(pod_hook(hooks, "/label", ns))
    created = to_dict(api, core.create_namespaced_pod(ns, pod(unique("pod"))))
    seen = hooks.seen["/label"][-1].obj
    assert seen is not None
    assert seen["spec"]["priority"] == 0
    assert seen["spec"]["preemptionPolicy"] == "PreemptLowerPriority"
    assert seen["spec"]["tolerations"] == DEFAULT_TOLERATIONS
    assert created["metadata"]["labels"] == {"mutated": "yes"}
    assert created["spec"]["tolerations"] == DEFAULT_TOLERATIONS
    assert owned_spec_fields(created).isdisjoint(
        {"f:priority", "f:preemptionPolicy", "f:tolerations"}
    )
    for entry in created["metadata"]["managedFields"]:
        assert "f:labels" not in entry["fieldsV1"].get("f:metadata", {})


def test_a_webhook_that_sets_only_the_class_is_refused_as_on_kube(
    hooks: Hooks, admission: Any, core: client.CoreV1Api, ns: str, priority_class: str
) -> None:
    """A webhook's change makes kube-apiserver run the built-in plugins again
    (``reinvocation.go``): Priority then finds the ``priority`` it set before the webhook
    named another class (the failure operators meet when a webhook writes only
    ``priorityClassName``)."""
    admission(pod_hook(hooks, "/pod-class", ns))
    name = unique("pod")
    body = pod(name)
    body["metadata"]["annotations"] = {"pod-class": priority_class}
    with raises_status(403, "Forbidden") as status:
        core.create_namespaced_pod(ns, body)
    assert status["message"] == (
        f'pods "{name}" is forbidden: the integer value of priority (0) must not be provided '
        "in pod spec; priority admission controller computed 1000 from the given PriorityClass "
        "name"
    )
    assert hooks.seen["/pod-class"][-1].obj["spec"]["priority"] == 0  # type: ignore[index]


def test_a_global_default_class_is_the_pod_s_and_the_only_one(
    api: ApiClient, core: client.CoreV1Api, scheduling: client.SchedulingV1Api, ns: str
) -> None:
    if any(pc.global_default for pc in scheduling.list_priority_class().items):
        pytest.skip("this cluster has a globalDefault PriorityClass already")
    name = unique("pc")
    scheduling.create_priority_class(
        {"metadata": {"name": name}, "value": 7, "globalDefault": True}
    )
    try:
        created = to_dict(api, core.create_namespaced_pod(ns, pod(unique("pod"))))
        spec = created["spec"]
        assert (spec["priorityClassName"], spec["priority"]) == (name, 7)
        assert spec["preemptionPolicy"] == "PreemptLowerPriority"
        other = unique("pc")
        with raises_status(403, "Forbidden") as status:
            scheduling.create_priority_class(
                {"metadata": {"name": other}, "value": 8, "globalDefault": True}
            )
        assert status["message"] == (
            f'priorityclasses.scheduling.k8s.io "{other}" is forbidden: PriorityClass {name} '
            "is already marked as default. Only one default can exist"
        )
    finally:
        scheduling.delete_priority_class(name)


TOKEN_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"


def test_a_pod_gets_its_service_account_and_a_mounted_token_volume(
    api: ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    name = unique("pod")
    body = pod(name, initContainers=[{"name": "init", "image": PAUSE}])
    spec = to_dict(api, core.create_namespaced_pod(ns, body))["spec"]
    assert (spec["serviceAccountName"], spec["serviceAccount"]) == ("default", "default")
    (volume,) = spec["volumes"]
    assert volume["name"].startswith("kube-api-access-")
    assert len(volume["name"]) == len("kube-api-access-") + 5
    assert volume["projected"] == {
        "defaultMode": 420,
        "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {
                "configMap": {
                    "name": "kube-root-ca.crt",
                    "items": [{"key": "ca.crt", "path": "ca.crt"}],
                }
            },
            {
                "downwardAPI": {
                    "items": [
                        {
                            "path": "namespace",
                            "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                        }
                    ]
                }
            },
        ],
    }
    mount = {"name": volume["name"], "readOnly": True, "mountPath": TOKEN_PATH}
    for c in spec["containers"] + spec["initContainers"]:
        assert c["volumeMounts"] == [mount], c["name"]


def test_no_token_is_mounted_where_the_pod_or_its_account_says_so(
    api: ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    own = to_dict(
        api, core.create_namespaced_pod(ns, pod(unique("pod"), automountServiceAccountToken=False))
    )
    assert "volumes" not in own["spec"]
    assert "volumeMounts" not in own["spec"]["containers"][0]
    account = unique("sa")
    core.create_namespaced_service_account(
        ns, {"metadata": {"name": account}, "automountServiceAccountToken": False}
    )
    spec = to_dict(
        api, core.create_namespaced_pod(ns, pod(unique("pod"), serviceAccountName=account))
    )["spec"]
    assert (spec["serviceAccountName"], spec["serviceAccount"]) == (account, account)
    assert "volumes" not in spec
    # a container that mounts something at the token's path keeps its own mount
    mine = {"name": "mine", "emptyDir": {}}
    body = pod(unique("pod"), volumes=[mine])
    body["spec"]["containers"][0]["volumeMounts"] = [{"name": "mine", "mountPath": TOKEN_PATH}]
    spec = to_dict(api, core.create_namespaced_pod(ns, body))["spec"]
    assert spec["containers"][0]["volumeMounts"] == [{"name": "mine", "mountPath": TOKEN_PATH}]
    assert [v["name"] for v in spec["volumes"]] == ["mine"]


def test_a_template_names_its_account_twice_and_mounts_nothing(
    api: ApiClient, apps: client.AppsV1Api, ns: str
) -> None:
    """The v1 ``serviceAccount`` is the deprecated twin the conversion writes beside
    ``serviceAccountName``, in every pod spec; the plugin changes pods, not templates."""
    name = unique("deploy")
    labels = {"app": name}
    template = {
        "metadata": {"labels": labels},
        "spec": pod(name, serviceAccountName="default")["spec"],
    }
    body = {
        "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": labels}, "template": template},
    }
    spec = to_dict(api, apps.create_namespaced_deployment(ns, body))["spec"]["template"]["spec"]
    assert (spec["serviceAccountName"], spec["serviceAccount"]) == ("default", "default")
    assert "volumes" not in spec
