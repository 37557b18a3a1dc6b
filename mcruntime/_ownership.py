"""Cross-cluster owner records: the label and annotation keys, and their parsing.

The keys live here, in the base layer, because both the event handlers
(`mcruntime.handler`) and the helpers and garbage collector of
`mcruntime.controllerutil` read them. See docs/concepts/ownership.md.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import orjson

PREFIX = "mcruntime.io/"
#: label on a dependent: the owner's uid (selected on by the garbage collector)
LABEL_OWNER_UID = PREFIX + "owner-uid"
#: label on a dependent: a hash of the owner's cluster name (``c-`` + 16 hex digits)
LABEL_OWNER_CLUSTER = PREFIX + "owner-cluster"
#: annotation on a dependent: the owner record as JSON
ANNOTATION_OWNER = PREFIX + "owner"
#: finalizer on an owner: its dependents in every cluster go before it does
FINALIZER_FOREGROUND = PREFIX + "foreground-deletion"
#: finalizer on an owner: its dependents are kept and lose their owner record
FINALIZER_ORPHAN = PREFIX + "orphan-dependents"
#: annotation on an owner being deleted: JSON list of the clusters that reported
#: its dependents gone (foreground) or released (orphan)
ANNOTATION_CLEARED = PREFIX + "dependents-cleared"


def cluster_label_value(cluster_name: str) -> str:
    """The label value naming ``cluster_name``: short, valid for any name, stable across processes."""
    return "c-" + hashlib.sha256(cluster_name.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class OwnerRecord:
    """An owner named on a dependent: its cluster (``""`` = the dependent's manager's local one) and identity."""

    cluster: str
    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str
    controller: bool = True

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    def to_json(self) -> str:
        return orjson.dumps(
            {
                "cluster": self.cluster,
                "apiVersion": self.api_version,
                "kind": self.kind,
                "namespace": self.namespace,
                "name": self.name,
                "uid": self.uid,
                "controller": self.controller,
            }
        ).decode()


def owner_record(obj: dict[str, Any]) -> OwnerRecord | None:
    """The cross-cluster owner recorded on ``obj``, or None (none, or malformed: ignored)."""
    m = obj.get("metadata")
    if not isinstance(m, dict):
        return None
    raw = (m.get("annotations") or {}).get(ANNOTATION_OWNER)
    if not raw:
        return None
    try:
        d = orjson.loads(raw)
        rec = OwnerRecord(
            cluster=str(d.get("cluster") or ""),
            api_version=str(d["apiVersion"]),
            kind=str(d["kind"]),
            namespace=str(d.get("namespace") or ""),
            name=str(d["name"]),
            uid=str(d["uid"]),
            controller=bool(d.get("controller", True)),
        )
    except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError):
        return None
    # the label is what the collector selects on: a record without it is not in force
    if (m.get("labels") or {}).get(LABEL_OWNER_UID) != rec.uid:
        return None
    return rec
