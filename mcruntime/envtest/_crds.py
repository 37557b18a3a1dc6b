"""The CRD controllers: validation of a CustomResourceDefinition, its status, what it serves."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from mcruntime import _json
from mcruntime.envtest import _cel, _cel_rules
from mcruntime.envtest._gofmt import go_string, go_strings
from mcruntime.envtest._names import name_problems, now
from mcruntime.envtest._registry import (
    BASE_FIELDS,
    CLUSTER_FIELDS,
    ServedResource,
    version_priority,
)
from mcruntime.envtest._schema import check_schema, declares_default, default_errors
from mcruntime.envtest._status import Causes, StatusError
from mcruntime.envtest._storage import ResKey

__all__ = [
    "CRDS",
    "CRD_CLEANUP_FINALIZER",
    "check_stored_versions",
    "validate_crd",
    "crd_status",
    "established",
    "name_status",
    "crd_resources",
    "set_crd_condition",
]

CRDS: ResKey = ("apiextensions.k8s.io", "customresourcedefinitions")
#: what kube-apiserver adds to a CRD being deleted: it holds the CRD until its custom
#: resources are gone
CRD_CLEANUP_FINALIZER = "customresourcecleanup.apiextensions.k8s.io"


def validate_crd(crd: dict[str, Any], old: dict[str, Any] | None = None) -> dict[str, Any]:
    """The spec of a valid CRD, with defaults filled in; 422 Invalid otherwise. ``old``: the
    CRD an update replaces, whose names and scope the update may not change (see
    `_immutable_errors`); its name is not checked against them again, as kube-apiserver
    checks that only at creation."""
    name = crd["metadata"]["name"]
    kind, group = "CustomResourceDefinition", "apiextensions.k8s.io"

    def invalid(field: str, why: str) -> StatusError:
        return StatusError.invalid(kind, name, group, field, why)

    spec = crd.get("spec")
    if not isinstance(spec, dict):
        raise invalid("spec", "Required value")
    crd_group = spec.get("group")
    names = spec.get("names")
    if not isinstance(crd_group, str) or not crd_group:
        raise invalid("spec.group", "Required value")
    if not isinstance(names, dict) or not all(
        isinstance(names.get(k), str) and names[k] for k in ("plural", "kind")
    ):
        raise invalid("spec.names", "Required value: plural and kind are required")
    if old is None and name != f"{names['plural']}.{crd_group}":
        raise invalid(
            "metadata.name",
            f'Invalid value: "{name}": must be spec.names.plural+"."+spec.group',
        )
    if spec.get("scope") not in ("Namespaced", "Cluster"):
        raise invalid(
            "spec.scope",
            f'Unsupported value: "{spec.get("scope")}": supported values: "Cluster", "Namespaced"',
        )
    versions = spec.get("versions")
    if not isinstance(versions, list) or not versions:
        raise invalid(
            "spec.versions",
            "Required value: must have exactly one version marked as storage version",
        )
    # every fault below, in one refusal, as kube-apiserver aggregates them
    causes = Causes()
    for i, v in enumerate(versions):
        # v1 requires every version's schema (ValidateCustomResourceDefinitionSpec)
        if isinstance(v, dict) and not ((v.get("schema") or {}).get("openAPIV3Schema")):
            causes.required(f"spec.versions[{i}].schema.openAPIV3Schema", "schemas are required")
    for i, v in enumerate(versions):
        field = f"spec.versions[{i}]"
        if not isinstance(v, dict) or not isinstance(v.get("name"), str) or not v["name"]:
            raise invalid(f"{field}.name", "Required value: every version needs a name")
        if not isinstance(v.get("subresources") or {}, dict):
            raise invalid(f"{field}.subresources", "Invalid value: must be an object")
        if not isinstance(v.get("selectableFields") or [], list):
            raise invalid(f"{field}.selectableFields", "Invalid value: must be a list")
        _version_head_errors(v, field, causes)
        schema = v.get("schema")
        if schema is not None:
            if not isinstance(schema, dict):
                raise invalid(f"{field}.schema", "Invalid value: must be an object")
            if schema.get("openAPIV3Schema") is not None:
                root = schema["openAPIV3Schema"]
                at = f"{field}.schema.openAPIV3Schema"
                why = check_schema(root)
                if why:
                    where, _, detail = why.partition(": ")
                    raise invalid(f"{field}.schema.{where}", detail)
                # a structural schema's defaults are validated only once it is one
                defaults = not _metadata_errors(root, at, causes)
                refused = default_errors(root, at) if defaults else []
                causes.items += refused
                _check_rules(crd, root, at)
                if defaults:  # its rules compile: the defaults are validated with them too
                    causes.items += _cel_rules.default_rule_errors(
                        root, at, [field for _, field, _ in refused]
                    )
                _schema_errors(root, at, causes)
        _version_tail_errors(v, field, causes)
    _names_errors(names, causes)
    if old is not None:
        _immutable_errors(spec, old, causes)
    causes.raise_if_any(kind, name, group)
    for field in ("shortNames", "categories"):
        value = names.get(field)
        if value is not None and not (
            isinstance(value, list) and all(isinstance(x, str) for x in value)
        ):
            raise invalid(f"spec.names.{field}", "Invalid value: must be a list of strings")
    if sum(1 for v in versions if v.get("storage")) != 1:
        raise invalid(
            "spec.versions",
            "Invalid value: must have exactly one version marked as storage version",
        )
    _check_conversion(kind, name, group, spec.get("conversion"))
    names = {**names}
    names.setdefault("singular", names["kind"].lower())
    names.setdefault("listKind", names["kind"] + "List")
    return {
        **spec,
        "names": names,
        "conversion": spec.get("conversion") or {"strategy": "None"},
    }


def _immutable_errors(spec: dict[str, Any], old: dict[str, Any], causes: Causes) -> None:
    """What an update may not change, as kube-apiserver's
    ``validateCustomResourceDefinitionSpecUpdate`` refuses it: the scope and the kind once the
    old CRD is Established (its objects are stored under them), the group and the plural
    ever (they make its name)."""
    old_spec = old.get("spec") or {}
    old_names = old_spec.get("names") or {}
    names = spec.get("names") or {}
    fields: list[tuple[str, Any, Any]] = []
    if established(old):
        fields += [
            ("spec.scope", spec.get("scope"), old_spec.get("scope")),
            ("spec.names.kind", names.get("kind"), old_names.get("kind")),
        ]
    fields += [
        ("spec.group", spec.get("group"), old_spec.get("group")),
        ("spec.names.plural", names.get("plural"), old_names.get("plural")),
    ]
    for field, value, was in fields:
        if value != was:
            causes.invalid(field, go_string(value), "field is immutable")


#: apiextensions' ``printerColumnDatatypes`` and ``customResourceColumnDefinitionFormats``
_COLUMN_TYPES = ("boolean", "date", "integer", "number", "string")
_COLUMN_FORMATS = ("byte", "date", "date-time", "double", "float", "int32", "int64", "password")
_SET_ITEM = "must be atomic as item of a list with x-kubernetes-list-type=set"


def _show_pointer(value: Any) -> str:
    """A ``*string`` bad value as kube 1.31's field errors show it: quoted, ``"null"`` if nil."""
    return go_string("null" if value is None else value)


def _schema_errors(schema: Any, path: str, causes: Causes, root: bool = False) -> None:
    """What apiextensions' ``ValidateCustomResourceDefinitionOpenAPISchema`` refuses of
    ``schema`` beyond `check_schema`'s structural rules: ``uniqueItems: true``,
    ``x-kubernetes-preserve-unknown-fields: false``, ``x-kubernetes-map-type`` off an object
    or of an unknown value, ``x-kubernetes-list-type`` off an array or of an unknown value,
    list-map keys without the ``map`` list type, a ``set`` list of items not atomic, a
    ``map`` list key neither required nor defaulted (or nullable). Its subschemas first, as
    upstream recurses before the checks of the node."""
    if not isinstance(schema, dict):
        return
    _standard_errors(schema, path, causes)
    if schema.get("uniqueItems") is True:
        causes.forbidden(
            f"{path}.uniqueItems",
            "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
        )
    props = schema.get("properties")
    if isinstance(props, dict):
        for key, sub in props.items():
            if not (root and key == "metadata"):  # `_metadata_errors`
                _schema_errors(sub, f"{path}.properties[{key}]", causes)
    additional = schema.get("additionalProperties")
    if isinstance(additional, dict):
        _schema_errors(additional, f"{path}.additionalProperties", causes)
    items = schema.get("items")
    if isinstance(items, dict):
        _schema_errors(items, f"{path}.items", causes)
    if schema.get("x-kubernetes-preserve-unknown-fields") is False:
        causes.invalid(
            f"{path}.x-kubernetes-preserve-unknown-fields", "false", "must be true or undefined"
        )
    kind = schema.get("type") or ""
    map_type = schema.get("x-kubernetes-map-type")
    if map_type is not None and kind != "object":
        _wrong_type(kind, "object", "x-kubernetes-map-type", path, causes)
    if map_type is not None and map_type not in ("atomic", "granular"):
        causes.not_supported(f"{path}.x-kubernetes-map-type", map_type, ("atomic", "granular"))
    list_type = schema.get("x-kubernetes-list-type")
    if list_type is not None and kind != "array":
        _wrong_type(kind, "array", "x-kubernetes-list-type", path, causes)
    elif list_type == "set" and isinstance(items, dict):
        item_list = items.get("x-kubernetes-list-type")
        if items.get("type") == "array" and item_list is not None and item_list != "atomic":
            causes.invalid(
                f"{path}.items.x-kubernetes-list-type", _show_pointer(item_list), _SET_ITEM
            )
        elif items.get("type") == "object" and items.get("x-kubernetes-map-type") != "atomic":
            # upstream shows the items' list type here, nil for an object
            causes.invalid(
                f"{path}.items.x-kubernetes-map-type", _show_pointer(item_list), _SET_ITEM
            )
    if list_type is not None and list_type not in ("atomic", "set", "map"):
        causes.not_supported(f"{path}.x-kubernetes-list-type", list_type, ("atomic", "set", "map"))
    if schema.get("x-kubernetes-list-map-keys"):
        why = "must be map if x-kubernetes-list-map-keys is non-empty"
        if list_type is None:
            causes.required(f"{path}.x-kubernetes-list-type", why)
        elif list_type != "map":
            causes.invalid(f"{path}.x-kubernetes-list-type", go_string(list_type), why)
    if list_type in ("set", "map") and isinstance(items, dict):
        _list_items_errors(schema, items, list_type, path, causes)


#: apiextensions' ``openapiV3Types``
_TYPES = ("array", "boolean", "integer", "number", "object", "string")
#: the keywords a CRD's schema may not use (``specStandardValidatorV3``), by their words
_UNSUPPORTED = (
    ("id", "id is not supported"),
    ("additionalItems", "additionalItems is not supported"),
    ("patternProperties", "patternProperties is not supported"),
    ("definitions", "definitions is not supported"),
    ("dependencies", "dependencies is not supported"),
    ("$ref", "$ref is not supported"),
)


def _standard_errors(schema: dict[str, Any], path: str, causes: Causes) -> None:
    """apiextensions' ``specStandardValidatorV3.validate`` of one schema node: a known
    ``type``, none of the keywords structural schemas do without."""
    kind = schema.get("type")
    if isinstance(kind, str) and kind and kind not in _TYPES:
        causes.not_supported(f"{path}.type", kind, _TYPES)
    for keyword, why in _UNSUPPORTED:
        if schema.get(keyword):
            causes.forbidden(f"{path}.{keyword}", why)
    if kind == "null":
        causes.forbidden(
            f"{path}.type", "type cannot be set to null, use nullable as an alternative"
        )


def _wrong_type(kind: str, want: str, extension: str, path: str, causes: Causes) -> None:
    why = f"must be {want} if {extension} is specified"
    if kind:
        causes.invalid(f"{path}.type", go_string(kind), why)
    else:
        causes.required(f"{path}.type", why)


def _list_items_errors(
    schema: dict[str, Any], items: dict[str, Any], list_type: str, path: str, causes: Causes
) -> None:
    """apiextensions' ``validateMapListKeysMapSet``: a set's or a map's items not nullable, a
    map's keys required or defaulted, not nullable."""
    if items.get("nullable") is True:
        causes.forbidden(
            f"{path}.items.nullable",
            f"cannot be nullable when x-kubernetes-list-type is {list_type}",
        )
    props = items.get("properties")
    if list_type != "map" or not isinstance(props, dict):
        return
    keys = schema.get("x-kubernetes-list-map-keys") or []
    for key in keys:  # apiextensions' ValidateCustomResourceDefinitionOpenAPISchema
        if key not in props:
            causes.invalid(
                f"{path}.x-kubernetes-list-map-keys",
                go_strings(keys),
                "entries must all be names of item properties",
            )
    required = set(items.get("required") or ())
    for key in schema.get("x-kubernetes-list-map-keys") or ():
        prop = props.get(key)
        if not isinstance(prop, dict):
            continue
        at = f"{path}.items.properties[{key}]"
        if key not in required and prop.get("default") is None:
            causes.required(
                f"{at}.default",
                "this property is in x-kubernetes-list-map-keys, so it must have a default or "
                "be a required property",
            )
        if prop.get("nullable") is True:
            causes.forbidden(
                f"{at}.nullable",
                "this property is in x-kubernetes-list-map-keys, so it cannot be nullable",
            )


def _simple_path(path: str, at: str, causes: Causes) -> bool:
    """apiextensions' ``validateSimpleJSONPath``: whether ``path`` is one (else why, in causes)."""
    if not path:
        causes.invalid(at, go_string(path), "must not be empty")
    elif path[0] != ".":
        causes.invalid(at, go_string(path), "must be a simple json path starting with .")
    else:
        return True
    return False


def _scale_errors(scale: Any, at: str, causes: Causes) -> None:
    """apiextensions' ``ValidateCustomResourceDefinitionSubresources`` of a scale subresource."""
    if not isinstance(scale, dict):
        return
    for field, under in (("specReplicasPath", ".spec"), ("statusReplicasPath", ".status")):
        path = scale.get(field)
        where = f"{at}.scale.{field}"
        if not isinstance(path, str) or not path:
            causes.required(where)
        elif _simple_path(path, where, causes) and not path.startswith(under + "."):
            causes.invalid(where, go_string(path), f"should be a json path under {under}")
    selector = scale.get("labelSelectorPath")
    if isinstance(selector, str) and selector:
        where = f"{at}.scale.labelSelectorPath"
        if _simple_path(selector, where, causes) and not selector.startswith(
            (".spec.", ".status.")
        ):
            causes.invalid(
                where, go_string(selector), "should be a json path under either .spec or .status"
            )


def _column_errors(column: dict[str, Any], at: str, causes: Causes) -> None:
    """apiextensions' ``ValidateCustomResourceColumnDefinition``. The paths name the fields
    of the internal type (``JSONPath``), as kube-apiserver's do."""
    if not column.get("name"):
        causes.required(f"{at}.name")
    kind = column.get("type")
    types = "must be one of " + ",".join(_COLUMN_TYPES)
    if not kind:
        causes.required(f"{at}.type", types)
    elif kind not in _COLUMN_TYPES:
        causes.invalid(f"{at}.type", go_string(kind), types)
    fmt = column.get("format")
    if fmt and fmt not in _COLUMN_FORMATS:
        causes.invalid(
            f"{at}.format", go_string(fmt), "must be one of " + ",".join(_COLUMN_FORMATS)
        )
    path = column.get("jsonPath")
    if not path:
        causes.required(f"{at}.JSONPath")
    else:
        _simple_path(str(path), f"{at}.JSONPath", causes)


def _names_errors(names: dict[str, Any], causes: Causes) -> None:
    """apiextensions' ``ValidateCustomResourceDefinitionNames`` of ``spec.names`` as defaulted
    (a singular of the lower-cased kind, a list kind of the kind and ``List``): each a
    DNS-1035 label (kinds in any case), the kind not the list kind."""
    at = "spec.names"
    kind = str(names["kind"])
    singular = names.get("singular") or kind.lower()
    list_kind = names.get("listKind") or kind + "List"
    for field, value in (("plural", names["plural"]), ("singular", singular)):
        if isinstance(value, str) and (problems := name_problems(value, "dns1035")):
            causes.invalid(f"{at}.{field}", go_string(value), ",".join(problems))
    for field, value in (("kind", kind), ("listKind", list_kind)):
        if isinstance(value, str) and (problems := name_problems(value.lower(), "dns1035")):
            why = "may have mixed case, but should otherwise match: " + ",".join(problems)
            causes.invalid(f"{at}.{field}", go_string(value), why)
    short = names.get("shortNames")
    for i, value in enumerate(short if isinstance(short, list) else ()):
        if isinstance(value, str) and (problems := name_problems(value, "dns1035")):
            causes.invalid(f"{at}.shortNames[{i}]", go_string(value), ",".join(problems))
    if list_kind == kind:
        causes.invalid(
            f"{at}.listKind", go_string(list_kind), "kind and listKind may not be the same"
        )
    categories = names.get("categories")
    for i, value in enumerate(categories if isinstance(categories, list) else ()):
        if isinstance(value, str) and (problems := name_problems(value, "dns1035")):
            causes.invalid(f"{at}.categories[{i}]", go_string(value), ",".join(problems))


def _version_head_errors(version: dict[str, Any], at: str, causes: Causes) -> None:
    """What ``ValidateCustomResourceDefinitionSpec`` refuses of one of ``spec.versions``
    before its schema: a name not a DNS-1035 label, a ``deprecationWarning`` of a version
    not deprecated."""
    problems = name_problems(version["name"], "dns1035")
    if problems:
        causes.invalid(f"{at}.name", go_string(version["name"]), ",".join(problems))
    warning = version.get("deprecationWarning")
    if warning is not None and not version.get("deprecated"):
        causes.invalid(
            f"{at}.deprecationWarning",
            go_string(warning),
            "can only be set for deprecated versions",
        )


def _version_tail_errors(version: dict[str, Any], at: str, causes: Causes) -> None:
    """... and after it: a scale subresource's paths, the printer columns."""
    subresources = version.get("subresources") or {}
    _scale_errors(subresources.get("scale"), f"{at}.subresources", causes)
    for i, column in enumerate(version.get("additionalPrinterColumns") or ()):
        if isinstance(column, dict):
            _column_errors(column, f"{at}.additionalPrinterColumns[{i}]", causes)
    schema = (version.get("schema") or {}).get("openAPIV3Schema")
    fields = version.get("selectableFields") or ()
    if isinstance(schema, dict):
        _selectable_errors(fields, schema, f"{at}.selectableFields", causes)


def _field_schema(path: str, schema: dict[str, Any]) -> tuple[list[str], Any]:
    """apiextensions' ``cel.ValidFieldPath`` without array notation: the field names of
    ``path`` and their schema; ValueError (its words) if it names no field."""
    names: list[str] = []
    for token in re.findall(r"[.\[\]]|[^.\[\]]+", path):
        if token == "[":
            raise ValueError("array notation is not allowed")
        if token == ".":
            continue
        if not names and not path.startswith("."):
            raise ValueError(f"expected [ or . but got: {token}")
        props = schema.get("properties") if isinstance(schema, dict) else None
        additional = schema.get("additionalProperties") if isinstance(schema, dict) else None
        if isinstance(props, dict):
            if token not in props:
                raise ValueError("does not refer to a valid field")
            schema = props[token]
        elif isinstance(additional, dict):
            schema = additional
        else:
            raise ValueError("does not refer to a valid field")
        names.append(token)
    if path.endswith(".") or not names:
        raise ValueError("unexpected end of JSON path")
    return names, schema


def _selectable_errors(fields: Any, schema: dict[str, Any], at: str, causes: Causes) -> None:
    """apiextensions' ``ValidateCustomResourceSelectableFields``: each path a field of the
    schema (no array notation), not in metadata, a string, boolean or integer, not twice."""
    seen: set[tuple[str, ...]] = set()
    for i, selectable in enumerate(fields if isinstance(fields, list) else ()):
        where = f"{at}[{i}].jsonPath"
        path = selectable.get("jsonPath") if isinstance(selectable, dict) else None
        if not isinstance(path, str) or not path:
            causes.required(where)
            continue
        try:
            names, found = _field_schema(path, schema)
        except ValueError as e:
            causes.invalid(where, go_string(path), f"is an invalid path: {e}")
            continue
        if names[0] == "metadata":
            causes.invalid(where, go_string(path), "must not point to fields in metadata")
        if not isinstance(found, dict) or found.get("type") not in ("string", "boolean", "integer"):
            causes.invalid(
                where,
                go_string(path),
                "must point to a field of type string, boolean or integer. Enum string fields "
                "and strings with formats are allowed.",
            )
        if tuple(names) in seen:
            causes.add("FieldValueDuplicate", where, f"Duplicate value: {go_string(path)}")
        seen.add(tuple(names))
    if len(seen) > 8:  # MaxSelectableFields
        causes.add("FieldValueTooMany", at, f"Too many: {len(seen)}: must have at most 8 items")


def _metadata_errors(schema: dict[str, Any], at: str, causes: Causes) -> bool:
    """The structural-schema rule on the root's ``metadata`` (``validateStructuralMetadataInvariants``):
    it may restrict ``name`` and ``generateName`` only. Whether it was broken."""
    meta = (schema.get("properties") or {}).get("metadata")
    inner = meta.get("properties") if isinstance(meta, dict) else None
    if isinstance(inner, dict) and set(inner) - {"name", "generateName"}:
        causes.forbidden(
            f"{at}.properties[metadata]",
            "must not specify anything other than name and generateName, but metadata is "
            "implicitly specified",
        )
        return True
    return False


def _check_conversion(kind: str, name: str, group: str, conversion: Any) -> None:
    """Refuse (422) a conversion kube-apiserver's ``validateCustomResourceConversion`` refuses:
    ``Webhook`` without a webhook or its ``conversionReviewVersions``, a webhook URL that is
    not ``https``, a webhook given with another strategy. Paths are those of the internal
    type kube-apiserver validates (``spec.conversion.webhookClientConfig``)."""
    if conversion is None:
        return
    at = "spec.conversion"
    if not isinstance(conversion, dict):
        raise StatusError.invalid(kind, name, group, at, "Invalid value: must be an object")
    causes = Causes()
    strategy = conversion.get("strategy")
    webhook = conversion.get("webhook")
    webhook = webhook if isinstance(webhook, dict) else {}
    client_config = webhook.get("clientConfig")
    versions = webhook.get("conversionReviewVersions")
    if strategy not in ("None", "Webhook"):
        causes.not_supported(f"{at}.strategy", strategy or "", ("None", "Webhook"))
    elif strategy == "Webhook":
        config = f"{at}.webhookClientConfig"
        if not isinstance(client_config, dict):
            causes.required(config, "required when strategy is set to Webhook")
        elif bool(client_config.get("url")) == bool(client_config.get("service")):
            causes.required(config, "exactly one of url or service is required")
        elif client_config.get("url"):
            scheme = str(client_config["url"]).partition("://")[0]
            if scheme != "https":
                causes.invalid(
                    f"{config}.url",
                    go_string(scheme),
                    "'https' is the only allowed URL scheme; desired format: https://host[/path]",
                )
        if not versions:
            causes.required(f"{at}.conversionReviewVersions")
        elif not isinstance(versions, list) or not {"v1", "v1beta1"} & set(versions):
            causes.invalid(
                f"{at}.conversionReviewVersions",
                _json.dumps(versions).decode(),  # Go's field errors show a list as JSON
                "must include at least one of v1, v1beta1",
            )
    else:
        forbidden = "should not be set when strategy is not set to Webhook"
        if client_config is not None:
            causes.forbidden(f"{at}.webhookClientConfig", forbidden)
        if versions:
            causes.forbidden(f"{at}.conversionReviewVersions", forbidden)
    causes.raise_if_any(kind, name, group)


def check_stored_versions(crd: dict[str, Any]) -> None:
    """Refuse (422) an update whose ``spec.versions`` lost a version of
    ``status.storedVersions``, as kube-apiserver's
    ``ValidateCustomResourceDefinitionStoredVersions`` does: objects may still be stored in
    it until a storage migration drops it from ``status.storedVersions``."""
    declared = {v.get("name") for v in crd["spec"].get("versions") or ()}
    stored = (crd.get("status") or {}).get("storedVersions") or []
    causes = Causes()
    for i, v in enumerate(stored):
        if v not in declared:
            causes.invalid(
                f"status.storedVersions[{i}]",
                f'"{v}"',
                f"missing from spec.versions; {v} was previously a storage version, and must "
                f"remain in spec.versions until a storage migration ensures no data remains "
                f"persisted in {v} and removes {v} from status.storedVersions",
            )
    causes.raise_if_any("CustomResourceDefinition", crd["metadata"]["name"], "apiextensions.k8s.io")


def _check_rules(crd: dict[str, Any], schema: dict[str, Any], path: str) -> None:
    """Refuse (422) a CRD whose CEL rules at ``path`` do not compile; without the CEL
    library, accept them unchecked (and log that once)."""
    if not _cel_rules.has_rules(schema):
        return
    name = crd["metadata"]["name"]
    if not _cel.available():
        _cel_rules.warn_missing_library(name)
        return
    causes = _cel_rules.crd_rule_errors(schema, path)
    if causes:
        raise StatusError.invalid_causes(
            "CustomResourceDefinition", name, "apiextensions.k8s.io", causes
        )


def crd_status(
    crd: dict[str, Any], old: dict[str, Any] | None, group_crds: Iterable[dict[str, Any]] = ()
) -> dict[str, Any]:
    """The status of an accepted CRD: its stored versions, and the names it is given and
    its ``NamesAccepted`` and ``Established`` conditions (`name_status`) among
    ``group_crds``, the other CRDs of its group (``old``: its status before an update)."""
    spec = crd["spec"]
    storage = next(v["name"] for v in spec["versions"] if v.get("storage"))
    stored = list((old or {}).get("storedVersions") or [])
    if storage not in stored:
        stored.append(storage)
    return {**(old or {}), **name_status(crd, old, group_crds), "storedVersions": stored}


def established(crd: dict[str, Any]) -> bool:
    """Whether the CRD's ``Established`` condition is True (it is served)."""
    conditions = (crd.get("status") or {}).get("conditions") or ()
    return any(
        isinstance(c, dict) and c.get("type") == "Established" and c.get("status") == "True"
        for c in conditions
    )


def _in_use(requested: Any, accepted: Any, used: set[str]) -> str | None:
    """apiextensions' ``equalToAcceptedOrFresh``: why ``requested`` may not be had."""
    if requested == accepted or requested not in used:
        return None
    return f"{go_string(requested)} is already in use"


def name_status(
    crd: dict[str, Any], old: dict[str, Any] | None, group_crds: Iterable[dict[str, Any]]
) -> dict[str, Any]:
    """``acceptedNames`` and ``conditions`` of the CRD as kube-apiserver's naming controller
    (``NamingConditionController.calculateNamesAndConditions``) and establishing controller
    leave them: each of ``spec.names`` is accepted unless another CRD of the group
    (``group_crds``; itself among them is harmless) has it among its accepted names
    (plural, singular and short names one set, kind and list kind another); a conflict is
    ``NamesAccepted=False`` with the reason and message of the last name that conflicts
    (``PluralConflict``, ..., ``ListKindConflict``: ``"FooList" is already in use``), and a
    CRD never established stays so, unserved. One established keeps being so (served with
    the names it had) whatever its new names. envtest establishes a CRD whose names are all
    accepted at once."""
    requested = crd["spec"]["names"]
    before = old or {}
    accepted: dict[str, Any] = dict(before.get("acceptedNames") or {})
    resources: set[str] = set()
    kinds: set[str] = set()
    for other in group_crds:
        names = (other.get("status") or {}).get("acceptedNames") or {}
        resources.update(
            [
                str(names.get("plural") or ""),
                str(names.get("singular") or ""),
                *(str(n) for n in names.get("shortNames") or ()),
            ]
        )
        kinds.update([str(names.get("kind") or ""), str(names.get("listKind") or "")])
    conflict: tuple[str, str] | None = None
    new = dict(accepted)
    for field, reason, used in (
        ("plural", "PluralConflict", resources),
        ("singular", "SingularConflict", resources),
    ):
        why = _in_use(requested.get(field), accepted.get(field), used)
        if why:
            conflict = (reason, why)
        else:
            new[field] = requested.get(field)
    short = list(requested.get("shortNames") or ())
    if short != list(accepted.get("shortNames") or ()):
        mine = set(accepted.get("shortNames") or ())
        errors = list(
            dict.fromkeys(
                why for n in short if n not in mine and (why := _in_use(n, "", resources))
            )
        )
        if errors:
            # utilerrors.NewAggregate's words: one error as it is, more in brackets
            conflict = (
                "ShortNamesConflict",
                errors[0] if len(errors) == 1 else f"[{', '.join(errors)}]",
            )
        else:
            new["shortNames"] = short
    for field, reason in (("kind", "KindConflict"), ("listKind", "ListKindConflict")):
        why = _in_use(requested.get(field), accepted.get(field), kinds)
        if why:
            conflict = (reason, why)
        else:
            new[field] = requested.get(field)
    if requested.get("categories"):
        new["categories"] = requested["categories"]
    else:
        new.pop("categories", None)
    new.setdefault("plural", "")
    new.setdefault("kind", "")
    new = {k: v for k, v in new.items() if v or k in ("plural", "kind")}
    if conflict is None:
        names_accepted = ("True", "NoConflicts", "no conflicts found")
    else:
        names_accepted = ("False", *conflict)
    conditions = list(before.get("conditions") or ())
    if established({"status": before}):
        establishing = None
    elif conflict is None:
        establishing = ("True", "InitialNamesAccepted", "the initial names have been accepted")
    else:
        establishing = ("False", "NotAccepted", "not all names are accepted")
    conditions = set_crd_condition(conditions, "NamesAccepted", names_accepted)
    if establishing is not None:
        conditions = set_crd_condition(conditions, "Established", establishing)
    return {"conditions": conditions, "acceptedNames": new}


def set_crd_condition(conditions: list[Any], type_: str, value: tuple[str, str, str]) -> list[Any]:
    """``conditions`` with the condition ``type_`` set to (status, reason, message), as
    apiextensions' ``SetCRDCondition`` sets it: in its place, its transition time kept
    while its status stays."""
    status, reason, message = value
    out = list(conditions)
    at = next(
        (i for i, c in enumerate(out) if isinstance(c, dict) and c.get("type") == type_), None
    )
    previous = out[at] if at is not None else {}
    stamp = (
        previous.get("lastTransitionTime")
        if previous.get("status") == status and previous.get("lastTransitionTime")
        else now()
    )
    condition = {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": stamp,
    }
    if at is None:
        out.append(condition)
    else:
        out[at] = condition
    return out


def crd_resources(crd: dict[str, Any]) -> list[ServedResource]:
    """The resources (one per served version) a CRD declares."""
    spec = crd["spec"]
    names = spec["names"]
    namespaced = spec["scope"] == "Namespaced"
    schemas = {v["name"]: (v.get("schema") or {}).get("openAPIV3Schema") for v in spec["versions"]}
    read_defaults: dict[str, dict[str, Any]] = {
        version: schema
        for version, schema in schemas.items()
        if isinstance(schema, dict) and declares_default(schema)
    }
    storage = next(v["name"] for v in spec["versions"] if v.get("storage"))
    webhook = (spec.get("conversion") or {}).get("strategy") == "Webhook"
    out = []
    for v in spec["versions"]:
        if not v.get("served", True):
            continue
        subs = v.get("subresources") or {}
        # a webhook CRD's other versions are written through `_conversion` in the storage one
        stored_as = (
            None
            if webhook or v["name"] == storage
            else (f"{spec['group']}/{storage}", schemas[storage])
        )
        selectable = {
            f["jsonPath"].lstrip(".")
            for f in v.get("selectableFields") or ()
            if isinstance(f, dict) and isinstance(f.get("jsonPath"), str)
        }
        out.append(
            ServedResource(
                group=spec["group"],
                version=v["name"],
                plural=names["plural"],
                singular=names.get("singular") or names["kind"].lower(),
                kind=names["kind"],
                namespaced=namespaced,
                short_names=tuple(names.get("shortNames") or ()),
                has_status="status" in subs,
                generation=True,
                custom=True,
                fields=(BASE_FIELDS if namespaced else CLUSTER_FIELDS) | selectable,
                categories=tuple(names.get("categories") or ()),
                schema=(v.get("schema") or {}).get("openAPIV3Schema"),
                read_defaults=read_defaults or None,
                stored_as=stored_as,
                rules=_cel_rules.build((v.get("schema") or {}).get("openAPIV3Schema")),
                scale=subs["scale"] if isinstance(subs.get("scale"), dict) else None,
                printer_columns=tuple(
                    c for c in v.get("additionalPrinterColumns") or () if isinstance(c, dict)
                ),
                warning=_deprecation(spec, v),
            )
        )
    return out


def _deprecation(spec: dict[str, Any], version: dict[str, Any]) -> str:
    """The warning of a deprecated version: its ``deprecationWarning``, or kube-apiserver's
    default naming the highest served, not deprecated, later version ("" when not deprecated)."""
    if not version.get("deprecated"):
        return ""
    custom = version.get("deprecationWarning")
    if isinstance(custom, str):
        return custom
    name, group, kind = version["name"], spec["group"], spec["names"]["kind"]
    later = [
        v["name"]
        for v in spec["versions"]
        if v.get("served", True)
        and not v.get("deprecated")
        and version_priority(v["name"]) < version_priority(name)
    ]
    message = f"{group}/{name} {kind} is deprecated"
    if later:
        message += f"; use {group}/{min(later, key=version_priority)} {kind}"
    return message
