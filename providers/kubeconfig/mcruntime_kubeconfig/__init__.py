"""mcruntime provider ``kubeconfig``: clusters from labelled kubeconfig Secrets.

Each Secret in one namespace of a management cluster that carries the label
``sigs.k8s.io/multicluster-runtime-kubeconfig=true`` and a kubeconfig under
data key ``kubeconfig`` is a cluster named after the Secret.
``python -m mcruntime_kubeconfig create-secret ...`` writes such a Secret for a
kubeconfig context (ServiceAccount, RBAC, token, minimal kubeconfig).
"""

from __future__ import annotations

from mcruntime_kubeconfig._provider import (
    DEFAULT_KEY,
    DEFAULT_LABEL,
    DEFAULT_LABEL_VALUE,
    DEFAULT_NAMESPACE,
    MANAGEMENT_CLUSTER_NAME,
    Options,
    Provider,
    label_selector,
)
from mcruntime_kubeconfig._secret import (
    DEFAULT_RULES,
    DEFAULT_SERVICE_ACCOUNT,
    CreatedSecret,
    create_kubeconfig_secret,
)

__all__ = [
    "DEFAULT_KEY",
    "DEFAULT_LABEL",
    "DEFAULT_LABEL_VALUE",
    "DEFAULT_NAMESPACE",
    "DEFAULT_RULES",
    "DEFAULT_SERVICE_ACCOUNT",
    "MANAGEMENT_CLUSTER_NAME",
    "CreatedSecret",
    "Options",
    "Provider",
    "create_kubeconfig_secret",
    "label_selector",
]
