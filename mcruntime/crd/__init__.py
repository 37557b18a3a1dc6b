"""CustomResourceDefinitions from pydantic [`Resource`][mcruntime.client.Resource] classes.

[`generate_crd`][mcruntime.crd.generate_crd] writes an ``apiextensions.k8s.io/v1``
CRD whose structural ``openAPIV3Schema`` comes from the model (types, required
fields, enums, defaults, constraints, descriptions) and whose names, scope,
printer columns and subresources come from the class's
[`CRDOptions`][mcruntime.crd.CRDOptions];
[`install_crds`][mcruntime.crd.install_crds] creates or updates CRDs in a
cluster and waits until they are established;
[`migrate_storage`][mcruntime.crd.migrate_storage] stores a CRD's objects in its
storage version, so that an old version can be dropped. On the command line:
``python -m mcruntime crd module:Class``.
"""

from __future__ import annotations

from mcruntime._exports import publish
from mcruntime.crd._generate import generate_crd, generate_crds, load_resource_classes, plural_of
from mcruntime.crd._install import DEFAULT_INSTALL_TIMEOUT, install_crds, load_crds
from mcruntime.crd._markers import (
    EmbeddedResource,
    ListType,
    Nullable,
    PreserveUnknownFields,
    SchemaMarker,
)
from mcruntime.crd._migrate import DEFAULT_MIGRATE_TIMEOUT, StorageMigration, migrate_storage
from mcruntime.crd._options import CRDError, CRDNotEstablished, CRDOptions, PrinterColumn, Scale
from mcruntime.crd._schema import openapi_schema

__all__ = [
    "CRDError",
    "DEFAULT_INSTALL_TIMEOUT",
    "DEFAULT_MIGRATE_TIMEOUT",
    "CRDNotEstablished",
    "CRDOptions",
    "EmbeddedResource",
    "ListType",
    "Nullable",
    "PreserveUnknownFields",
    "PrinterColumn",
    "Scale",
    "SchemaMarker",
    "StorageMigration",
    "generate_crd",
    "generate_crds",
    "install_crds",
    "load_crds",
    "load_resource_classes",
    "migrate_storage",
    "openapi_schema",
    "plural_of",
]

publish(__name__, globals(), __all__)
