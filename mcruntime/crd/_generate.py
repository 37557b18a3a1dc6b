"""CustomResourceDefinitions (``apiextensions.k8s.io/v1``) from pydantic ``Resource`` classes."""

from __future__ import annotations

import importlib
import re
import typing
from collections.abc import Iterable
from typing import Annotated, Any

from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic.alias_generators import to_camel

from mcruntime.client import GroupVersionKind, Resource
from mcruntime.crd._options import CRDError, CRDOptions
from mcruntime.crd._schema import openapi_schema

__all__ = ["generate_crd", "generate_crds", "load_resource_classes", "plural_of"]

_DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_COLUMN_TYPES = frozenset({"string", "integer", "number", "boolean", "date"})
_SIMPLE_PATH = re.compile(r"^(\.[A-Za-z_][A-Za-z0-9_]*)+$")
#: the printer column types of object metadata's fields (the schema says only ``object``)
_METADATA_COLUMNS = {
    ".metadata.creationTimestamp": "date",
    ".metadata.deletionTimestamp": "date",
    ".metadata.generation": "integer",
    ".metadata.deletionGracePeriodSeconds": "integer",
}


def plural_of(kind: str) -> str:
    """The default plural resource name of a kind: lower case, English plural rules."""
    word = kind.lower()
    if re.search(r"(s|x|z|ch|sh)$", word):
        return word + "es"
    if re.search(r"[^aeiou]y$", word):
        return word[:-1] + "ies"
    return word + "s"


def _options(cls: type[Resource]) -> CRDOptions | None:
    opts = getattr(cls, "crd_options", None)
    if opts is not None and not isinstance(opts, CRDOptions):
        raise CRDError(
            f"{cls.__name__}.crd_options is a {type(opts).__name__}: set it to "
            "mcruntime.crd.CRDOptions(...)"
        )
    return opts


def _gvk(cls: Any) -> GroupVersionKind:
    if not (isinstance(cls, type) and issubclass(cls, Resource)):
        raise CRDError(f"{cls!r} is not a mcruntime.client.Resource class")
    try:
        gvk = cls.gvk()
    except ValueError as exc:
        raise CRDError(str(exc)) from None
    if not _DNS_LABEL.match(gvk.version):
        raise CRDError(
            f"{cls.__name__}: version {gvk.version!r} of api_version {cls.api_version!r} must be "
            "a lower-case DNS label such as v1 or v1beta1"
        )
    if "." not in gvk.group:
        raise CRDError(
            f"{cls.__name__}: api_version {cls.api_version!r}: a custom resource needs a group "
            "that is a domain name with at least one dot, e.g. 'example.com/v1'"
        )
    return gvk


def _names(cls: type[Resource], opts: CRDOptions) -> dict[str, Any]:
    kind = cls.kind
    names: dict[str, Any] = {
        "kind": kind,
        "listKind": f"{kind}List",
        "plural": opts.plural or plural_of(kind),
        "singular": opts.singular or kind.lower(),
    }
    for key in ("plural", "singular"):
        if not _DNS_LABEL.match(names[key]):
            raise CRDError(f"{cls.__name__}: {key} {names[key]!r} must be a lower-case DNS label")
    for key, values in (("short name", opts.short_names), ("category", opts.categories)):
        for value in values:
            if not isinstance(value, str) or not _DNS_LABEL.match(value):
                raise CRDError(f"{cls.__name__}: {key} {value!r} must be a lower-case DNS label")
    if opts.scope not in ("Namespaced", "Cluster"):
        raise CRDError(f"{cls.__name__}: scope {opts.scope!r} must be 'Namespaced' or 'Cluster'")
    if opts.short_names:
        names["shortNames"] = list(opts.short_names)
    if opts.categories:
        names["categories"] = list(opts.categories)
    return names


def _at(schema: dict[str, Any], path: str) -> dict[str, Any] | None:
    """The schema node a simple JSONPath (``.status.phase``) names; None if unknown."""
    node: dict[str, Any] | None = schema
    for part in path.lstrip(".").split("."):
        props = (node or {}).get("properties") or {}
        node = props.get(part)
        if node is None:
            return None
    return node


#: a JSONPath's steps: ``.name``, or a bracket (an index, ``*``, a filter)
_STEP = re.compile(r"\.([A-Za-z_][A-Za-z0-9_-]*)|\[[^\]]*\]")


def _check_path(where: str, path: str, schema: dict[str, Any]) -> None:
    """Refuse a JSONPath that names a field by its Python name (``.status.ready_replicas``)
    where the schema has it by its wire name (``readyReplicas``): the API server takes the
    path, and ``kubectl get`` shows an empty column, ``kubectl scale`` changes nothing. (A
    path naming no field at all is left alone: it may name what the schema keeps unknown.)"""
    node: Any = schema
    for step in _STEP.finditer(path):
        if not isinstance(node, dict):
            return
        name = step.group(1)
        if name is None:  # [0], [*], [?(@.type=="Ready")]: into the items
            node = node.get("items")
            continue
        props = node.get("properties")
        if not isinstance(props, dict) or name not in props:
            wire = to_camel(name)
            if isinstance(props, dict) and wire != name and wire in props:
                fixed = path[: step.start()] + "." + wire + path[step.end() :]
                raise CRDError(
                    f"{where}: {path!r} names the field {name!r} by its Python name: paths name "
                    f"fields as the API does, {fixed!r}"
                )
            return
        node = props[name]


def _column(cls: type[Resource], column: Any, schema: dict[str, Any]) -> dict[str, Any]:
    where = f"{cls.__name__}: printer column {getattr(column, 'name', column)!r}"
    if not column.json_path.startswith("."):
        raise CRDError(f"{where}: json_path {column.json_path!r} must start with '.'")
    _check_path(f"{where}: json_path", column.json_path, schema)
    col_type = column.type
    node = _at(schema, column.json_path) if _SIMPLE_PATH.match(column.json_path) else None
    if col_type is None and column.json_path in _METADATA_COLUMNS:
        col_type = _METADATA_COLUMNS[column.json_path]
    elif col_type is None:
        t = (node or {}).get("type")
        fmt = (node or {}).get("format", "")
        col_type = "date" if t == "string" and fmt in ("date-time", "date") else t
        col_type = col_type if col_type in _COLUMN_TYPES else "string"
    elif col_type not in _COLUMN_TYPES:
        raise CRDError(
            f"{where}: type {col_type!r} is not one of {', '.join(sorted(_COLUMN_TYPES))}"
        )
    out: dict[str, Any] = {"name": column.name, "type": col_type, "jsonPath": column.json_path}
    if column.description:
        out["description"] = column.description
    if column.format:
        out["format"] = column.format
    if column.priority:
        out["priority"] = column.priority
    return out


def _version(cls: type[Resource], opts: CRDOptions, storage: bool) -> dict[str, Any]:
    schema = openapi_schema(cls)
    version: dict[str, Any] = {
        "name": cls.gvk().version,
        "served": opts.served,
        "storage": storage,
    }
    if opts.deprecated or opts.deprecation_warning:
        version["deprecated"] = True
        if opts.deprecation_warning:
            version["deprecationWarning"] = opts.deprecation_warning
    subresources: dict[str, Any] = {}
    status = opts.status_subresource
    if status is None:
        status = "status" in schema["properties"]
    if status:
        subresources["status"] = {}
    if opts.scale is not None:
        scale = opts.scale
        for what, path, under in (
            ("spec_replicas_path", scale.spec_replicas_path, ".spec."),
            ("status_replicas_path", scale.status_replicas_path, ".status."),
        ):
            if not path.startswith(under):
                raise CRDError(f"{cls.__name__}: Scale({what}={path!r}) must be under {under}")
        for what, path in (
            ("spec_replicas_path", scale.spec_replicas_path),
            ("status_replicas_path", scale.status_replicas_path),
            ("label_selector_path", scale.label_selector_path or ""),
        ):
            _check_path(f"{cls.__name__}: Scale({what}=...)", path, schema)
        sub = {
            "specReplicasPath": scale.spec_replicas_path,
            "statusReplicasPath": scale.status_replicas_path,
        }
        if scale.label_selector_path:
            sub["labelSelectorPath"] = scale.label_selector_path
        subresources["scale"] = sub
    if subresources:
        version["subresources"] = subresources
    if opts.printer_columns:
        version["additionalPrinterColumns"] = [
            _column(cls, c, schema) for c in opts.printer_columns
        ]
    if opts.selectable_fields:
        for path in opts.selectable_fields:
            _check_path(f"{cls.__name__}: selectable field", path, schema)
        version["selectableFields"] = [{"jsonPath": p} for p in opts.selectable_fields]
    version["schema"] = {"openAPIV3Schema": schema}
    return version


def _check_defaults(model: type[BaseModel], where: str, seen: set[type]) -> None:
    """Refuse a field whose default its own type refuses (``Field(10, le=3)``, a
    ``Literal`` default not among its values): pydantic does not check defaults, and the
    API server refuses a CRD whose default breaks its schema."""
    if model in seen:
        return
    seen.add(model)
    for name, info in model.model_fields.items():
        at = f"{where}.{info.alias or name}"
        default = info.get_default(call_default_factory=True)
        if not info.is_required() and default is not None:
            kind: Any = info.annotation
            if info.metadata:
                kind = Annotated[(kind, *info.metadata)]
            try:
                TypeAdapter(kind).validate_python(default)
            except ValidationError as exc:
                problem = "; ".join(e["msg"] for e in exc.errors())
                raise CRDError(
                    f"{at}: its default {default!r} does not fit its own type ({problem}); "
                    "the API server would refuse the CRD"
                ) from None
        for sub in _models_in(info.annotation):
            _check_defaults(sub, f"{where}.{info.alias or name}", seen)


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation names, at any depth (``list[Port] | None``)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]


def generate_crd(*resource_classes: type[Resource]) -> dict[str, Any]:
    """The CustomResourceDefinition of one kind, a version per class.

    Every class must have the same group and kind (``api_version`` and
    ``kind``) and a different version; with several classes exactly one is the
    storage version: the one with `CRDOptions(storage=True)`, else the only one
    without `storage=False`. Settings come from each
    class's ``crd_options`` ([`CRDOptions`][mcruntime.crd.CRDOptions]; defaults
    when it has none). Raises [`CRDError`][mcruntime.crd.CRDError] naming the
    class and field when the classes cannot make a valid CRD.
    """
    if not resource_classes:
        raise CRDError("generate_crd needs at least one Resource class")
    gvks = [_gvk(cls) for cls in resource_classes]
    group_kinds = {(g.group, g.kind) for g in gvks}
    if len(group_kinds) > 1:
        shown = ", ".join(
            f"{c.__name__} ({g.group}/{g.kind})"
            for c, g in zip(resource_classes, gvks, strict=True)
        )
        raise CRDError(f"one CRD serves one group and kind; got {shown} (use generate_crds)")
    seen: dict[str, type[Resource]] = {}
    for cls, gvk in zip(resource_classes, gvks, strict=True):
        if gvk.version in seen:
            raise CRDError(
                f"{seen[gvk.version].__name__} and {cls.__name__} both declare version "
                f"{gvk.version} of {gvk.kind}"
            )
        seen[gvk.version] = cls
    declared = [(cls, _options(cls)) for cls in resource_classes]
    opts = {cls: o or CRDOptions() for cls, o in declared}
    for cls in resource_classes:
        _check_defaults(cls, cls.__name__, set())

    # storage version: the one marked storage=True, else the only one not marked False
    storage = [cls for cls in resource_classes if opts[cls].storage]
    if not storage:
        storage = [cls for cls in resource_classes if opts[cls].storage is None]
    if len(storage) != 1:
        kind = gvks[0].kind
        if len(resource_classes) == 1:
            raise CRDError(
                f"{resource_classes[0].__name__}: the only version of {kind} must be its "
                "storage version (storage=False)"
            )
        versions = ", ".join(f"{c.__name__} ({c.gvk().version})" for c in resource_classes)
        raise CRDError(
            f"{kind} has versions {versions} and needs exactly one storage version, got "
            f"{', '.join(c.__name__ for c in storage) or 'none'}: set CRDOptions(storage=True) "
            "on one class (or storage=False on all others)"
        )

    # CRD-wide settings: equal among the classes that declare options
    wide: dict[tuple[Any, ...], list[str]] = {}
    for cls, o in declared:
        if o is not None:
            key = (o.scope, repr(sorted(_names(cls, o).items())))
            wide.setdefault(key, []).append(cls.__name__)
    if len(wide) > 1:
        shown = "; ".join(", ".join(names) for names in wide.values())
        raise CRDError(
            f"the classes of {gvks[0].kind} disagree on scope, plural, singular, short names or "
            f"categories ({shown}): set them alike"
        )
    base = next((o for _, o in declared if o is not None), CRDOptions())
    names = _names(resource_classes[0], base)
    group = gvks[0].group
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{names['plural']}.{group}"},
        "spec": {
            "group": group,
            "names": names,
            "scope": base.scope,
            "versions": [_version(cls, opts[cls], cls in storage) for cls in resource_classes],
        },
    }


def generate_crds(*resource_classes: type[Resource]) -> list[dict[str, Any]]:
    """One CRD per group and kind of ``resource_classes`` (see [`generate_crd`][mcruntime.crd.generate_crd])."""
    by_kind: dict[tuple[str, str], list[type[Resource]]] = {}
    for cls in resource_classes:
        gvk = _gvk(cls)
        by_kind.setdefault((gvk.group, gvk.kind), []).append(cls)
    return [generate_crd(*classes) for classes in by_kind.values()]


def load_resource_classes(targets: Iterable[str]) -> list[type[Resource]]:
    """Import ``module:Class`` (or ``module``: every Resource class it defines with a kind).

    Raises [`CRDError`][mcruntime.crd.CRDError] naming the target that cannot
    be imported or is not a Resource class.
    """
    found: list[type[Resource]] = []
    for target in targets:
        module_name, sep, attr = target.partition(":")
        if not module_name or (sep and not attr):
            raise CRDError(f"{target!r}: expected module:Class or module")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise CRDError(f"{target!r}: cannot import module {module_name!r}: {exc}") from exc
        if sep:
            obj: Any = module
            for part in attr.split("."):
                obj = getattr(obj, part, None)
                if obj is None:
                    raise CRDError(f"{target!r}: module {module_name!r} has no {attr!r}")
            if not (isinstance(obj, type) and issubclass(obj, Resource)):
                raise CRDError(f"{target!r} is not a mcruntime.client.Resource class")
            found.append(obj)
            continue
        classes = [
            obj
            for obj in vars(module).values()
            if isinstance(obj, type)
            and issubclass(obj, Resource)
            and obj.__module__ == module.__name__
            and obj.api_version
            and obj.kind
        ]
        if not classes:
            raise CRDError(
                f"module {module_name!r} defines no Resource class with api_version and kind"
            )
        found.extend(classes)
    return list(dict.fromkeys(found))
