"""The ClusterProfile CustomResourceDefinition (``multicluster.x-k8s.io/v1alpha1``), for tests and demos.

Written from the Cluster Inventory API types (sigs.k8s.io/cluster-inventory-api):
``spec.displayName``, ``spec.clusterManager.name``; ``status.conditions``,
``status.version``, ``status.properties``, ``status.accessProviders`` and the
older ``status.credentialProviders`` (each a name and a kubeconfig ``cluster``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["CLUSTER_PROFILE_CRD"]

_PROVIDERS: dict[str, Any] = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["name"],
        "properties": {
            "name": {"type": "string"},
            "cluster": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        },
    },
}

CLUSTER_PROFILE_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "clusterprofiles.multicluster.x-k8s.io"},
    "spec": {
        "group": "multicluster.x-k8s.io",
        "scope": "Namespaced",
        "names": {
            "plural": "clusterprofiles",
            "singular": "clusterprofile",
            "kind": "ClusterProfile",
            "listKind": "ClusterProfileList",
        },
        "versions": [
            {
                "name": "v1alpha1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "required": ["spec"],
                        "properties": {
                            "apiVersion": {"type": "string"},
                            "kind": {"type": "string"},
                            "metadata": {"type": "object"},
                            "spec": {
                                "type": "object",
                                "required": ["clusterManager"],
                                "properties": {
                                    "displayName": {"type": "string"},
                                    "clusterManager": {
                                        "type": "object",
                                        "required": ["name"],
                                        "properties": {"name": {"type": "string"}},
                                    },
                                },
                            },
                            "status": {
                                "type": "object",
                                "properties": {
                                    "conditions": {
                                        "type": "array",
                                        "items": {
                                            "type": "object",
                                            "required": ["type", "status"],
                                            "properties": {
                                                "type": {"type": "string"},
                                                "status": {
                                                    "type": "string",
                                                    "enum": ["True", "False", "Unknown"],
                                                },
                                                "reason": {"type": "string"},
                                                "message": {"type": "string"},
                                                "lastTransitionTime": {
                                                    "type": "string",
                                                    "format": "date-time",
                                                },
                                                "observedGeneration": {"type": "integer"},
                                            },
                                        },
                                    },
                                    "version": {
                                        "type": "object",
                                        "properties": {"kubernetes": {"type": "string"}},
                                    },
                                    "properties": {
                                        "type": "array",
                                        "items": {
                                            "type": "object",
                                            "required": ["name", "value"],
                                            "properties": {
                                                "name": {"type": "string"},
                                                "value": {"type": "string"},
                                            },
                                        },
                                    },
                                    "accessProviders": _PROVIDERS,
                                    "credentialProviders": _PROVIDERS,
                                },
                            },
                        },
                    }
                },
            }
        ],
    },
}
