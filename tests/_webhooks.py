"""CRD pieces that point at a test's own webhook server."""

from __future__ import annotations

import base64
from typing import Any

from mcruntime.webhook import WebhookServer


def webhook_conversion(server: WebhookServer, path: str) -> dict[str, Any]:
    """A CRD's ``spec.conversion`` calling ``server`` at ``path`` (trusting its CA)."""
    return {
        "strategy": "Webhook",
        "webhook": {
            "conversionReviewVersions": ["v1"],
            "clientConfig": {
                "url": server.url_for(path),
                "caBundle": base64.b64encode(server.ca_bundle).decode(),
            },
        },
    }


#: a schema that keeps whatever it is given
OPEN: dict[str, Any] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


def versioned_crd(
    group: str,
    plural: str,
    kind: str,
    *,
    storage: str = "v2",
    versions: tuple[str, ...] = ("v1", "v2"),
    conversion: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A namespaced CRD serving ``versions`` with open schemas, stored in ``storage``."""
    spec: dict[str, Any] = {
        "group": group,
        "scope": "Namespaced",
        "names": {"plural": plural, "singular": kind.lower(), "kind": kind},
        "versions": [
            {
                "name": v,
                "served": True,
                "storage": v == storage,
                "schema": {"openAPIV3Schema": OPEN},
            }
            for v in versions
        ],
    }
    if conversion is not None:
        spec["conversion"] = conversion
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": spec,
    }
