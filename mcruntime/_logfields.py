"""The structured fields of mcruntime's log records: what a JSON formatter ships beside the message.

The library's lines name their cluster, controller and request in their text
(``controller=configmaps cluster=eu-1 request=default/web: ...``); the same names are
attributes of the record (``logging``'s ``extra=``), so a pipeline that ships records as
JSON (python-json-logger, structlog's ``ProcessorFormatter``) can be queried by field
(``cluster="eu-1"``) without parsing the message. `log_fields` builds them, for every
call that sets them; the set is documented in docs/operations.md ("Fields of the log
records"), and `FIELDS` lists it.

Only names go into a field (a cluster's, a controller's, an object's, a Lease's, a
provider's), never a value read from a kubeconfig, a Secret or an object's content.
"""

from __future__ import annotations

import uuid

from mcruntime._local import display_name

__all__ = ["FIELDS", "log_fields", "new_reconcile_id"]

#: every field a record of mcruntime may carry; a record carries those that apply to it
FIELDS = (
    "cluster",
    "controller",
    "kind",
    "provider",
    "namespace",
    "object_name",
    "request",
    "reconcile_id",
    "lease",
    "identity",
)


def log_fields(
    *,
    cluster: str | None = None,
    controller: str | None = None,
    kind: str | None = None,
    provider: str | None = None,
    namespace: str | None = None,
    name: str | None = None,
    reconcile_id: str | None = None,
    lease: str | None = None,
    identity: str | None = None,
) -> dict[str, str]:
    """The ``extra=`` of a record about what is given (what is None is left out).

    ``cluster`` is the cluster's name as the program knows it (``""``: the local
    cluster, as in `Request.cluster_name`), set as the line's text and the metrics'
    ``cluster`` label show it (`display_name`: the local cluster reads ``local``);
    ``name`` (with ``namespace``, ``""`` for a
    cluster-scoped object) is an object's, and sets ``object_name``, ``namespace`` and
    ``request`` (``namespace/name``, or ``name``): a record's ``name`` is its logger's.
    """
    request = None if name is None else f"{namespace}/{name}" if namespace else name
    values = (
        None if cluster is None else display_name(cluster),
        controller,
        kind,
        provider,
        None if name is None else namespace or "",
        name,
        request,
        reconcile_id,
        lease,
        identity,
    )
    return {f: v for f, v in zip(FIELDS, values, strict=True) if v is not None}


def new_reconcile_id() -> str:
    """A new reconcile id (a random UUID, as controller-runtime's ``reconcileID``)."""
    return str(uuid.uuid4())
