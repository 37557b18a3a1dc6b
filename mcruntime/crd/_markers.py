"""Field markers for ``Annotated[...]``: schema settings pydantic has no word for.

spec: Annotated[JobTemplate, PreserveUnknownFields]
ports: Annotated[list[Port], ListType("map", keys=("name",))]
note: Annotated[str | None, Nullable] = None
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

__all__ = ["SchemaMarker", "PreserveUnknownFields", "Nullable", "EmbeddedResource", "ListType"]


class SchemaMarker:
    """Adds keys to a field's schema (e.g. ``x-kubernetes-*`` extensions); use in ``Annotated``."""

    def __init__(self, name: str, extra: dict[str, Any]) -> None:
        self.name = name
        self.extra = dict(extra)

    def __repr__(self) -> str:
        return self.name

    def __get_pydantic_json_schema__(
        self, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {**handler(core_schema), **self.extra}


#: the API server keeps fields the schema does not declare (instead of pruning them)
PreserveUnknownFields = SchemaMarker(
    "PreserveUnknownFields", {"x-kubernetes-preserve-unknown-fields": True}
)
#: ``null`` is a valid value of the field (without it, the server drops nulls)
Nullable = SchemaMarker("Nullable", {"nullable": True})
#: the field holds a Kubernetes object (apiVersion, kind, metadata are validated as such)
EmbeddedResource = SchemaMarker(
    "EmbeddedResource",
    {"x-kubernetes-embedded-resource": True, "x-kubernetes-preserve-unknown-fields": True},
)


def ListType(
    list_type: Literal["atomic", "set", "map"], *, keys: Sequence[str] = ()
) -> SchemaMarker:
    """``x-kubernetes-list-type`` of a list (and ``x-kubernetes-list-map-keys`` for ``map``).

    ``map`` lists are merged item by item, keyed by ``keys`` (required fields of
    the items) by server-side apply and strategic merge patches; ``set`` lists
    hold unique scalars; ``atomic`` lists are replaced whole.
    """
    if list_type == "map" and not keys:
        raise ValueError('ListType("map") needs keys=(...): the item fields that identify an item')
    if list_type != "map" and keys:
        raise ValueError(f'ListType({list_type!r}) takes no keys; only "map" lists have keys')
    extra: dict[str, Any] = {"x-kubernetes-list-type": list_type}
    if keys:
        extra["x-kubernetes-list-map-keys"] = list(keys)
    return SchemaMarker(f"ListType({list_type!r})", extra)
