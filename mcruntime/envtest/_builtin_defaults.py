"""The scheme defaults kube-apiserver fills into the workload kinds it decodes.

kube-apiserver defaults every create and update it decodes (before the admission
webhooks and the field manager), so a stored Pod has ``restartPolicy: Always``,
``dnsPolicy: ClusterFirst`` and each container an ``imagePullPolicy``; a
Deployment its ``strategy``; a Job its ``backoffLimit``; and an update that
leaves a defaulted field out gets it back. A controller comparing its desired
spec with the live object must cope with these, so envtest fills them in too.

Covered: Pods and the pod templates of ReplicationControllers, PodTemplates,
Deployments, ReplicaSets, StatefulSets, DaemonSets, Jobs and CronJobs (pod
spec, containers, ports, probes, volumes, ``fieldRef``), and the workloads' own
spec defaults (with the feature gates on by default in current releases).
Also the storage and network kinds' own (``SetDefaults_PersistentVolume``,
``SetDefaults_StorageClass``, ``SetDefaults_CSIDriver``, ``SetDefaults_NetworkPolicy``,
``SetDefaults_IngressClass``).
"""

from __future__ import annotations

import copy
from typing import Any

from mcruntime.envtest._services import externally_accessible

__all__ = ["default_builtin"]

Obj = dict[str, Any]

#: SetDefaults_PodSpec: every pod spec, a template's too
_POD_SPEC = {
    "dnsPolicy": "ClusterFirst",
    "restartPolicy": "Always",
    "securityContext": {},
    "terminationGracePeriodSeconds": 30,
    "schedulerName": "default-scheduler",
}
_CONTAINER = {
    "terminationMessagePath": "/dev/termination-log",
    "terminationMessagePolicy": "File",
    "resources": {},  # a Go struct, never omitted when the object is encoded
}
_PROBE = {"timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3}
_PROBES = ("livenessProbe", "readinessProbe", "startupProbe")
#: 0644, the mode of a volume's files when none is given
_VOLUME_MODE = 420
_MODED_VOLUMES = ("secret", "configMap", "downwardAPI", "projected")
#: the fields of a volume's ``VolumeSource`` that are not a source
_VOLUME_NON_SOURCES = frozenset({"name"})

_DEPLOYMENT = {"revisionHistoryLimit": 10, "progressDeadlineSeconds": 600}
_ROLLING_DEPLOYMENT = {"maxUnavailable": "25%", "maxSurge": "25%"}
_ROLLING_DAEMONSET = {"maxUnavailable": 1, "maxSurge": 0}
_STATEFULSET = {
    "podManagementPolicy": "OrderedReady",
    "revisionHistoryLimit": 10,
    "persistentVolumeClaimRetentionPolicy": {},
}
_PVC_RETENTION = {"whenDeleted": "Retain", "whenScaled": "Retain"}
_JOB = {"backoffLimit": 6, "completionMode": "NonIndexed", "suspend": False}
_PERSISTENT_VOLUME = {"persistentVolumeReclaimPolicy": "Retain", "volumeMode": "Filesystem"}
_STORAGE_CLASS = {"reclaimPolicy": "Delete", "volumeBindingMode": "Immediate"}
#: storage/v1's SetDefaults_CSIDriver (``seLinuxMount``: SELinuxMountReadWriteOncePod, beta and on)
_CSI_DRIVER = {
    "attachRequired": True,
    "podInfoOnMount": False,
    "storageCapacity": False,
    "fsGroupPolicy": "ReadWriteOnceWithFSType",
    "volumeLifecycleModes": ["Persistent"],
    "requiresRepublish": False,
    "seLinuxMount": False,
}
_CRONJOB = {
    "concurrencyPolicy": "Allow",
    "suspend": False,
    "successfulJobsHistoryLimit": 3,
    "failedJobsHistoryLimit": 1,
}


#: status counts without ``omitempty`` in their Go types: a stored object always has them,
#: 0 until a controller writes them (the typed ``kubernetes`` client requires them)
_STATUS_COUNTS: dict[tuple[str, str], tuple[str, ...]] = {
    ("", "replicationcontrollers"): ("replicas",),
    ("apps", "replicasets"): ("replicas",),
    ("apps", "statefulsets"): ("replicas", "availableReplicas"),
    ("apps", "daemonsets"): (
        "currentNumberScheduled",
        "numberMisscheduled",
        "desiredNumberScheduled",
        "numberReady",
    ),
}


def default_builtin(key: tuple[str, str], obj: Obj) -> None:
    """Fill in the defaults kube-apiserver gives the built-in kind ``key`` (group, plural)."""
    counts = _STATUS_COUNTS.get(key)
    status = obj.get("status")
    if counts and isinstance(status, dict) and not all(c in status for c in counts):
        obj["status"] = {**{c: 0 for c in counts}, **status}
    if key == ("", "podtemplates"):  # its template sits beside, not in, a spec
        if isinstance(obj.get("template"), dict):
            obj["template"] = template = copy.deepcopy(obj["template"])
            _template({"template": template})
        return
    if key == ("storage.k8s.io", "storageclasses"):  # no spec: its fields are the object's
        _setdefaults(obj, _STORAGE_CLASS)
        return
    fill = _KINDS.get(key)
    spec = obj.get("spec")
    if fill is None or not isinstance(spec, dict):
        return
    spec = obj["spec"] = copy.deepcopy(spec)  # never write into a dict the caller shares
    fill(obj, spec)


def _setdefaults(target: Obj, defaults: Obj) -> None:
    """Set each of ``defaults`` that ``target`` has unset (absent or null); dicts copied."""
    for field, value in defaults.items():
        if target.get(field) is None:
            target[field] = copy.deepcopy(value)


def _dict(parent: Obj, field: str) -> Obj | None:
    """``parent[field]`` when it is a dict (created empty when unset), else None."""
    if parent.get(field) is None:
        parent[field] = {}
    value = parent[field]
    return value if isinstance(value, dict) else None


def _dicts(value: Any) -> list[Obj]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


# ------------------------------------------------------------------- pods


def _pod(obj: Obj, spec: Obj) -> None:
    _pod_spec(spec)
    # SetDefaults_Pod: only a Pod, never a template
    if spec.get("enableServiceLinks") is None:
        spec["enableServiceLinks"] = True
    for container in _dicts(spec.get("containers")) + _dicts(spec.get("initContainers")):
        resources = container["resources"]
        limits = resources.get("limits") if isinstance(resources, dict) else None
        if isinstance(limits, dict) and limits:
            requests = resources.get("requests") or {}
            resources["requests"] = {**limits, **requests}
        if spec.get("hostNetwork"):
            for port in _dicts(container.get("ports")):
                if not port.get("hostPort"):
                    port["hostPort"] = port.get("containerPort")


def _template(spec: Obj) -> None:
    """Default the pod spec of ``spec.template`` (a workload's pod template)."""
    template = spec.get("template")
    if isinstance(template, dict) and isinstance(template.get("spec"), dict):
        _pod_spec(template["spec"])


def _pod_spec(spec: Obj) -> None:
    _setdefaults(spec, _POD_SPEC)
    # the v1 conversion: serviceAccount is the deprecated twin of serviceAccountName (which
    # wins when both are set), written back beside it
    account = spec.get("serviceAccountName") or spec.get("serviceAccount")
    if account:
        spec["serviceAccountName"] = spec["serviceAccount"] = account
    for field in ("containers", "initContainers", "ephemeralContainers"):
        for container in _dicts(spec.get(field)):
            _container(container)
    for volume in _dicts(spec.get("volumes")):
        _volume(volume)


def _container(container: Obj) -> None:
    if not container.get("imagePullPolicy"):
        latest = _image_tag(str(container.get("image") or "")) == "latest"
        container["imagePullPolicy"] = "Always" if latest else "IfNotPresent"
    _setdefaults(container, _CONTAINER)
    for port in _dicts(container.get("ports")):
        if not port.get("protocol"):
            port["protocol"] = "TCP"
    for probe in (container.get(name) for name in _PROBES):
        if isinstance(probe, dict):
            _setdefaults(probe, _PROBE)
            http = probe.get("httpGet")
            if isinstance(http, dict):
                _setdefaults(http, {"path": "/", "scheme": "HTTP"})
    for env in _dicts(container.get("env")):
        source = env.get("valueFrom")
        ref = source.get("fieldRef") if isinstance(source, dict) else None
        if isinstance(ref, dict) and not ref.get("apiVersion"):
            ref["apiVersion"] = "v1"


def _image_tag(image: str) -> str:
    """The tag of an image reference: "latest" when it names neither a tag nor a digest."""
    name, digest = image.partition("@")[::2]
    last = name.rsplit("/", 1)[-1]
    tag = last.partition(":")[2]
    return tag or ("" if digest else "latest")


def _volume(volume: Obj) -> None:
    if not any(v is not None for k, v in volume.items() if k not in _VOLUME_NON_SOURCES):
        volume["emptyDir"] = {}
    for field in _MODED_VOLUMES:
        source = volume.get(field)
        if isinstance(source, dict) and source.get("defaultMode") is None:
            source["defaultMode"] = _VOLUME_MODE
    host_path = volume.get("hostPath")
    if isinstance(host_path, dict) and host_path.get("type") is None:
        host_path["type"] = ""


# -------------------------------------------------------------- workloads


def _replicated(obj: Obj, spec: Obj) -> None:
    """ReplicaSets (``replicas`` is defaulted by the caller)."""
    _template(spec)


def _replication_controller(obj: Obj, spec: Obj) -> None:
    """SetDefaults_ReplicationController: the selector and labels are the template's unless given."""
    labels = _get_dict(spec.get("template"), "metadata", "labels")
    if labels:
        if not spec.get("selector"):
            spec["selector"] = dict(labels)
        meta = obj.get("metadata")
        if isinstance(meta, dict) and not meta.get("labels"):
            meta["labels"] = dict(labels)
    if spec.get("replicas") is None:
        spec["replicas"] = 1
    _template(spec)


def _get_dict(value: Any, *path: str) -> Obj | None:
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value if isinstance(value, dict) else None


def _deployment(obj: Obj, spec: Obj) -> None:
    _setdefaults(spec, _DEPLOYMENT)
    _rolling_update(spec, "strategy", _ROLLING_DEPLOYMENT)
    _template(spec)


def _daemonset(obj: Obj, spec: Obj) -> None:
    if spec.get("revisionHistoryLimit") is None:
        spec["revisionHistoryLimit"] = 10
    _rolling_update(spec, "updateStrategy", _ROLLING_DAEMONSET)
    _template(spec)


def _rolling_update(spec: Obj, field: str, rolling_defaults: Obj) -> None:
    """A strategy ``spec[field]`` of type RollingUpdate unless given, its limits defaulted."""
    strategy = _dict(spec, field)
    if strategy is None:
        return
    if not strategy.get("type"):
        strategy["type"] = "RollingUpdate"
    if strategy["type"] == "RollingUpdate":
        rolling = _dict(strategy, "rollingUpdate")
        if rolling is not None:
            _setdefaults(rolling, rolling_defaults)


def _statefulset(obj: Obj, spec: Obj) -> None:
    _setdefaults(spec, _STATEFULSET)
    retention = spec["persistentVolumeClaimRetentionPolicy"]
    if isinstance(retention, dict):
        _setdefaults(retention, _PVC_RETENTION)
    strategy = _dict(spec, "updateStrategy")
    if strategy is not None:
        if not strategy.get("type"):
            strategy["type"] = "RollingUpdate"
            _dict(strategy, "rollingUpdate")
        rolling = strategy.get("rollingUpdate")
        if strategy["type"] == "RollingUpdate" and isinstance(rolling, dict):
            _setdefaults(rolling, {"partition": 0})
    for claim in _dicts(spec.get("volumeClaimTemplates")):
        claim_spec = claim.get("spec")
        if isinstance(claim_spec, dict):
            _setdefaults(claim_spec, {"volumeMode": "Filesystem"})
    _template(spec)


def _job(obj: Obj, spec: Obj) -> None:
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
    if spec.get("parallelism") is None:
        spec["parallelism"] = 1
    if spec.get("backoffLimit") is None and spec.get("backoffLimitPerIndex") is not None:
        spec["backoffLimit"] = 2**31 - 1
    _setdefaults(spec, _JOB)
    if spec.get("podReplacementPolicy") is None:
        failed = spec.get("podFailurePolicy") is not None
        spec["podReplacementPolicy"] = "Failed" if failed else "TerminatingOrFailed"
    template = spec.get("template")
    template_meta = template.get("metadata") if isinstance(template, dict) else None
    labels = template_meta.get("labels") if isinstance(template_meta, dict) else None
    meta = obj.get("metadata")
    if isinstance(labels, dict) and labels and isinstance(meta, dict) and not meta.get("labels"):
        meta["labels"] = dict(labels)
    _template(spec)


def _cronjob(obj: Obj, spec: Obj) -> None:
    _setdefaults(spec, _CRONJOB)
    job_template = spec.get("jobTemplate")
    if isinstance(job_template, dict) and isinstance(job_template.get("spec"), dict):
        _template(job_template["spec"])


# ------------------------------------------------------------ storage, network


def _persistent_volume(obj: Obj, spec: Obj) -> None:
    _setdefaults(spec, _PERSISTENT_VOLUME)
    host_path = spec.get("hostPath")
    if isinstance(host_path, dict) and host_path.get("type") is None:
        host_path["type"] = ""
    status = obj.get("status")
    if status is None or (isinstance(status, dict) and not status.get("phase")):
        obj["status"] = {**(status or {}), "phase": "Pending"}


def _persistent_volume_claim(obj: Obj, spec: Obj) -> None:
    # SetDefaults_PersistentVolumeClaimSpec and SetDefaults_PersistentVolumeClaim
    _setdefaults(spec, {"volumeMode": "Filesystem"})
    status = obj.get("status")
    if status is None or (isinstance(status, dict) and not status.get("phase")):
        obj["status"] = {**(status or {}), "phase": "Pending"}


def _csi_driver(obj: Obj, spec: Obj) -> None:
    _setdefaults(spec, _CSI_DRIVER)


def _network_policy(obj: Obj, spec: Obj) -> None:
    for rule in _dicts(spec.get("ingress")) + _dicts(spec.get("egress")):
        for port in _dicts(rule.get("ports")):
            if port.get("protocol") is None:
                port["protocol"] = "TCP"
    if not spec.get("policyTypes"):  # Ingress always; Egress when it has egress rules
        spec["policyTypes"] = ["Ingress", "Egress"] if spec.get("egress") else ["Ingress"]


def _ingress_class(obj: Obj, spec: Obj) -> None:
    parameters = spec.get("parameters")
    if isinstance(parameters, dict) and parameters.get("scope") is None:
        parameters["scope"] = "Cluster"


def _service(obj: Obj, spec: Obj) -> None:
    """``SetDefaults_Service`` (``pkg/apis/core/v1/defaults.go``): the scheme's defaults; the
    cluster IP, IP families and node ports are the registry's (`_services`)."""
    if not spec.get("sessionAffinity"):
        spec["sessionAffinity"] = "None"
    if spec["sessionAffinity"] == "None":
        spec.pop("sessionAffinityConfig", None)
    elif spec["sessionAffinity"] == "ClientIP":
        config = spec.get("sessionAffinityConfig")
        client_ip = config.get("clientIP") if isinstance(config, dict) else None
        if not isinstance(client_ip, dict) or client_ip.get("timeoutSeconds") is None:
            spec["sessionAffinityConfig"] = {"clientIP": {"timeoutSeconds": 10800}}
    if not spec.get("type"):
        spec["type"] = "ClusterIP"
    kind = spec["type"]
    for port in _dicts(spec.get("ports")):
        if not port.get("protocol"):
            port["protocol"] = "TCP"
        if port.get("targetPort") in (None, 0, ""):
            port["targetPort"] = port.get("port")
    if externally_accessible(spec) and not spec.get("externalTrafficPolicy"):
        spec["externalTrafficPolicy"] = "Cluster"
    if spec.get("internalTrafficPolicy") is None and kind in (
        "NodePort",
        "LoadBalancer",
        "ClusterIP",
    ):
        spec["internalTrafficPolicy"] = "Cluster"
    if kind == "LoadBalancer" and spec.get("allocateLoadBalancerNodePorts") is None:
        spec["allocateLoadBalancerNodePorts"] = True


_KINDS = {
    ("", "pods"): _pod,
    ("", "services"): _service,
    ("", "replicationcontrollers"): _replication_controller,
    ("", "persistentvolumes"): _persistent_volume,
    ("", "persistentvolumeclaims"): _persistent_volume_claim,
    ("apps", "deployments"): _deployment,
    ("apps", "replicasets"): _replicated,
    ("apps", "statefulsets"): _statefulset,
    ("apps", "daemonsets"): _daemonset,
    ("batch", "jobs"): _job,
    ("batch", "cronjobs"): _cronjob,
    ("storage.k8s.io", "csidrivers"): _csi_driver,
    ("networking.k8s.io", "networkpolicies"): _network_policy,
    ("networking.k8s.io", "ingressclasses"): _ingress_class,
}
