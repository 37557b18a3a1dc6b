"""The kinds a server serves: built-ins plus those its CRDs declare, and discovery documents."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mcruntime.envtest._kubelet import SUBRESOURCES as KUBELET_SUBRESOURCES

if TYPE_CHECKING:
    from mcruntime.envtest._cel_rules import RuleSet

__all__ = [
    "BASE_FIELDS",
    "CLUSTER_FIELDS",
    "CREATE_ON_UPDATE",
    "ServedResource",
    "Registry",
    "BUILTINS",
    "EVICTION_KIND",
    "STATUS_SUBRESOURCES",
    "version_priority",
]

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
STATUS_VERBS = ("get", "patch", "update")
_REPLICAS_SCALE = {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}
BASE_FIELDS = frozenset({"metadata.name", "metadata.namespace"})
#: the field labels a cluster-scoped kind with a conversion function of its own accepts:
#: ``metadata.name`` but not ``metadata.namespace`` (kube's ``pkg/apis/core/v1/conversion.go``
#: for Node and Namespace, ``pkg/apis/certificates/v1/conversion.go`` for CSRs, and
#: apiextensions' ``crConverter.ConvertFieldLabel`` for a cluster-scoped custom resource)
CLUSTER_FIELDS = frozenset({"metadata.name"})


#: the storage keys of the resources a PUT of an absent object creates: those whose registry
#: strategy's ``AllowCreateOnUpdate`` is true (kubernetes ``pkg/registry/*/strategy.go``);
#: for every other resource (ConfigMaps, Secrets, Pods, custom resources, ...) it is a 404
CREATE_ON_UPDATE: frozenset[tuple[str, str]] = frozenset(
    {
        ("", "events"),  # events.k8s.io's too: the same storage
        ("", "endpoints"),
        ("", "limitranges"),
        ("", "services"),
        ("coordination.k8s.io", "leases"),
        ("node.k8s.io", "runtimeclasses"),
        ("rbac.authorization.k8s.io", "roles"),
        ("rbac.authorization.k8s.io", "rolebindings"),
        ("rbac.authorization.k8s.io", "clusterroles"),
        ("rbac.authorization.k8s.io", "clusterrolebindings"),
    }
)
#: the subresources whose writes change an object's status only (approval: a CSR's conditions)
STATUS_SUBRESOURCES = frozenset({"status", "approval"})
#: the kind of the ``eviction`` subresource's body, as discovery and admission webhooks name it
EVICTION_KIND: dict[str, str] = {"group": "policy", "version": "v1", "kind": "Eviction"}


@dataclass(frozen=True)
class ServedResource:
    """One resource of one group/version, as discovery and the REST handlers see it."""

    group: str
    version: str
    plural: str
    singular: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    has_status: bool = False
    generation: bool = False
    name_rule: str = "subdomain"
    custom: bool = False
    fields: frozenset[str] = BASE_FIELDS
    verbs: tuple[str, ...] = ALL_VERBS
    categories: tuple[str, ...] = field(default=())
    schema: dict[str, Any] | None = field(default=None, compare=False, hash=False)
    #: a CRD's versions whose schemas declare a ``default``, to those schemas: an object is
    #: read with the defaults of the version it is stored in (`_schema.default_on_read`)
    read_defaults: dict[str, dict[str, Any]] | None = field(default=None, compare=False, hash=False)
    #: a CRD version other than its storage version, converted without a webhook (strategy
    #: ``None``): the storage version's apiVersion and schema. A write stores the object in
    #: it, pruned to that schema, as kube-apiserver's storage codec converts it
    stored_as: tuple[str, dict[str, Any] | None] | None = field(
        default=None, compare=False, hash=False
    )
    #: a CRD version's compiled CEL rules (``x-kubernetes-validations``), None without
    rules: RuleSet | None = field(default=None, compare=False, hash=False)
    #: a CRD version's additionalPrinterColumns (server-side printing)
    printer_columns: tuple[dict[str, Any], ...] = field(default=(), compare=False, hash=False)
    #: the /scale subresource's paths (specReplicasPath, statusReplicasPath, labelSelectorPath)
    scale: dict[str, Any] | None = field(default=None, compare=False, hash=False)
    #: the Warning every request to this resource gets (a deprecated CRD version's)
    warning: str = field(default="", compare=False, hash=False)
    #: the storage key when this resource is a view of another one's objects (events.k8s.io)
    storage: tuple[str, str] | None = None
    #: serves the ``/token`` subresource (TokenRequest: ServiceAccounts)
    token_request: bool = False
    #: serves the ``/approval`` subresource (CertificateSigningRequests)
    approval: bool = False
    #: serves the ``/eviction`` subresource (Pods: a policy/v1 Eviction, ``kubectl drain``)
    eviction: bool = False
    #: serves the ``/binding`` subresource (Pods: a v1 Binding to a node, as schedulers bind)
    binding: bool = False
    #: serves the subresources kube-apiserver hands to a node's kubelet (Pods: ``log``,
    #: ``exec``, ``attach``, ``portforward``; `_kubelet`)
    kubelet: bool = False
    #: serves ``/ephemeralcontainers`` (Pods: ``kubectl debug``; `_ephemeral`)
    ephemeral_containers: bool = False
    #: serves ``/finalize`` (Namespaces: a PUT writes ``spec.finalizers``)
    finalize: bool = False

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def key(self) -> tuple[str, str]:
        """Storage key: the objects of a resource are shared by all its versions (and views)."""
        return self.storage or (self.group, self.plural)

    @property
    def qualified(self) -> str:
        """``plural.group`` as used in error messages ("deployments.apps")."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def list_kind(self) -> str:
        return self.kind + "List"

    def discovery(self) -> list[dict[str, Any]]:
        """APIResource entries: the resource and its subresources."""
        entry: dict[str, Any] = {
            "name": self.plural,
            "singularName": self.singular,
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": list(self.verbs),
        }
        if self.short_names:
            entry["shortNames"] = list(self.short_names)
        if self.categories:
            entry["categories"] = list(self.categories)
        out = [entry]
        if self.binding:
            out.append(
                {
                    "name": self.plural + "/binding",
                    "singularName": "",
                    "namespaced": self.namespaced,
                    "kind": "Binding",
                    "verbs": ["create"],
                }
            )
        if self.eviction:  # kubectl drain evicts when discovery lists it, else deletes
            out.append(
                {
                    "name": self.plural + "/eviction",
                    "singularName": "",
                    "namespaced": self.namespaced,
                    **EVICTION_KIND,
                    "verbs": ["create"],
                }
            )
        for sub, served in (("approval", self.approval), ("status", self.has_status)):
            if served:  # subresources of the object's own kind
                out.append(
                    {
                        "name": f"{self.plural}/{sub}",
                        "singularName": "",
                        "namespaced": self.namespaced,
                        "kind": self.kind,
                        "verbs": list(STATUS_VERBS),
                    }
                )
        if self.finalize:
            out.append(
                {
                    "name": self.plural + "/finalize",
                    "singularName": "",
                    "namespaced": self.namespaced,
                    "kind": self.kind,
                    "verbs": ["update"],
                }
            )
        if self.scale is not None:
            out.append(
                {
                    "name": self.plural + "/scale",
                    "singularName": "",
                    "namespaced": self.namespaced,
                    "group": "autoscaling",
                    "version": "v1",
                    "kind": "Scale",
                    "verbs": list(STATUS_VERBS),
                }
            )
        if self.token_request:
            out.append(
                {
                    "name": self.plural + "/token",
                    "singularName": "",
                    "namespaced": self.namespaced,
                    "group": "authentication.k8s.io",
                    "version": "v1",
                    "kind": "TokenRequest",
                    "verbs": ["create"],
                }
            )
        if self.kubelet:
            out.extend(
                {
                    "name": f"{self.plural}/{sub}",
                    "singularName": "",
                    "namespaced": self.namespaced,
                    "kind": kind,
                    "verbs": list(verbs),
                }
                for sub, (kind, verbs, _path) in KUBELET_SUBRESOURCES.items()
            )
        if self.ephemeral_containers:
            out.append(
                {
                    "name": f"{self.plural}/ephemeralcontainers",
                    "singularName": "",
                    "namespaced": self.namespaced,
                    "kind": self.kind,
                    "verbs": ["get", "patch", "update"],
                }
            )
        out[1:] = sorted(out[1:], key=lambda e: e["name"])  # kube-apiserver lists paths sorted
        return out


def _core(plural: str, kind: str, namespaced: bool = True, **kw: Any) -> ServedResource:
    return ServedResource("", "v1", plural, kind.lower(), kind, namespaced, **kw)


def _hpa(version: str, **kw: Any) -> ServedResource:
    return ServedResource(
        "autoscaling",
        version,
        "horizontalpodautoscalers",
        "horizontalpodautoscaler",
        "HorizontalPodAutoscaler",
        True,
        ("hpa",),
        has_status=True,
        generation=True,
        categories=("all",),
        **kw,
    )


_POD_FIELDS = BASE_FIELDS | {
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.podIPs",
    "status.nominatedNodeName",
    "spec.host",  # the old name of spec.nodeName (see _field_labels)
}
_EVENT_FIELDS = BASE_FIELDS | {
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
}

BUILTINS: tuple[ServedResource, ...] = (
    _core(
        "namespaces",
        "Namespace",
        False,
        short_names=("ns",),
        has_status=True,
        name_rule="label",
        fields=CLUSTER_FIELDS | {"status.phase"},
        # kube-apiserver's namespace storage has no DeleteCollection: one at a time
        verbs=tuple(v for v in ALL_VERBS if v != "deletecollection"),
        finalize=True,
    ),
    _core("configmaps", "ConfigMap", short_names=("cm",)),
    _core("secrets", "Secret", fields=BASE_FIELDS | {"type"}),
    _core(
        "services",
        "Service",
        short_names=("svc",),
        has_status=True,
        name_rule="dns1035",
        categories=("all",),
        # kube-apiserver 1.30+: find the Services of one type or the one holding an IP
        fields=BASE_FIELDS | {"spec.clusterIP", "spec.type"},
    ),
    _core("serviceaccounts", "ServiceAccount", short_names=("sa",), token_request=True),
    _core(
        "pods",
        "Pod",
        short_names=("po",),
        has_status=True,
        fields=_POD_FIELDS,
        categories=("all",),
        eviction=True,
        binding=True,
        kubelet=True,
        ephemeral_containers=True,
    ),
    # a core/v1 Event's name is only a path segment (ValidateEventCreate checks none for
    # core/v1; events.k8s.io/v1 wants a DNS subdomain, `_events.check_events_v1`)
    _core("events", "Event", short_names=("ev",), fields=_EVENT_FIELDS, name_rule="path"),
    # the older way to bind a pod (pods/binding is the newer): create only, never stored
    _core("bindings", "Binding", verbs=("create",)),
    _core("endpoints", "Endpoints", short_names=("ep",)),
    _core("persistentvolumeclaims", "PersistentVolumeClaim", short_names=("pvc",), has_status=True),
    _core("resourcequotas", "ResourceQuota", short_names=("quota",), has_status=True),
    _core("limitranges", "LimitRange", short_names=("limits",)),
    _core(
        "nodes",
        "Node",
        False,
        short_names=("no",),
        has_status=True,
        fields=CLUSTER_FIELDS | {"spec.unschedulable"},
    ),
    _core(
        "replicationcontrollers",
        "ReplicationController",
        short_names=("rc",),
        has_status=True,
        generation=True,
        categories=("all",),
        scale=_REPLICAS_SCALE,
        fields=BASE_FIELDS | {"status.replicas"},
    ),
    _core("podtemplates", "PodTemplate", generation=True),
    _core("persistentvolumes", "PersistentVolume", False, short_names=("pv",), has_status=True),
    ServedResource(
        "apps",
        "v1",
        "deployments",
        "deployment",
        "Deployment",
        True,
        ("deploy",),
        has_status=True,
        generation=True,
        categories=("all",),
        scale=_REPLICAS_SCALE,
    ),
    ServedResource(
        "apps",
        "v1",
        "replicasets",
        "replicaset",
        "ReplicaSet",
        True,
        ("rs",),
        has_status=True,
        generation=True,
        categories=("all",),
        scale=_REPLICAS_SCALE,
    ),
    ServedResource(
        "apps",
        "v1",
        "statefulsets",
        "statefulset",
        "StatefulSet",
        True,
        ("sts",),
        has_status=True,
        generation=True,
        categories=("all",),
        scale=_REPLICAS_SCALE,
    ),
    ServedResource(
        "apps",
        "v1",
        "daemonsets",
        "daemonset",
        "DaemonSet",
        True,
        ("ds",),
        has_status=True,
        generation=True,
        categories=("all",),
    ),
    ServedResource(
        "apps", "v1", "controllerrevisions", "controllerrevision", "ControllerRevision", True
    ),
    ServedResource(
        "batch",
        "v1",
        "jobs",
        "job",
        "Job",
        True,
        has_status=True,
        generation=True,
        categories=("all",),
        fields=BASE_FIELDS | {"status.successful"},
    ),
    ServedResource(
        "batch",
        "v1",
        "cronjobs",
        "cronjob",
        "CronJob",
        True,
        ("cj",),
        has_status=True,
        generation=True,
        categories=("all",),
    ),
    ServedResource("coordination.k8s.io", "v1", "leases", "lease", "Lease", True),
    _hpa("v2"),
    # the v1 HPAs are a view of the v2 ones (mcruntime.envtest._views), as kubectl <= 1.32's
    # `autoscale` and older clients write them
    _hpa("v1", storage=("autoscaling", "horizontalpodautoscalers")),
    ServedResource(
        "policy",
        "v1",
        "poddisruptionbudgets",
        "poddisruptionbudget",
        "PodDisruptionBudget",
        True,
        ("pdb",),
        has_status=True,
        generation=True,
    ),
    ServedResource(
        "certificates.k8s.io",
        "v1",
        "certificatesigningrequests",
        "certificatesigningrequest",
        "CertificateSigningRequest",
        False,
        ("csr",),
        has_status=True,
        approval=True,
        fields=CLUSTER_FIELDS | {"spec.signerName"},
    ),
    ServedResource(
        "scheduling.k8s.io",
        "v1",
        "priorityclasses",
        "priorityclass",
        "PriorityClass",
        False,
        ("pc",),
    ),
    ServedResource(
        "events.k8s.io",
        "v1",
        "events",
        "event",
        "Event",
        True,
        ("ev",),
        storage=("", "events"),
        fields=BASE_FIELDS
        | {
            "reason",
            "type",
            "regarding.kind",
            "regarding.name",
            "regarding.namespace",
            "regarding.uid",
            "reportingController",
        },
    ),
    ServedResource(
        "discovery.k8s.io", "v1", "endpointslices", "endpointslice", "EndpointSlice", True
    ),
    ServedResource(
        "networking.k8s.io",
        "v1",
        "ingresses",
        "ingress",
        "Ingress",
        True,
        ("ing",),
        has_status=True,
        generation=True,
    ),
    ServedResource(
        "networking.k8s.io",
        "v1",
        "networkpolicies",
        "networkpolicy",
        "NetworkPolicy",
        True,
        ("netpol",),
        generation=True,
    ),
    ServedResource(
        "networking.k8s.io",
        "v1",
        "ingressclasses",
        "ingressclass",
        "IngressClass",
        False,
        generation=True,
    ),
    ServedResource(
        "storage.k8s.io", "v1", "storageclasses", "storageclass", "StorageClass", False, ("sc",)
    ),
    ServedResource("storage.k8s.io", "v1", "csidrivers", "csidriver", "CSIDriver", False),
    ServedResource("storage.k8s.io", "v1", "csinodes", "csinode", "CSINode", False),
    ServedResource(
        "storage.k8s.io",
        "v1",
        "volumeattachments",
        "volumeattachment",
        "VolumeAttachment",
        False,
        has_status=True,
    ),
    ServedResource("node.k8s.io", "v1", "runtimeclasses", "runtimeclass", "RuntimeClass", False),
    # RBAC names are path segments, as kube-apiserver's ValidateRBACName ("system:basic-user")
    *(
        ServedResource(
            "rbac.authorization.k8s.io",
            "v1",
            plural,
            plural[:-1],
            kind,
            namespaced,
            name_rule="path",
        )
        for plural, kind, namespaced in (
            ("roles", "Role", True),
            ("rolebindings", "RoleBinding", True),
            ("clusterroles", "ClusterRole", False),
            ("clusterrolebindings", "ClusterRoleBinding", False),
        )
    ),
    ServedResource(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "customresourcedefinition",
        "CustomResourceDefinition",
        False,
        ("crd", "crds"),
        has_status=True,
        generation=True,
    ),
    # reviews are answered, never stored (kubectl auth whoami, kubectl auth can-i)
    ServedResource(
        "authentication.k8s.io",
        "v1",
        "selfsubjectreviews",
        "selfsubjectreview",
        "SelfSubjectReview",
        False,
        verbs=("create",),
    ),
    ServedResource(
        "authorization.k8s.io",
        "v1",
        "selfsubjectaccessreviews",
        "selfsubjectaccessreview",
        "SelfSubjectAccessReview",
        False,
        verbs=("create",),
    ),
    ServedResource(
        "authorization.k8s.io",
        "v1",
        "selfsubjectrulesreviews",
        "selfsubjectrulesreview",
        "SelfSubjectRulesReview",
        False,
        verbs=("create",),
    ),
    # reviews of another subject, for servers that delegate authentication and authorization
    ServedResource(
        "authentication.k8s.io",
        "v1",
        "tokenreviews",
        "tokenreview",
        "TokenReview",
        False,
        verbs=("create",),
    ),
    ServedResource(
        "authorization.k8s.io",
        "v1",
        "subjectaccessreviews",
        "subjectaccessreview",
        "SubjectAccessReview",
        False,
        verbs=("create",),
    ),
    ServedResource(
        "authorization.k8s.io",
        "v1",
        "localsubjectaccessreviews",
        "localsubjectaccessreview",
        "LocalSubjectAccessReview",
        True,
        verbs=("create",),
    ),
    ServedResource(
        "admissionregistration.k8s.io",
        "v1",
        "mutatingwebhookconfigurations",
        "mutatingwebhookconfiguration",
        "MutatingWebhookConfiguration",
        False,
        generation=True,
    ),
    ServedResource(
        "admissionregistration.k8s.io",
        "v1",
        "validatingwebhookconfigurations",
        "validatingwebhookconfiguration",
        "ValidatingWebhookConfiguration",
        False,
        generation=True,
    ),
    ServedResource(
        "admissionregistration.k8s.io",
        "v1",
        "validatingadmissionpolicies",
        "validatingadmissionpolicy",
        "ValidatingAdmissionPolicy",
        False,
        has_status=True,
        generation=True,
    ),
    ServedResource(
        "admissionregistration.k8s.io",
        "v1",
        "validatingadmissionpolicybindings",
        "validatingadmissionpolicybinding",
        "ValidatingAdmissionPolicyBinding",
        False,
        generation=True,
    ),
)

_VERSION_RE = re.compile(r"^v(\d+)(?:(alpha|beta)(\d+))?$")


def version_priority(version: str) -> tuple[int, int, int, str]:
    """Sort key putting versions in Kubernetes priority order (v2 > v1 > v1beta2 > v1alpha1 > other)."""
    m = _VERSION_RE.match(version)
    if not m:
        return (3, 0, 0, version)
    major = int(m.group(1))
    stage = {None: 0, "beta": 1, "alpha": 2}[m.group(2)]
    minor = int(m.group(3) or 0)
    return (stage, -major, -minor, version)


class Registry:
    """Resources served by one server, looked up by group/version/plural."""

    def __init__(self) -> None:
        self._by_gv: dict[tuple[str, str], dict[str, ServedResource]] = {}
        self._group_order: list[str] = []
        self._crd_resources: dict[str, list[ServedResource]] = {}
        for r in BUILTINS:
            self._add(r)

    def _add(self, r: ServedResource) -> None:
        self._by_gv.setdefault((r.group, r.version), {})[r.plural] = r
        if r.group not in self._group_order:
            self._group_order.append(r.group)

    def _remove(self, r: ServedResource) -> None:
        gv = self._by_gv.get((r.group, r.version))
        if gv is not None and gv.get(r.plural) is r:
            del gv[r.plural]
            if not gv:
                del self._by_gv[(r.group, r.version)]
        if r.group in self._group_order and not any(g == r.group for g, _ in self._by_gv):
            self._group_order.remove(r.group)

    def get(self, group: str, version: str, plural: str) -> ServedResource | None:
        gv = self._by_gv.get((group, version))
        return gv.get(plural) if gv else None

    def has_group_version(self, group: str, version: str) -> bool:
        return (group, version) in self._by_gv

    def resources(self, group: str, version: str) -> list[ServedResource]:
        return list(self._by_gv.get((group, version), {}).values())

    def served(self) -> list[ServedResource]:
        """Every resource served, built-in and custom."""
        return [r for gv in self._by_gv.values() for r in gv.values()]

    def versions_of(self, key: tuple[str, str]) -> list[ServedResource]:
        """Every served version of the resource stored under ``key``."""
        return [
            r
            for (g, _), gv in self._by_gv.items()
            if g == key[0]
            for r in gv.values()
            if r.plural == key[1]
        ]

    def set_crd(self, crd_name: str, resources: list[ServedResource]) -> None:
        """Serve (or re-serve after an update) the versions a CRD declares."""
        for r in self._crd_resources.pop(crd_name, []):
            self._remove(r)
        for r in resources:
            self._add(r)
        self._crd_resources[crd_name] = resources

    def drop_crd(self, crd_name: str) -> list[ServedResource]:
        """Stop serving a CRD; returns the resources it had."""
        old = self._crd_resources.pop(crd_name, [])
        for r in old:
            self._remove(r)
        return old

    def crd_names(self) -> list[str]:
        """The names of the CRDs served now."""
        return list(self._crd_resources)

    def crd_resources(self, crd_name: str) -> list[ServedResource]:
        return list(self._crd_resources.get(crd_name, []))

    # discovery documents

    def api_versions(self, server_address: str) -> dict[str, Any]:
        return {
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [
                {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
            ],
        }

    def _group(self, group: str) -> dict[str, Any] | None:
        versions = self.group_versions(group)
        if not versions:
            return None
        entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        return {"name": group, "versions": entries, "preferredVersion": entries[0]}

    def group_names(self) -> list[str]:
        """The groups served, in the order of ``/apis`` ("" for the core group)."""
        return list(self._group_order)

    def group_versions(self, group: str) -> list[str]:
        """The versions of ``group`` served, the preferred first."""
        return sorted({v for g, v in self._by_gv if g == group}, key=version_priority)

    def api_group_list(self) -> dict[str, Any]:
        groups = [g for g in (self._group(name) for name in self._group_order if name) if g]
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}

    def api_group(self, group: str) -> dict[str, Any] | None:
        g = self._group(group)
        if g is None:
            return None
        return {"kind": "APIGroup", "apiVersion": "v1", **g}

    def resource_list(self, group: str, version: str) -> dict[str, Any] | None:
        gv = self._by_gv.get((group, version))
        if gv is None:
            return None
        entries = [e for r in gv.values() for e in r.discovery()]
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": f"{group}/{version}" if group else version,
            "resources": entries,
        }
