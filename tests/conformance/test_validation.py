"""The most common of kube-apiserver's validation refusals of built-in kinds, on create
and update: a workload whose selector does not match its template or whose replicas are
negative, a pod or template without containers or images or with a bad container name, a
Service without ports or with a port out of range, a CronJob schedule the cron parser
refuses, a ConfigMap or Secret key that is not a config key
(or is a directory name), a ConfigMap key in both its bags."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client import ApiClient

from ._support import raises_status, to_dict, unique

pytestmark = pytest.mark.timeout(60)

PAUSE = "registry.k8s.io/pause:3.9"


def causes(status: dict[str, Any]) -> list[tuple[str, str]]:
    return [(c["field"], c["reason"]) for c in status["details"]["causes"]]


def deployment(name: str, labels: dict[str, str], containers: list[Any]) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": containers}},
        },
    }


def stateful_set(name: str, **spec: Any) -> dict[str, Any]:
    """A StatefulSet of one pause container; ``spec`` adds to its spec."""
    body = deployment(name, {"app": name}, [{"name": "main", "image": PAUSE}])
    body["spec"].update(serviceName=name, **spec)
    return body


def test_a_selector_that_does_not_match_the_template_is_refused(
    apps: client.AppsV1Api, ns: str
) -> None:
    name = unique("web")
    with raises_status(422, "Invalid") as status:
        apps.create_namespaced_deployment(
            ns, deployment(name, {"app": "other"}, [{"name": "main", "image": PAUSE}])
        )
    assert status["message"] == (
        f'Deployment.apps "{name}" is invalid: spec.template.metadata.labels: Invalid value: '
        'map[string]string{"app":"other"}: `selector` does not match template `labels`'
    )
    good = deployment(name, {"app": name, "tier": "web"}, [{"name": "main", "image": PAUSE}])
    apps.create_namespaced_deployment(ns, good)
    # an update that breaks the match is refused too
    with raises_status(422, "Invalid") as status:
        apps.patch_namespaced_deployment(
            name, ns, {"spec": {"template": {"metadata": {"labels": {"app": None}}}}}
        )
    assert causes(status) == [("spec.template.metadata.labels", "FieldValueInvalid")]
    sts = deployment(unique("sts"), {"app": "other"}, [{"name": "main", "image": PAUSE}])
    sts["spec"]["serviceName"] = sts["metadata"]["name"]
    with raises_status(422, "Invalid") as status:
        apps.create_namespaced_stateful_set(ns, sts)
    assert causes(status) == [("spec.template.metadata.labels", "FieldValueInvalid")]


def test_a_pod_needs_named_containers_with_images(core: client.CoreV1Api, ns: str) -> None:
    name = unique("pod")

    def create(spec: dict[str, Any]) -> dict[str, Any]:
        with raises_status(422, "Invalid") as status:
            core.create_namespaced_pod(ns, {"metadata": {"name": name}, "spec": spec})
        return status

    assert causes(create({"containers": []})) == [("spec.containers", "FieldValueRequired")]
    status = create({"containers": [{"name": "Main_1", "image": PAUSE}]})
    assert causes(status) == [("spec.containers[0].name", "FieldValueInvalid")]
    assert (
        'Invalid value: "Main_1": a lowercase RFC 1123 label must consist of' in status["message"]
    )
    assert causes(create({"containers": [{"name": "main"}]})) == [
        ("spec.containers[0].image", "FieldValueRequired")
    ]
    twice = {
        "initContainers": [{"name": "main", "image": PAUSE}],
        "containers": [{"name": "main", "image": PAUSE}],
    }
    assert causes(create(twice)) == [("spec.initContainers[0].name", "FieldValueDuplicate")]


def test_a_service_needs_ports_unless_headless(core: client.CoreV1Api, ns: str) -> None:
    name = unique("svc")
    with raises_status(422, "Invalid") as status:
        core.create_namespaced_service(ns, {"metadata": {"name": name}, "spec": {}})
    assert status["message"] == f'Service "{name}" is invalid: spec.ports: Required value'
    headless = {"metadata": {"name": name}, "spec": {"clusterIP": "None", "selector": {"a": "b"}}}
    assert core.create_namespaced_service(ns, headless).spec.cluster_ip == "None"


def test_config_keys_are_checked(core: client.CoreV1Api, ns: str) -> None:
    name = unique("cm")
    with raises_status(422, "Invalid") as status:
        core.create_namespaced_config_map(
            ns, {"metadata": {"name": name}, "data": {"good.key_1": "", "bad key": ""}}
        )
    assert status["message"] == (
        f'ConfigMap "{name}" is invalid: data[bad key]: Invalid value: "bad key": a valid '
        "config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  "
        "or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"
    )
    with raises_status(422, "Invalid") as status:
        core.create_namespaced_secret(ns, {"metadata": {"name": name}, "stringData": {"a/b": "x"}})
    assert causes(status) == [("data[a/b]", "FieldValueInvalid")]
    with raises_status(422, "Invalid") as status:  # Go's `$` is the end of the text
        core.create_namespaced_secret(ns, {"metadata": {"name": name}, "data": {"a\n": ""}})
    assert causes(status) == [("data[a\n]", "FieldValueInvalid")]
    long_key = "k" * 254  # matches the regex: only IsConfigMapKey's length rule refuses it
    with raises_status(422, "Invalid") as status:
        core.create_namespaced_secret(ns, {"metadata": {"name": name}, "data": {long_key: ""}})
    assert status["details"]["causes"][0]["message"] == (
        f'Invalid value: "{long_key}": must be no more than 253 characters'
    )


@pytest.mark.parametrize(
    ("key", "why"),
    [(".", "must not be '.'"), ("..", "must not be '..'"), ("..data", "must not start with '..'")],
)
def test_a_config_key_that_is_a_directory_name_is_refused(
    core: client.CoreV1Api, ns: str, key: str, why: str
) -> None:
    """``IsConfigMapKey``'s ``hasChDirPrefix`` (apimachinery ``pkg/util/validation``): a key
    is a file name in the mounted volume, so ``.``, ``..`` and ``..``-prefixed keys (the
    kubelet's own ``..data``) are refused although the regex allows them, for ConfigMaps and
    Secrets (``ValidateConfigMap``, ``ValidateSecret``)."""
    name = unique("cm")
    with raises_status(422, "Invalid") as status:
        core.create_namespaced_config_map(ns, {"metadata": {"name": name}, "data": {key: ""}})
    assert status["message"] == (
        f'ConfigMap "{name}" is invalid: data[{key}]: Invalid value: "{key}": {why}'
    )
    with raises_status(422, "Invalid") as status:
        core.create_namespaced_secret(ns, {"metadata": {"name": name}, "data": {key: "eA=="}})
    assert status["message"] == (
        f'Secret "{name}" is invalid: data[{key}]: Invalid value: "{key}": {why}'
    )


def test_a_config_map_key_in_both_data_and_binary_data_is_refused(
    core: client.CoreV1Api, ns: str
) -> None:
    """``ValidateConfigMap`` (``pkg/apis/core/validation``): a key of ``data`` also in
    ``binaryData`` is invalid at ``data[key]``: a controller moving a key from one bag to the
    other must drop it from the first in the same write."""
    name = unique("cm")
    body = {"metadata": {"name": name}, "data": {"a": "1", "b": ""}, "binaryData": {"a": "MQ=="}}
    with raises_status(422, "Invalid") as status:
        core.create_namespaced_config_map(ns, body)
    assert status["message"] == (
        f'ConfigMap "{name}" is invalid: data[a]: Invalid value: "a": '
        "duplicate of key present in binaryData"
    )
    assert causes(status) == [("data[a]", "FieldValueInvalid")]
    del body["data"]["a"]
    core.create_namespaced_config_map(ns, body)
    body["data"]["a"] = "1"
    with raises_status(422, "Invalid"):
        core.replace_namespaced_config_map(name, ns, body)


def test_a_workload_template_needs_images_and_no_negative_replicas(
    apps: client.AppsV1Api, ns: str
) -> None:
    name = unique("web")
    body = deployment(name, {"app": name}, [{"name": "main"}])
    body["spec"]["replicas"] = -1  # a computed count gone below zero
    with raises_status(422, "Invalid") as status:
        apps.create_namespaced_deployment(ns, body)
    assert sorted(causes(status)) == [
        ("spec.replicas", "FieldValueInvalid"),
        ("spec.template.spec.containers[0].image", "FieldValueRequired"),
    ]
    assert (
        "spec.replicas: Invalid value: -1: must be greater than or equal to 0"
        in (status["message"])
    )
    body = deployment(unique("rs"), {"app": "x"}, [{"name": "main", "image": PAUSE}])
    body["spec"]["selector"] = {"matchLabels": {"app": "x"}}
    body["spec"]["replicas"] = -2
    with raises_status(422, "Invalid") as status:
        apps.create_namespaced_replica_set(ns, body)
    assert causes(status) == [("spec.replicas", "FieldValueInvalid")]


def test_a_workloads_faults_come_in_kube_apiservers_order(apps: client.AppsV1Api, ns: str) -> None:
    """kubectl prints a 422's causes, and ``Status.message`` lists them, in the server's
    order: ``ValidateDeploymentSpec`` checks replicas before the template,
    ``ValidateStatefulSetSpec`` its pod management policy before replicas."""
    name = unique("web")
    body = deployment(name, {"app": "other"}, [{"name": "main"}])
    body["spec"]["replicas"] = -1
    with raises_status(422, "Invalid") as status:
        apps.create_namespaced_deployment(ns, body)
    assert causes(status) == [
        ("spec.replicas", "FieldValueInvalid"),
        ("spec.template.metadata.labels", "FieldValueInvalid"),
        ("spec.template.spec.containers[0].image", "FieldValueRequired"),
    ]
    assert status["message"].startswith(
        f'Deployment.apps "{name}" is invalid: [spec.replicas: Invalid value: -1: '
    )
    with raises_status(422, "Invalid") as status:
        apps.create_namespaced_stateful_set(
            ns, stateful_set(unique("db"), replicas=-1, podManagementPolicy="Sometimes")
        )
    assert causes(status) == [
        ("spec.podManagementPolicy", "FieldValueInvalid"),
        ("spec.replicas", "FieldValueInvalid"),
    ]


def test_metadata_and_spec_faults_are_refused_together(apps: client.AppsV1Api, ns: str) -> None:
    """One 422 names every fault, of the metadata and of the spec, as kube-apiserver's
    ``ValidateDeployment`` (``ValidateObjectMeta`` then ``ValidateDeploymentSpec``) does:
    a manifest is not fixed one refusal at a time."""
    body = deployment("Not_A_Name", {"app": "Not_A_Name"}, [{"name": "main", "image": PAUSE}])
    body["metadata"]["labels"] = {"bad key!": "x"}
    body["spec"]["replicas"] = -1
    with raises_status(422, "Invalid") as status:
        apps.create_namespaced_deployment(ns, body)
    assert causes(status) == [
        ("metadata.name", "FieldValueInvalid"),
        ("metadata.labels", "FieldValueInvalid"),
        ("spec.replicas", "FieldValueInvalid"),
    ]
    name = unique("web")
    created = apps.create_namespaced_deployment(
        ns, deployment(name, {"app": name}, [{"name": "main", "image": PAUSE}])
    )
    update = to_dict(apps.api_client, created)
    update["metadata"]["finalizers"] = ["not a finalizer"]
    update["spec"]["replicas"] = -1
    with raises_status(422, "Invalid") as status:
        apps.replace_namespaced_deployment(name, ns, update)
    assert causes(status) == [
        ("metadata.finalizers", "FieldValueInvalid"),
        ("spec.replicas", "FieldValueInvalid"),
    ]


@pytest.mark.parametrize("rolling", [{"maxSurge": 1}, {}], ids=["set", "empty"])
def test_a_recreate_deployment_takes_no_rolling_update(
    apps: client.AppsV1Api, ns: str, rolling: dict[str, Any]
) -> None:
    name = unique("web")
    body = deployment(name, {"app": name}, [{"name": "main", "image": PAUSE}])
    body["spec"]["strategy"] = {"type": "Recreate", "rollingUpdate": rolling}
    with raises_status(422, "Invalid") as status:
        apps.create_namespaced_deployment(ns, body)
    assert status["message"] == (
        f'Deployment.apps "{name}" is invalid: spec.strategy.rollingUpdate: Forbidden: may not '
        "be specified when strategy `type` is 'Recreate'"
    )


def test_a_deployment_patched_to_recreate_must_drop_its_defaulted_rolling_update(
    apps: client.AppsV1Api, ns: str
) -> None:
    # the everyday trap: the create defaulted rollingUpdate (25%/25%), a patch of the type
    # alone keeps it; setting it to null with the type is what works
    name = unique("web")
    apps.create_namespaced_deployment(
        ns, deployment(name, {"app": name}, [{"name": "main", "image": PAUSE}])
    )
    with raises_status(422, "Invalid"):
        apps.patch_namespaced_deployment(name, ns, {"spec": {"strategy": {"type": "Recreate"}}})
    patched = apps.patch_namespaced_deployment(
        name, ns, {"spec": {"strategy": {"type": "Recreate", "rollingUpdate": None}}}
    )
    assert patched.spec.strategy.type == "Recreate" and patched.spec.strategy.rolling_update is None


def test_a_deployment_strategy_of_an_unknown_type_is_refused(
    apps: client.AppsV1Api, ns: str
) -> None:
    name = unique("web")
    body = deployment(name, {"app": name}, [{"name": "main", "image": PAUSE}])
    body["spec"]["strategy"] = {"type": "Rolling"}  # a typo of RollingUpdate
    with raises_status(422, "Invalid") as status:
        apps.create_namespaced_deployment(ns, body)
    # ValidateDeploymentStrategy gives the whole strategy as the value, as Go prints it
    assert status["message"] == (
        f'Deployment.apps "{name}" is invalid: spec.strategy: Unsupported value: '
        'apps.DeploymentStrategy{Type:"Rolling", RollingUpdate:(*apps.RollingUpdateDeployment)'
        '(nil)}: supported values: "Recreate", "RollingUpdate"'
    )
    assert causes(status) == [("spec.strategy", "FieldValueNotSupported")]


def test_a_daemon_set_update_strategy_of_an_unknown_type_is_refused(
    apps: client.AppsV1Api, ns: str
) -> None:
    name = unique("agent")
    body = deployment(name, {"app": name}, [{"name": "main", "image": PAUSE}])
    body["spec"]["updateStrategy"] = {"type": "Rolling"}
    with raises_status(422, "Invalid") as status:
        apps.create_namespaced_daemon_set(ns, body)
    assert status["message"] == (
        f'DaemonSet.apps "{name}" is invalid: spec.updateStrategy: Unsupported value: '
        'apps.DaemonSetUpdateStrategy{Type:"Rolling", RollingUpdate:'
        '(*apps.RollingUpdateDaemonSet)(nil)}: supported values: "RollingUpdate", "OnDelete"'
    )


def test_a_container_mounts_only_volumes_of_its_pod_each_at_its_own_path(
    core: client.CoreV1Api, apps: client.AppsV1Api, ns: str
) -> None:
    """``ValidateVolumeMounts``: the mount a controller renders without the volume it
    names (the classic fault of a template split across helpers) is refused, in a Pod and
    in a workload's template."""
    name = unique("pod")
    mount = {"name": "data", "mountPath": "/data"}
    container = {"name": "main", "image": PAUSE, "volumeMounts": [mount]}
    with raises_status(422, "Invalid") as status:
        core.create_namespaced_pod(
            ns, {"metadata": {"name": name}, "spec": {"containers": [container]}}
        )
    assert status["message"] == (
        f'Pod "{name}" is invalid: spec.containers[0].volumeMounts[0].name: Not found: "data"'
    )
    assert causes(status) == [("spec.containers[0].volumeMounts[0].name", "FieldValueNotFound")]
    with raises_status(422, "Invalid") as status:
        apps.create_namespaced_deployment(ns, deployment(name, {"app": name}, [container]))
    assert status["message"] == (
        f'Deployment.apps "{name}" is invalid: '
        'spec.template.spec.containers[0].volumeMounts[0].name: Not found: "data"'
    )
    volumes = [{"name": "data", "emptyDir": {}}, {"name": "logs", "emptyDir": {}}]
    twice = {**container, "volumeMounts": [mount, {"name": "logs", "mountPath": "/data"}]}
    spec = {"volumes": volumes, "containers": [twice]}
    with raises_status(422, "Invalid") as status:
        core.create_namespaced_pod(ns, {"metadata": {"name": name}, "spec": spec})
    assert status["message"] == (
        f'Pod "{name}" is invalid: spec.containers[0].volumeMounts[1].mountPath: '
        'Invalid value: "/data": must be unique'
    )
    spec["containers"] = [
        {**container, "volumeMounts": [mount, {"name": "logs", "mountPath": "/logs"}]}
    ]
    core.create_namespaced_pod(ns, {"metadata": {"name": name}, "spec": spec})


def test_a_volume_has_a_name_of_its_own(core: client.CoreV1Api, ns: str) -> None:
    """``ValidateVolumes``: a reconciler that appends its volume to a template on every pass
    (not checking it is there) meets ``Duplicate value`` on a cluster; a volume's name is an
    RFC 1123 label, listed before the faults of the containers."""
    name = unique("pod")
    mount = {"name": "data", "mountPath": "/data"}
    container = {"name": "main", "image": PAUSE, "volumeMounts": [mount]}

    def refusal(volumes: list[dict[str, Any]]) -> str:
        spec = {"volumes": volumes, "containers": [container]}
        with raises_status(422, "Invalid") as status:
            core.create_namespaced_pod(ns, {"metadata": {"name": name}, "spec": spec})
        message: str = status["message"]
        return message.removeprefix(f'Pod "{name}" is invalid: ')

    data = {"name": "data", "emptyDir": {}}
    assert refusal([data, data]) == 'spec.volumes[1].name: Duplicate value: "data"'
    bad = refusal([{"name": "Data", "emptyDir": {}}])
    assert bad.startswith(
        '[spec.volumes[0].name: Invalid value: "Data": a lowercase RFC 1123 label must '
    ), bad
    assert bad.endswith('spec.containers[0].volumeMounts[0].name: Not found: "data"]'), bad
    # a volume without a source is an emptyDir (SetDefaults_Volume), not a fault
    spec = {"volumes": [{"name": "data"}], "containers": [container]}
    created = core.create_namespaced_pod(ns, {"metadata": {"name": name}, "spec": spec})
    assert created.spec.volumes[0].empty_dir is not None


def test_a_request_above_its_limit_is_refused(core: client.CoreV1Api, ns: str) -> None:
    """``ValidateContainerResourceRequirements``: a request is at most its limit (the value
    shown in its canonical form); one of a resource that cannot be overcommitted (an
    extended resource) equals it."""
    name = unique("pod")

    def pod(resources: dict[str, Any]) -> dict[str, Any]:
        container = {"name": "main", "image": PAUSE, "resources": resources}
        return {"metadata": {"name": name}, "spec": {"containers": [container]}}

    def refusal(request: dict[str, str], limit: dict[str, str]) -> str:
        with raises_status(422, "Invalid") as status:
            core.create_namespaced_pod(ns, pod({"requests": request, "limits": limit}))
        message: str = status["message"]
        return message.removeprefix(f'Pod "{name}" is invalid: ')

    assert refusal({"memory": "2048Mi"}, {"memory": "1Gi"}) == (
        'spec.containers[0].resources.requests: Invalid value: "2Gi": '
        "must be less than or equal to memory limit of 1Gi"
    )
    assert refusal({"example.com/gpu": "1"}, {"example.com/gpu": "2"}) == (
        'spec.containers[0].resources.requests: Invalid value: "1": '
        "must be equal to example.com/gpu limit of 2"
    )
    core.create_namespaced_pod(ns, pod({"requests": {"cpu": "500m"}, "limits": {"cpu": "1"}}))


def test_a_containers_ports_pull_policy_and_probes_are_checked(
    core: client.CoreV1Api, ns: str
) -> None:
    """``validateContainerPorts``, ``validatePullPolicy`` and a probe's ``validateHandler``:
    faults a rendered pod template carries to a cluster."""
    name = unique("pod")

    def refusal(**container: Any) -> str:
        spec = {"containers": [{"name": "main", "image": PAUSE, **container}]}
        with raises_status(422, "Invalid") as status:
            core.create_namespaced_pod(ns, {"metadata": {"name": name}, "spec": spec})
        message: str = status["message"]
        return message.removeprefix(f'Pod "{name}" is invalid: ')

    at = "spec.containers[0]"
    web = {"containerPort": 8080, "name": "web"}
    assert refusal(ports=[web, {**web, "containerPort": 9090}]) == (
        f'{at}.ports[1].name: Duplicate value: "web"'
    )
    assert refusal(ports=[{"containerPort": 8080, "name": "Web_Port"}]) == (
        f'{at}.ports[0].name: Invalid value: "Web_Port": must contain only alpha-numeric '
        "characters (a-z, 0-9), and hyphens (-)"
    )
    assert refusal(ports=[{"containerPort": 70000}]) == (
        f"{at}.ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive"
    )
    assert refusal(ports=[{"containerPort": 53, "protocol": "DNS"}]) == (
        f'{at}.ports[0].protocol: Unsupported value: "DNS": supported values: "SCTP", "TCP", "UDP"'
    )
    assert refusal(imagePullPolicy="Sometimes") == (
        f'{at}.imagePullPolicy: Unsupported value: "Sometimes": supported values: "Always", '
        '"IfNotPresent", "Never"'
    )
    assert refusal(readinessProbe={"periodSeconds": 5}) == (
        f"{at}.readinessProbe: Required value: must specify a handler type"
    )
    both = {"exec": {"command": ["true"]}, "tcpSocket": {"port": 8080}}
    assert refusal(livenessProbe=both) == (
        f"{at}.livenessProbe.tcpSocket: Forbidden: may not specify more than 1 handler type"
    )
    core.create_namespaced_pod(
        ns,
        {
            "metadata": {"name": name},
            "spec": {
                "containers": [
                    {
                        "name": "main",
                        "image": PAUSE,
                        "ports": [web],
                        "readinessProbe": {"httpGet": {"port": "web", "path": "/ready"}},
                    }
                ]
            },
        },
    )


def test_a_restart_policy_is_known_and_a_workloads_is_always(
    core: client.CoreV1Api, apps: client.AppsV1Api, ns: str
) -> None:
    name = unique("pod")
    containers = [{"name": "main", "image": PAUSE}]
    with raises_status(422, "Invalid") as status:
        core.create_namespaced_pod(
            ns,
            {
                "metadata": {"name": name},
                "spec": {"restartPolicy": "Sometimes", "containers": containers},
            },
        )
    assert status["message"] == (
        f'Pod "{name}" is invalid: spec.restartPolicy: Unsupported value: "Sometimes": '
        'supported values: "Always", "OnFailure", "Never"'
    )
    body = deployment(name, {"app": name}, containers)
    body["spec"]["template"]["spec"]["restartPolicy"] = "Never"
    with raises_status(422, "Invalid") as status:
        apps.create_namespaced_deployment(ns, body)
    assert status["message"] == (
        f'Deployment.apps "{name}" is invalid: spec.template.spec.restartPolicy: '
        'Unsupported value: "Never": supported values: "Always"'
    )


def test_a_deployments_rollout_settings_are_checked(apps: client.AppsV1Api, ns: str) -> None:
    """``ValidateDeploymentSpec``: an empty selector, a rolling update that may never make
    progress (``maxUnavailable`` and ``maxSurge`` both 0) or takes down more than all pods,
    negative counts, and a progress deadline (600 unless given) not above
    ``minReadySeconds``: a controller that raises ``minReadySeconds`` past ten minutes
    meets that one on a cluster."""
    name = unique("deploy")

    def refusal(**spec: Any) -> dict[str, Any]:
        body = deployment(name, {"app": name}, [{"name": "main", "image": PAUSE}])
        body["spec"].update(spec)
        with raises_status(422, "Invalid") as status:
            apps.create_namespaced_deployment(ns, body)
        return status

    status = refusal(minReadySeconds=700)
    assert status["message"] == (
        f'Deployment.apps "{name}" is invalid: spec.progressDeadlineSeconds: Invalid value: '
        "600: must be greater than minReadySeconds"
    )
    status = refusal(revisionHistoryLimit=-1)
    assert status["message"] == (
        f'Deployment.apps "{name}" is invalid: spec.revisionHistoryLimit: Invalid value: -1: '
        "must be greater than or equal to 0"
    )
    status = refusal(selector={})
    assert causes(status) == [("spec.selector", "FieldValueInvalid")]
    assert status["message"].endswith(": empty selector is invalid for deployment")
    # an IntOrString is shown as its struct in 1.31, as its JSON in later releases
    stuck = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 0}}
    status = refusal(strategy=stuck)
    assert causes(status) == [("spec.strategy.rollingUpdate.maxUnavailable", "FieldValueInvalid")]
    assert status["message"].endswith(": may not be 0 when `maxSurge` is 0")
    over = {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "150%"}}
    status = refusal(strategy=over)
    assert causes(status) == [("spec.strategy.rollingUpdate.maxUnavailable", "FieldValueInvalid")]
    assert status["message"].endswith(": must not be greater than 100%")
    body = deployment(name, {"app": name}, [{"name": "main", "image": PAUSE}])
    body["spec"].update(minReadySeconds=700, progressDeadlineSeconds=900)
    assert apps.create_namespaced_deployment(ns, body).spec.progress_deadline_seconds == 900


def test_a_stateful_set_pod_management_policy_of_an_unknown_value_is_refused(
    apps: client.AppsV1Api, ns: str
) -> None:
    name = unique("db")
    body = stateful_set(name, podManagementPolicy="parallel")  # the value is case-sensitive
    with raises_status(422, "Invalid") as status:
        apps.create_namespaced_stateful_set(ns, body)
    assert status["message"] == (
        f'StatefulSet.apps "{name}" is invalid: spec.podManagementPolicy: Invalid value: '
        "\"parallel\": must be 'OrderedReady' or 'Parallel'"
    )


def test_a_stateful_set_update_strategy_of_an_unknown_type_is_refused(
    apps: client.AppsV1Api, ns: str
) -> None:
    name = unique("db")
    with raises_status(422, "Invalid") as status:
        apps.create_namespaced_stateful_set(
            ns, stateful_set(name, updateStrategy={"type": "Rolling"})
        )
    # ValidateStatefulSetSpec: Invalid (not Unsupported), the whole strategy as Go prints it
    assert status["message"] == (
        f'StatefulSet.apps "{name}" is invalid: spec.updateStrategy: Invalid value: '
        'apps.StatefulSetUpdateStrategy{Type:"Rolling", RollingUpdate:'
        "(*apps.RollingUpdateStatefulSetStrategy)(nil)}: must be 'RollingUpdate' or 'OnDelete'"
    )
    assert causes(status) == [("spec.updateStrategy", "FieldValueInvalid")]


def test_a_stateful_set_switched_to_on_delete_keeps_its_rolling_update_and_is_refused(
    apps: client.AppsV1Api, ns: str
) -> None:
    # the rollingUpdate defaulted at create ({partition: 0}) stays when a patch sets only the
    # type: an OnDelete strategy may not have one
    name = unique("db")
    apps.create_namespaced_stateful_set(ns, stateful_set(name))
    with raises_status(422, "Invalid") as status:
        apps.patch_namespaced_stateful_set(
            name, ns, {"spec": {"updateStrategy": {"type": "OnDelete"}}}
        )
    assert status["message"] == (
        f'StatefulSet.apps "{name}" is invalid: spec.updateStrategy.rollingUpdate: Invalid '
        "value: apps.RollingUpdateStatefulSetStrategy{Partition:0, MaxUnavailable:"
        "(*intstr.IntOrString)(nil)}: only allowed for updateStrategy 'RollingUpdate'"
    )
    assert causes(status) == [("spec.updateStrategy.rollingUpdate", "FieldValueInvalid")]
    patched = apps.patch_namespaced_stateful_set(
        name, ns, {"spec": {"updateStrategy": {"type": "OnDelete", "rollingUpdate": None}}}
    )
    assert patched.spec.update_strategy.type == "OnDelete"
    assert patched.spec.update_strategy.rolling_update is None


def _rolling(**rolling: Any) -> dict[str, Any]:
    return {"type": "RollingUpdate", "rollingUpdate": rolling}


def test_a_stateful_set_rolling_update_partition_may_not_be_negative(
    apps: client.AppsV1Api, ns: str
) -> None:
    name = unique("db")
    with raises_status(422, "Invalid") as status:
        apps.create_namespaced_stateful_set(
            ns, stateful_set(name, updateStrategy=_rolling(partition=-1))
        )
    at = "spec.updateStrategy.rollingUpdate.partition"
    assert status["message"] == (
        f'StatefulSet.apps "{name}" is invalid: {at}: Invalid value: -1: must be greater than '
        "or equal to 0"
    )
    assert causes(status) == [(at, "FieldValueInvalid")]
    created = apps.create_namespaced_stateful_set(
        ns, stateful_set(name, updateStrategy=_rolling(partition=2))
    )
    assert created.spec.update_strategy.rolling_update.partition == 2


_PERCENT = (
    "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  "
    "or '93%', regex used for validation is '[0-9]+%')"
)


@pytest.mark.parametrize(
    ("value", "says"),
    [
        (0, ["cannot be 0"]),
        ("0%", ["cannot be 0"]),
        (-1, ["must be greater than or equal to 0"]),
        ("101%", ["must not be greater than 100%"]),
        ("5", [_PERCENT]),  # a string must be a percentage
        ("many", [_PERCENT, "cannot be 0"]),  # and counts as its number: none is 0
    ],
)
def test_a_stateful_set_max_unavailable_is_above_0_and_at_most_100_percent(
    apps: client.AppsV1Api, ns: str, value: Any, says: list[str]
) -> None:
    """validateRollingUpdateStatefulSet (MaxUnavailableStatefulSet, on from kube 1.35)."""
    probe = apps.create_namespaced_stateful_set(
        ns, stateful_set(unique("db"), updateStrategy=_rolling(maxUnavailable="50%"))
    )
    if probe.spec.update_strategy.rolling_update.max_unavailable is None:
        pytest.skip("this server drops maxUnavailable (MaxUnavailableStatefulSet is off)")
    name = unique("db")
    with raises_status(422, "Invalid") as status:
        apps.create_namespaced_stateful_set(
            ns, stateful_set(name, updateStrategy=_rolling(maxUnavailable=value))
        )
    at = "spec.updateStrategy.rollingUpdate.maxUnavailable"
    assert causes(status) == [(at, "FieldValueInvalid")] * len(says)
    messages = [c["message"] for c in status["details"]["causes"]]
    # the value as Go prints an IntOrString: its struct in 1.31, its JSON in later releases
    for message, why in zip(messages, says, strict=True):
        assert message.startswith("Invalid value: ") and message.endswith(f": {why}"), message
    if value == -1:  # ValidateNonnegativeField shows the number itself
        assert messages == [f"Invalid value: -1: {says[0]}"]


def test_a_service_port_out_of_range_or_an_unknown_type_is_refused(
    core: client.CoreV1Api, ns: str
) -> None:
    name = unique("svc")
    body = {"metadata": {"name": name}, "spec": {"type": "Internal", "ports": [{"port": 70000}]}}
    with raises_status(422, "Invalid") as status:
        core.create_namespaced_service(ns, body)
    # the target port, defaulted to the port (SetDefaults_Service), is out of range too
    assert sorted(causes(status)) == [
        ("spec.ports[0].port", "FieldValueInvalid"),
        ("spec.ports[0].targetPort", "FieldValueInvalid"),
        ("spec.type", "FieldValueNotSupported"),
    ]
    assert (
        "spec.ports[0].port: Invalid value: 70000: must be between 1 and 65535, inclusive"
        in (status["message"])
    )
    assert (
        'spec.type: Unsupported value: "Internal": supported values: "ClusterIP", '
        '"ExternalName", "LoadBalancer", "NodePort"'
    ) in status["message"]


@pytest.mark.parametrize(
    ("schedule", "says"),
    [
        (
            "bogus",
            'spec.schedule: Invalid value: "bogus": expected exactly 5 fields, found 1: [bogus]',
        ),
        ("*/5 * * *", "expected exactly 5 fields, found 4: [*/5 * * *]"),
        (
            "TZ=UTC 0 * * * *",
            "cannot use TZ or CRON_TZ in schedule, use timeZone field instead",
        ),
        # robfig/cron's parser checks each field's range, step and names
        ("0 25 * * *", 'Invalid value: "0 25 * * *": end of range (25) above maximum (23): 25'),
        ("* * 0 * *", "beginning of range (0) below minimum (1): 0"),
        ("*/0 * * * *", "step of range should be a positive number: */0"),
        ("0 17-9 * * *", "beginning of range (17) beyond end of range (9): 17-9"),
        ("0 9 * * mon-fry", 'failed to parse int from fry: strconv.Atoi: parsing "fry"'),
        ("@fortnightly", "unrecognized descriptor: @fortnightly"),
        ("@every 5", 'failed to parse duration @every 5: time: missing unit in duration "5"'),
    ],
)
def test_a_cronjob_schedule_the_cron_parser_refuses_is_invalid(
    batch: client.BatchV1Api, ns: str, schedule: str, says: str
) -> None:
    body = {
        "metadata": {"name": unique("cron")},
        "spec": {
            "schedule": schedule,
            "jobTemplate": {
                "spec": {
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [{"name": "main", "image": PAUSE}],
                        }
                    }
                }
            },
        },
    }
    with raises_status(422, "Invalid") as status:
        batch.create_namespaced_cron_job(ns, body)
    assert says in status["message"]
    body["metadata"]["name"] = unique("cron")
    body["spec"]["schedule"] = "@hourly"
    batch.create_namespaced_cron_job(ns, body)
    # lists, ranges, steps and names within their bounds pass
    body["metadata"]["name"] = unique("cron")
    body["spec"]["schedule"] = "0,30 9-17/2 1-31 jan-dec MON-FRI"
    batch.create_namespaced_cron_job(ns, body)


@pytest.fixture
def nodes(core: client.CoreV1Api) -> Iterator[list[str]]:
    """Names of Nodes a test creates, deleted after it."""
    made: list[str] = []
    yield made
    for name in made:
        core.delete_node(name)


def _node(core: client.CoreV1Api, made: list[str], spec: dict[str, Any]) -> dict[str, Any]:
    """A Node no kubelet runs, created with ``spec``; its spec as stored."""
    name = unique("node")
    created = core.create_node({"metadata": {"name": name}, "spec": spec})
    made.append(name)
    return {"name": name, "spec": created.spec}


_MERGE = "application/merge-patch+json"


@pytest.mark.parametrize(
    ("sent", "stored"),
    [
        ({"podCIDR": "10.244.1.0/24"}, ("10.244.1.0/24", ["10.244.1.0/24"])),
        (
            {"podCIDRs": ["10.244.1.0/24", "fd00:1::/64"]},
            ("10.244.1.0/24", ["10.244.1.0/24", "fd00:1::/64"]),
        ),
        (  # both, and they differ: podCIDR wins (an older client wrote it alone)
            {"podCIDR": "10.244.2.0/24", "podCIDRs": ["10.244.1.0/24", "fd00:1::/64"]},
            ("10.244.2.0/24", ["10.244.2.0/24"]),
        ),
    ],
)
def test_a_nodes_pod_cidr_and_its_pod_cidrs_are_one_field(
    api: ApiClient, core: client.CoreV1Api, nodes: list[str], sent: dict, stored: tuple
) -> None:
    """kube's core/v1 conversion: podCIDR is podCIDRs[0], whichever of the two is written."""
    made = _node(core, nodes, sent)
    for spec in (made["spec"], core.read_node(made["name"]).spec):
        written = to_dict(api, spec)
        assert (written.get("podCIDR"), written.get("podCIDRs")) == stored


@pytest.mark.parametrize(
    ("cidrs", "refused"),
    [
        (["10.244.1"], [("spec.podCIDRs[0]", "FieldValueInvalid")]),
        (["10.244.1.0/24", "10.244.2.0/24"], [("spec.podCIDRs", "FieldValueInvalid")]),
        (
            ["10.244.1.0/24", "fd00:1::/64", "10.244.2.0/24"],
            [("spec.podCIDRs", "FieldValueInvalid")],
        ),
        (
            ["10.244.1.0/24", "10.244.1.0/24"],
            [("spec.podCIDRs", "FieldValueInvalid"), ("spec.podCIDRs[1]", "FieldValueDuplicate")],
        ),
    ],
)
def test_a_nodes_pod_cidrs_are_valid_cidrs_one_of_each_family(
    core: client.CoreV1Api, nodes: list[str], cidrs: list[str], refused: list
) -> None:
    """ValidateNode: each a valid CIDR, at most one per family, none twice."""
    name = unique("node")
    with raises_status(422, "Invalid") as status:
        core.create_node({"metadata": {"name": name}, "spec": {"podCIDRs": cidrs}})
    assert causes(status) == refused
    messages = [c["message"] for c in status["details"]["causes"]]
    if len(cidrs) == 1:
        assert messages == [
            'Invalid value: "10.244.1": must be a valid CIDR value, (e.g. 10.9.8.0/24 or '
            "2001:db8::/64)"
        ]
    else:
        assert messages[0].startswith("Invalid value: ")
        assert messages[0].endswith(": may specify no more than one CIDR for each IP family")
        assert messages[1:] == [f'Duplicate value: "{cidrs[0]}"'] * (len(refused) - 1)
    several = "[" if len(refused) > 1 else ""  # the causes' messages, listed
    assert status["message"].startswith(f'Node "{name}" is invalid: {several}{refused[0][0]}: ')


def test_a_nodes_pod_cidrs_once_set_never_change(
    api: ApiClient, core: client.CoreV1Api, nodes: list[str]
) -> None:
    """ValidateNodeUpdate: set pod CIDRs stay as they are; the node's other fields change."""
    name = _node(core, nodes, {"podCIDR": "10.244.1.0/24"})["name"]
    forbidden = 'Forbidden: node updates may not change podCIDR except from "" to valid'
    for change in (
        {"podCIDR": "10.244.9.0/24"},  # podCIDR wins over the stored podCIDRs: a change
        {"podCIDRs": ["10.244.1.0/24", "fd00:1::/64"]},
    ):
        with raises_status(422, "Invalid") as status:
            core.patch_node(name, {"spec": change}, _content_type=_MERGE)
        assert [(c["field"], c["reason"], c["message"]) for c in status["details"]["causes"]] == [
            ("spec.podCIDRs", "FieldValueForbidden", forbidden)
        ]
        assert status["message"] == f'Node "{name}" is invalid: spec.podCIDRs: {forbidden}'
    patched = core.patch_node(name, {"spec": {"unschedulable": True}}, _content_type=_MERGE)
    assert to_dict(api, patched.spec)["podCIDRs"] == ["10.244.1.0/24"]
    # each changed CIDR is a cause; the message says it once (ErrorList.ToAggregate)
    dual = _node(core, nodes, {"podCIDRs": ["10.244.1.0/24", "fd00:1::/64"]})["name"]
    both = {"podCIDR": "10.244.2.0/24", "podCIDRs": ["10.244.2.0/24", "fd00:2::/64"]}
    with raises_status(422, "Invalid") as status:
        core.patch_node(dual, {"spec": both}, _content_type=_MERGE)
    assert causes(status) == [("spec.podCIDRs", "FieldValueForbidden")] * 2
    assert status["message"] == f'Node "{dual}" is invalid: spec.podCIDRs: {forbidden}'


SUBDOMAIN = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex "
    r"used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
QUALIFIED_NAME = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)


def messages(status: dict[str, Any]) -> list[str]:
    return [c["message"] for c in status["details"]["causes"]]


def test_a_bad_name_is_refused_with_every_rule_it_breaks_and_the_rule_s_regex(
    core: client.CoreV1Api, ns: str
) -> None:
    # apimachinery's IsDNS1123Subdomain: one field error per rule broken, each naming the
    # regex the name was checked against (a test asserting the text sees the real one)
    with raises_status(422, "Invalid") as status:
        core.create_namespaced_config_map(ns, {"metadata": {"name": "Bad_Name"}})
    assert status["message"] == (
        f'ConfigMap "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": {SUBDOMAIN}'
    )
    long = "A" * 254
    with raises_status(422, "Invalid") as status:
        core.create_namespaced_config_map(ns, {"metadata": {"name": long}})
    assert causes(status) == [("metadata.name", "FieldValueInvalid")] * 2
    assert messages(status)[1] == f'Invalid value: "{long}": {SUBDOMAIN}'
    assert messages(status)[0].startswith(f'Invalid value: "{long}": must be no more than 253 ')
    # a namespace's name is a DNS label: one that is a subdomain breaks it by its dots
    with raises_status(422, "Invalid") as status:
        core.create_namespace({"metadata": {"name": f"{unique('a')}.b"}})
    assert messages(status) == [
        f'Invalid value: "{status["details"]["name"]}": must not contain dots'
    ]


def test_a_bad_label_key_is_refused_with_every_rule_it_breaks(
    core: client.CoreV1Api, ns: str
) -> None:
    def refused(labels: dict[str, str]) -> list[str]:
        body = {"metadata": {"name": unique("cm"), "labels": labels}}
        with raises_status(422, "Invalid") as status:
            core.create_namespaced_config_map(ns, body)
        assert {c["field"] for c in status["details"]["causes"]} == {"metadata.labels"}
        return messages(status)

    assert refused({"example.com/": "x"}) == [
        'Invalid value: "example.com/": name part must be non-empty',
        f'Invalid value: "example.com/": name part {QUALIFIED_NAME}',
    ]
    assert refused({"Example.com/app": "x"}) == [
        f'Invalid value: "Example.com/app": prefix part {SUBDOMAIN}'
    ]
    # a length is counted in bytes, as Go counts it: 32 "é" are 64
    value = "é" * 32
    too_long, regex = refused({"app": value})
    assert too_long.startswith(f'Invalid value: "{value}": must be no more than 63 ')
    assert regex.startswith(f'Invalid value: "{value}": a valid label must be an empty string')
    # two slashes: not a prefix and a name at all (its first words differ by version)
    (two,) = refused({"a/b/c": "x"})
    assert two.startswith('Invalid value: "a/b/c": a ') and two.endswith(
        "with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
    )


def test_a_bad_generate_name_is_refused_for_itself_and_for_the_name_made_of_it(
    core: client.CoreV1Api, ns: str
) -> None:
    with raises_status(422, "Invalid") as status:
        core.create_namespaced_config_map(ns, {"metadata": {"generateName": "Bad_"}})
    made = status["details"]["name"]
    assert made.startswith("Bad_") and len(made) == len("Bad_") + 5
    assert [(c["field"], c["message"]) for c in status["details"]["causes"]] == [
        ("metadata.generateName", f'Invalid value: "Bad_": {SUBDOMAIN}'),
        ("metadata.name", f'Invalid value: "{made}": {SUBDOMAIN}'),
    ]
    # checked when a name is given too, though the name is what the object gets
    name = unique("cm")
    with raises_status(422, "Invalid") as status:
        core.create_namespaced_config_map(ns, {"metadata": {"name": name, "generateName": "Web-"}})
    assert causes(status) == [("metadata.generateName", "FieldValueInvalid")]
    # a trailing dash is what a prefix ends with: not held against it
    made = core.create_namespaced_config_map(ns, {"metadata": {"generateName": "web-"}})
    assert made.metadata.name.startswith("web-")
