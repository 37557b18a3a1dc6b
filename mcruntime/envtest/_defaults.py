"""What a cluster has before anyone writes to it, as kube-controller-manager keeps it.

A new cluster starts with the namespaces ``default``, ``kube-system``,
``kube-public`` and ``kube-node-lease``. Every namespace, once created, gets
the ``default`` ServiceAccount (the service-account controller) and, with
``root_ca_configmap``, the ``kube-root-ca.crt`` ConfigMap holding the
cluster's CA bundle (the root-CA publisher). Real controllers do this moments
later; envtest does it at once, in the same request, so tests see no window
without them. (Unlike the real controllers, envtest does not recreate them
after a client deletes them.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mcruntime.envtest._objects import Objects

__all__ = [
    "INITIAL_NAMESPACES",
    "DEFAULT_SERVICE_ACCOUNT",
    "ROOT_CA_CONFIGMAP",
    "populate_namespace",
]

INITIAL_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
DEFAULT_SERVICE_ACCOUNT = "default"
ROOT_CA_CONFIGMAP = "kube-root-ca.crt"
_ROOT_CA_DESCRIPTION = (
    "Contains a CA bundle that can be used to verify the kube-apiserver when using internal "
    "endpoints such as the internal service IP or kubernetes.default.svc. No other usage is "
    "guaranteed across distributions of Kubernetes clusters."
)


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
