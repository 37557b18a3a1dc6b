"""Class-level CRD settings of a pydantic ``Resource``: names, scope, columns, subresources, versions."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from mcruntime.errors import MCRuntimeError

__all__ = ["CRDError", "CRDNotEstablished", "CRDOptions", "PrinterColumn", "Scale"]


class CRDError(MCRuntimeError, ValueError):
    """A CustomResourceDefinition cannot be generated or installed; the message names the class or CRD."""


class CRDNotEstablished(CRDError, TimeoutError):
    """A CRD was not ``Established`` by the API server before the deadline (or its names conflict)."""

    def __init__(self, message: str, *, crd_name: str) -> None:
        self.crd_name = crd_name
        super().__init__(message)


@dataclass(frozen=True, kw_only=True)
class PrinterColumn:
    """A column ``kubectl get`` shows (``additionalPrinterColumns``).

    ``json_path`` is a JSONPath into the object such as ``.status.phase``, naming fields
    as the API does (``.status.readyReplicas``; a field's Python name there is a
    [`CRDError`][mcruntime.crd.CRDError]);
    ``type`` is one of ``string``, ``integer``, ``number``, ``boolean``, ``date``
    (None: taken from the field the path names, ``string`` when it names none);
    ``priority`` 0 shows the column by default, higher only with ``-o wide``.
    """

    name: str
    json_path: str
    type: Literal["string", "integer", "number", "boolean", "date"] | None = None
    description: str | None = None
    format: str | None = None
    priority: int = 0


@dataclass(frozen=True, kw_only=True)
class Scale:
    """The ``scale`` subresource: where the replica counts (and the label selector) live."""

    spec_replicas_path: str = ".spec.replicas"
    status_replicas_path: str = ".status.replicas"
    label_selector_path: str | None = None


@dataclass(frozen=True, kw_only=True)
class CRDOptions:
    """CRD settings of a [`Resource`][mcruntime.client.Resource] class, set as a class variable.

        class FleetJob(Resource):
            api_version: ClassVar[str] = "example.com/v1"
            kind: ClassVar[str] = "FleetJob"
            crd_options: ClassVar[CRDOptions] = CRDOptions(
                short_names=("fj",),
                printer_columns=(PrinterColumn(name="Phase", json_path=".status.phase"),),
            )

    CRD-wide settings (``scope``, ``plural``, ``singular``, ``short_names``,
    ``categories``) must agree between the classes of one CRD's versions; the
    others belong to the class's version. Defaults: ``plural`` is the lower-case
    kind made plural by the English rules (set it for irregular words),
    ``singular`` the lower-case kind; the status subresource is on when the
    class declares a ``status`` field (``status_subresource=None``); the storage
    version is the class with ``storage=True``, else the only one not set to
    ``storage=False`` (a class alone is the storage version).
    """

    scope: Literal["Namespaced", "Cluster"] = "Namespaced"
    plural: str | None = None
    singular: str | None = None
    short_names: Sequence[str] = ()
    categories: Sequence[str] = ()
    printer_columns: Sequence[PrinterColumn] = ()
    status_subresource: bool | None = None
    scale: Scale | None = None
    storage: bool | None = None
    served: bool = True
    deprecated: bool = False
    deprecation_warning: str | None = None
    selectable_fields: Sequence[str] = ()
