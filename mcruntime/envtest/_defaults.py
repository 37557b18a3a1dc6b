"""What a cluster has before anyone writes to it, as kube-controller-manager keeps it.

A new cluster starts with the namespaces ``default``, ``kube-system``,
``kube-public`` and ``kube-node-lease``. Every namespace, once created, gets
the ``default`` ServiceAccount (the service-account controller) and, with
``root_ca_configmap``, the ``kube-root-ca.crt`` ConfigMap holding the
cluster's CA bundle (the root-CA publisher). Real controllers do this moments
later; envtest does it at once, in the same request, so tests see no window
without them. Deleted, they are back at once too, as those controllers recreate them
(a new uid; a watcher sees the deletion, then the creation).

Once it listens, a server also has what kube-apiserver's own
``kubernetesservice`` controller writes: the ``default/kubernetes`` Service
(cluster IP ``KUBERNETES_SERVICE_IP``, port 443 to the server's port) and its
Endpoints and EndpointSlice naming the server's address and port.
"""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mcruntime.envtest._objects import Objects

__all__ = [
    "INITIAL_NAMESPACES",
    "DEFAULT_SERVICE_ACCOUNT",
    "ROOT_CA_CONFIGMAP",
    "NAMESPACE_DEFAULTS",
    "KUBERNETES_SERVICE_IP",
    "ensure_kubernetes_service",
    "populate_namespace",
]

INITIAL_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
DEFAULT_SERVICE_ACCOUNT = "default"
ROOT_CA_CONFIGMAP = "kube-root-ca.crt"
#: (storage key, name) of what `populate_namespace` keeps in every namespace
NAMESPACE_DEFAULTS = frozenset(
    {(("", "serviceaccounts"), DEFAULT_SERVICE_ACCOUNT), (("", "configmaps"), ROOT_CA_CONFIGMAP)}
)
_ROOT_CA_DESCRIPTION = (
    "Contains a CA bundle that can be used to verify the kube-apiserver when using internal "
    "endpoints such as the internal service IP or kubernetes.default.svc. No other usage is "
    "guaranteed across distributions of Kubernetes clusters."
)
#: the ``default/kubernetes`` Service's cluster IP: the first of envtest's range, as kind's
KUBERNETES_SERVICE_IP = "10.96.0.1"


def populate_namespace(objects: Objects, namespace: str, ca_pem: str | None) -> None:
    """Create the ``default`` ServiceAccount and (given ``ca_pem``) ``kube-root-ca.crt`` in ``namespace``."""
    sa = objects.registry.get("", "v1", "serviceaccounts")
    cm = objects.registry.get("", "v1", "configmaps")
    assert sa is not None and cm is not None
    if objects.store.get(sa.key, namespace, DEFAULT_SERVICE_ACCOUNT) is None:
        objects.create(sa, namespace, {"metadata": {"name": DEFAULT_SERVICE_ACCOUNT}})
    if ca_pem is not None and objects.store.get(cm.key, namespace, ROOT_CA_CONFIGMAP) is None:
        objects.create(
            cm,
            namespace,
            {
                "metadata": {
                    "name": ROOT_CA_CONFIGMAP,
                    "annotations": {"kubernetes.io/description": _ROOT_CA_DESCRIPTION},
                },
                "data": {"ca.crt": ca_pem},
            },
        )


def ensure_kubernetes_service(objects: Objects, host: str, port: int) -> None:
    """Create ``default/kubernetes`` and its Endpoints and EndpointSlice for a server
    listening on ``host:port`` (those missing: kube-apiserver creates the Service once
    and does not change it; envtest keeps its port across restarts)."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        address = ipaddress.ip_address("127.0.0.1")  # a name (localhost): its loopback
    if address.is_unspecified:
        address = ipaddress.ip_address("127.0.0.1" if address.version == 4 else "::1")
    ip = str(address)
    https = {"name": "https", "port": port, "protocol": "TCP"}
    objects_ = (
        (
            ("", "v1", "services"),
            {
                "metadata": {
                    "name": "kubernetes",
                    "labels": {"component": "apiserver", "provider": "kubernetes"},
                },
                "spec": {
                    "type": "ClusterIP",
                    "clusterIP": KUBERNETES_SERVICE_IP,
                    "ipFamilyPolicy": "SingleStack",
                    "sessionAffinity": "None",
                    "ports": [{**https, "port": 443, "targetPort": port}],
                },
            },
        ),
        (
            ("", "v1", "endpoints"),
            {
                "metadata": {
                    "name": "kubernetes",
                    # the lease reconciler's: not mirrored, it writes the slice itself
                    "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"},
                },
                "subsets": [{"addresses": [{"ip": ip}], "ports": [https]}],
            },
        ),
        (
            ("discovery.k8s.io", "v1", "endpointslices"),
            {
                "metadata": {
                    "name": "kubernetes",
                    "labels": {"kubernetes.io/service-name": "kubernetes"},
                },
                "addressType": "IPv6" if address.version == 6 else "IPv4",
                "endpoints": [{"addresses": [ip], "conditions": {"ready": True}}],
                "ports": [https],
            },
        ),
    )
    for (group, version, plural), body in objects_:
        res = objects.registry.get(group, version, plural)
        assert res is not None
        if objects.store.get(res.key, "default", "kubernetes") is None:
            objects.create(res, "default", body, manager="kube-apiserver")
