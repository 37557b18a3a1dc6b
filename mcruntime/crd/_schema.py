"""A structural ``openAPIV3Schema`` from a pydantic model.

pydantic writes the JSON schema (types, required fields, enums, defaults,
constraints, descriptions); this module rewrites it into the OpenAPI subset
Kubernetes accepts for CRDs, a *structural* schema: references inlined, every
node typed, ``X | None`` as an optional field (not ``anyOf`` with null),
``int | str`` as ``x-kubernetes-int-or-string``, open maps and ``Any`` as
``x-kubernetes-preserve-unknown-fields``, numeric ``exclusiveMinimum`` as the
OpenAPI v3.0 boolean, sets as ``x-kubernetes-list-type: set``. What cannot be
expressed (recursive models, unions of unrelated types, tuples) raises
[`CRDError`][mcruntime.crd.CRDError] naming the field.
"""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
from collections.abc import Callable
from functools import cache
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

from mcruntime import _json
from mcruntime.crd._options import CRDError

__all__ = ["openapi_schema"]

_PRESERVE = "x-kubernetes-preserve-unknown-fields"
#: the ISO 8601 durations pydantic reads and writes (``PT30S``, ``-P1DT2.5S``), as an RE2
#: pattern: a Go duration (``1m30s``, metav1.Duration's form) is refused naming the field,
#: where the object would be stored and then fail every typed read
_ISO_DURATION = (
    r"^-?P(\d+(\.\d+)?Y)?(\d+(\.\d+)?M)?(\d+(\.\d+)?W)?(\d+(\.\d+)?D)?"
    r"(T(\d+(\.\d+)?H)?(\d+(\.\d+)?M)?(\d+(\.\d+)?S)?)?$"
)
_INT_OR_STRING = "x-kubernetes-int-or-string"
#: marks pydantic's schema of a Decimal (a number or a string) while the schema is built
_DECIMAL = "x-mcruntime-decimal"
#: a model's Python field names -> their names on the wire, while the schema is built
_NAMES = "x-mcruntime-field-names"
_SCALARS = frozenset({"string", "integer", "number", "boolean"})
# Keys of apiextensions.k8s.io/v1 JSONSchemaProps kept as they are (besides x-kubernetes-*).
_KEEP = frozenset(
    {
        "type",
        "description",
        "default",
        "minimum",
        "maximum",
        "multipleOf",
        "minLength",
        "maxLength",
        "pattern",
        "minItems",
        "maxItems",
        "minProperties",
        "maxProperties",
        "enum",
        "required",
        "nullable",
        "example",
    }
)
# Formats the API server validates (k8s.io/apiextensions-apiserver, dashes removed). pydantic's
# "duration" (ISO 8601, "PT1H") is not Go's duration ("1h"), so it is left out: a
# timedelta gets _ISO_DURATION as its pattern instead.
_FORMATS = frozenset(
    [
        "bsonobjectid",
        "uri",
        "email",
        "hostname",
        "ipv4",
        "ipv6",
        "cidr",
        "mac",
        "uuid",
        "uuid3",
        "uuid4",
        "uuid5",
        "isbn",
        "isbn10",
        "isbn13",
        "creditcard",
        "ssn",
        "hexcolor",
        "rgbcolor",
        "byte",
        "password",
        "date",
        "datetime",
    ]
)
# Key order of the output (others keep pydantic's order, between these and the nested schemas).
_FIRST = ("type", "format", "description", "default", "nullable", "enum")
_LAST = ("required", "properties", "additionalProperties", "items")
_TYPE_OF = {str: "string", bool: "boolean", int: "integer", float: "number"}


@cache
def _attribute_docs(cls: type) -> dict[str, str]:
    """Docstrings written under the fields of a class (``x: int`` then ``\"\"\"text\"\"\"``)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError, SyntaxError):
        return {}
    node = tree.body[0] if tree.body else None
    if not isinstance(node, ast.ClassDef):
        return {}
    docs = {}
    for field, after in zip(node.body, node.body[1:], strict=False):
        if (
            isinstance(field, ast.AnnAssign)
            and isinstance(field.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            docs[field.target.id] = inspect.cleandoc(after.value.value)
    return docs


class _Generator(GenerateJsonSchema):
    """pydantic's generator, without titles, with attribute docstrings as descriptions."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False

    def decimal_schema(self, schema: core_schema.DecimalSchema) -> JsonSchemaValue:
        # pydantic's number | string: marked, to be refused as a Decimal, not as a union
        return {**super().decimal_schema(schema), _DECIMAL: True}

    def encode_default(self, dft: Any) -> Any:
        """The default as pydantic writes it, without the fields a ``default_factory`` filled
        in: a factory makes a value per object in Python, which a CRD's one ``default``
        cannot (a parent's ``= Spec()`` would carry the value made when the CRD was
        generated, the same in every object, another in every generation)."""
        return _without_factory_values(dft, super().encode_default(dft))

    def model_schema(self, schema: core_schema.ModelSchema) -> JsonSchemaValue:
        json_schema = super().model_schema(schema)
        json_schema.pop("title", None)
        props = json_schema.get("properties")
        cls = schema["cls"]
        if not isinstance(props, dict):
            return json_schema
        docs: dict[str, str] = {}
        for base in reversed(cls.__mro__):
            if isinstance(base, type) and issubclass(base, BaseModel) and base is not BaseModel:
                docs.update(_attribute_docs(base))
        names: dict[str, str] = {}
        for name, field in cls.model_fields.items():
            key = field.validation_alias if isinstance(field.validation_alias, str) else None
            key = key or field.alias or name
            names[name] = key
            prop = props.get(key)
            if isinstance(prop, dict) and "description" not in prop and docs.get(name):
                props[key] = {**prop, "description": docs[name]}
        json_schema[_NAMES] = names
        return json_schema


_RULES = "x-kubernetes-validations"


def _merged(referenced: dict[str, Any], field: dict[str, Any]) -> dict[str, Any]:
    """A field's schema over the one it refers to (its model's): the field's keywords win,
    but CEL rules add up, the model's first, as controller-gen keeps a type's rules and its
    field's (a field's own rules replacing the model's would drop them without a word)."""
    out = {**referenced, **field}
    ours, theirs = referenced.get(_RULES), field.get(_RULES)
    if isinstance(ours, list) and isinstance(theirs, list):
        out[_RULES] = [*ours, *(r for r in theirs if r not in ours)]
    return out


def _without_factory_values(value: Any, encoded: Any) -> Any:
    """``encoded`` (``value`` written as JSON) without what the ``default_factory`` of a model
    in it made: the fields not set explicitly whose default is a factory's."""
    if isinstance(value, BaseModel) and isinstance(encoded, dict):
        out = dict(encoded)
        for name, info in type(value).model_fields.items():
            key = info.serialization_alias or info.alias or name
            if key not in out:
                continue
            if info.default_factory is not None and name not in value.model_fields_set:
                del out[key]
            else:
                out[key] = _without_factory_values(getattr(value, name, None), out[key])
        return out
    if isinstance(value, dict) and isinstance(encoded, dict):
        return {k: _without_factory_values(value.get(k), v) for k, v in encoded.items()}
    if isinstance(value, list | tuple) and isinstance(encoded, list) and len(value) == len(encoded):
        return [_without_factory_values(v, e) for v, e in zip(value, encoded, strict=True)]
    return encoded


#: how pydantic writes a ``SecretStr``/``SecretBytes``
_SECRET_MASK = "**********"
#: a date-time kube-openapi accepts ends in a zone: ``Z`` or an offset
_ZONED = re.compile(r"([zZ]|[+-]\d\d:\d\d)$")


def _naive_date_time(value: str, schema: dict[str, Any]) -> bool:
    """A ``date-time`` without a timezone (a naive ``datetime``): the API server refuses it."""
    return schema.get("format") == "date-time" and not _ZONED.search(value)


def _masked_secret(value: str, schema: dict[str, Any]) -> bool:
    """A ``SecretStr``/``SecretBytes`` as pydantic writes it: its mask."""
    return schema.get("format") == "password" and value == _SECRET_MASK


#: what a default may not hold: a test of a string and its schema node, what it is, why
_BAD_DEFAULTS: tuple[tuple[Callable[[str, dict[str, Any]], bool], str, str], ...] = (
    (
        _naive_date_time,
        "has a date-time without a timezone",
        ", which the API server refuses (a date-time ends in Z or an offset): give the "
        "datetime a tzinfo (datetime.UTC), and type the field AwareDatetime so that a value "
        "without one is refused in Python too",
    ),
    (
        _masked_secret,
        "holds a secret",
        " (a SecretStr, which pydantic writes as its mask '**********', and every object "
        "would get the mask): a CRD is read by whoever may read CRDs, so give the field no "
        "default",
    ),
)


def _string_where(
    value: Any, schema: dict[str, Any], at: str, bad: Callable[[str, dict[str, Any]], bool]
) -> str | None:
    """Where in ``value`` (a default, the JSON of ``schema``) a string is ``bad`` for its
    schema node, as ``at`` and the fields under it; None if nowhere."""
    if isinstance(value, str):
        return at if bad(value, schema) else None
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        for k, v in value.items():
            sub = props.get(k, additional if not props else None)
            if isinstance(sub, dict):
                found = _string_where(v, sub, f"{at}.{k}" if at else k, bad)
                if found is not None:
                    return found
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, v in enumerate(value):
            found = _string_where(v, schema["items"], f"{at}[{i}]", bad)
            if found is not None:
                return found
    return None


def _drop_nones(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_nones(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_nones(v) for v in value]
    return value


class _Structural:
    def __init__(self, defs: dict[str, Any], owner: str) -> None:
        self.defs = defs
        self.owner = owner

    def fail(self, path: str, why: str) -> CRDError:
        return CRDError(f"{self.owner}: field {path or '(the object)'}: {why}")

    def node(self, schema: Any, path: str, stack: tuple[str, ...] = ()) -> dict[str, Any]:
        if schema is True or schema == {}:
            return {_PRESERVE: True}
        if not isinstance(schema, dict):
            raise self.fail(path, f"unexpected schema {schema!r}")
        schema = dict(schema)
        # inline references ($ref, or a one-element allOf around one); siblings win
        while True:
            if "$ref" in schema:
                ref = str(schema.pop("$ref"))
            elif isinstance(schema.get("allOf"), list) and len(schema["allOf"]) == 1:
                inner = schema.pop("allOf")[0]
                schema = _merged(inner, schema)
                continue
            else:
                break
            name = ref.rsplit("/", 1)[-1]
            if name in stack:
                raise self.fail(
                    path,
                    f"model {name} contains itself; a CRD schema cannot be recursive: type the "
                    "field dict[str, Any] or mark it PreserveUnknownFields",
                )
            if name not in self.defs:
                raise self.fail(path, f"unresolvable reference {ref}")
            stack = (*stack, name)
            schema = _merged(self.defs[name], schema)
        for key in ("anyOf", "oneOf"):
            if key in schema and not schema.get(_INT_OR_STRING):
                return self.union(schema, schema.pop(key), path, stack)
        return self.simple(schema, path, stack)

    def union(
        self, schema: dict[str, Any], branches: list[Any], path: str, stack: tuple[str, ...]
    ) -> dict[str, Any]:
        """``X | None`` -> X; ``int | str`` -> int-or-string; unions of enums -> one enum."""
        real = [b for b in branches if b != {"type": "null"}]
        if not real:
            raise self.fail(path, "a field that can only be None has no schema")
        if len(real) == 1:
            return self.node(_merged(real[0], schema), path, stack)
        resolved = [self.node(b, path, stack) for b in real]
        types = {b.get("type") for b in resolved}
        if types == {"integer", "string"}:
            return self.simple({**schema, _INT_OR_STRING: True}, path, stack)
        if len(types) == 1 and all("enum" in b for b in resolved):
            values = list(dict.fromkeys(v for b in resolved for v in b["enum"]))
            return self.simple({**schema, "type": types.pop(), "enum": values}, path, stack)
        if any(b.get(_PRESERVE) and "type" not in b for b in resolved):
            return self.simple({**schema, _PRESERVE: True}, path, stack)
        if schema.get(_DECIMAL) or any(b.get(_DECIMAL) for b in real):
            raise self.fail(
                path,
                "a Decimal has no structural schema (pydantic reads it from a number or a "
                "string): type it float, or str (e.g. a quantity such as '1.5Gi')",
            )
        shown = " | ".join(str(b.get("type", "any")) for b in resolved)
        raise self.fail(
            path,
            f"the union {shown} has no structural schema (only X | None, int | str and unions "
            "of Literal/Enum values have one): use one model with optional fields, or "
            "dict[str, Any]",
        )

    def simple(self, schema: dict[str, Any], path: str, stack: tuple[str, ...]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in schema.items():
            if key in _KEEP or key.startswith("x-kubernetes-") or key == _NAMES:
                out[key] = value
        if out.get(_INT_OR_STRING):
            out.pop("type", None)
            out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
        if "const" in schema and "enum" not in out:
            out["enum"] = [schema["const"]]
        for bound, exclusive in (("minimum", "exclusiveMinimum"), ("maximum", "exclusiveMaximum")):
            value = schema.get(exclusive)
            if isinstance(value, bool):
                out[exclusive] = value
            elif isinstance(value, int | float):
                out[bound], out[exclusive] = value, True
        fmt = schema.get("format")
        if isinstance(fmt, str) and fmt.replace("-", "") in _FORMATS:
            out["format"] = fmt
        elif fmt == "duration" and out.get("type") == "string" and "pattern" not in out:
            out["pattern"] = _ISO_DURATION
        if "default" in out:
            if out["default"] is None:
                del out["default"]
            else:
                out["default"] = _drop_nones(out["default"])
        if "prefixItems" in schema:
            raise self.fail(path, "tuples have no structural schema: use a list or a model")
        if "patternProperties" in schema:
            raise self.fail(
                path, "maps with constrained keys have no structural schema: use dict[str, X]"
            )
        if "enum" in out and "type" not in out:
            kinds = {_TYPE_OF.get(type(v)) for v in out["enum"]}
            if len(kinds) == 1 and None not in kinds:
                out["type"] = kinds.pop()
        t = out.get("type")
        if t == "null":
            raise self.fail(path, "a field that can only be None has no schema")
        if isinstance(t, list):
            raise self.fail(path, f"a field of several types {t} has no structural schema")
        props = schema.get("properties")
        additional = schema.get("additionalProperties")
        if t == "object" or props is not None or isinstance(additional, dict):
            out["type"] = "object"
            if isinstance(props, dict) and props:
                out["properties"] = {
                    k: self.node(v, f"{path}.{k}" if path else k, stack) for k, v in props.items()
                }
            elif isinstance(additional, dict) and additional:
                out["additionalProperties"] = self.node(additional, f"{path}[*]", stack)
            elif additional is not False:
                out[_PRESERVE] = True
                out.pop("required", None)
        elif t == "array":
            items = schema.get("items", {})
            out["items"] = self.node(items, f"{path}[*]", stack)
            if out.get("x-kubernetes-list-type") == "map":
                out["x-kubernetes-list-map-keys"] = self.map_keys(out, path)
            if (
                schema.get("uniqueItems")
                and out["items"].get("type") in _SCALARS
                and "x-kubernetes-list-type" not in out
            ):
                out["x-kubernetes-list-type"] = "set"
            elif _conditions(out["items"]) and "x-kubernetes-list-type" not in out:
                # as kubebuilder marks []metav1.Condition (+listType=map, +listMapKey=type):
                # each condition its own writer's under server-side apply, not the list
                out["x-kubernetes-list-type"] = "map"
                out["x-kubernetes-list-map-keys"] = ["type"]
        self.check_list_type(out, path)
        if "type" not in out and not out.get(_INT_OR_STRING) and not out.get(_PRESERVE):
            if not any(k for k in out if k not in ("description", "default", "nullable")):
                out[_PRESERVE] = True  # Any
            else:
                raise self.fail(path, f"no type can be told from {schema}")
        if "default" in out:
            self.check_default(out, path)
        first = {k: out[k] for k in _FIRST if k in out}
        last = {k: out[k] for k in _LAST if k in out}
        middle = {k: v for k, v in out.items() if k not in first and k not in last}
        return {**first, **middle, **last}

    def check_default(self, schema: dict[str, Any], path: str) -> None:
        """Refuse a default the API server would refuse, or should not be given."""
        default = schema["default"]
        if schema.get("x-kubernetes-embedded-resource") and not (
            isinstance(default, dict) and default.get("apiVersion") and default.get("kind")
        ):
            raise self.fail(
                path,
                f"its default {default!r} is not a Kubernetes object: the API server refuses an "
                "EmbeddedResource default without apiVersion and kind; give one, or no default "
                "(Field(default_factory=dict))",
            )
        for bad, what, why in _BAD_DEFAULTS:
            found = _string_where(default, schema, "", bad)
            if found is not None:
                where = f" at {found}" if found else ""
                raise self.fail(path, f"its default {what}{where}{why}")

    def check_list_type(self, schema: dict[str, Any], path: str) -> None:
        """Refuse a ``ListType`` the API server refuses: on what is not a list, or ``set`` of
        items that are not scalars (``must be atomic as item of a list with
        x-kubernetes-list-type=set``)."""
        list_type = schema.get("x-kubernetes-list-type")
        if list_type is None:
            return
        if schema.get("type") != "array":
            raise self.fail(
                path, f"ListType({list_type!r}) marks a list, and this field is not one"
            )
        items = schema.get("items") or {}
        if list_type == "set" and items.get("type") in ("object", "array"):
            atomic = items.get("x-kubernetes-map-type") == "atomic" or (
                items.get("x-kubernetes-list-type") == "atomic"
            )
            if not atomic:
                raise self.fail(
                    path,
                    "ListType('set') holds scalars (strings, numbers): a list of models is "
                    "ListType('map', keys=(...)) or ListType('atomic')",
                )

    def map_keys(self, schema: dict[str, Any], path: str) -> list[str]:
        """A map list's keys as the items name them on the wire (a Python field name is
        taken for its alias); a key naming no item property is a `CRDError`, as the API
        server refuses it ("entries must all be names of item properties")."""
        items = schema["items"]
        props = items.get("properties") or {}
        names = items.get(_NAMES) or {}
        keys = []
        for key in schema.get("x-kubernetes-list-map-keys") or ():
            wire = key if key in props else names.get(key, key)
            if wire not in props:
                known = ", ".join(props) or "none"
                raise self.fail(
                    path,
                    f"ListType('map') key {key!r} names no field of the items (their fields: "
                    f"{known})",
                )
            if wire not in (items.get("required") or ()) and "default" not in props[wire]:
                raise self.fail(
                    path,
                    f"ListType('map') key {key!r} must be a required field or have a default "
                    "(the API server refuses a map key an item may leave out): type it "
                    "without '| None = None', or give it a default",
                )
            keys.append(wire)
        return keys


def _without_names(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_names(v) for k, v in value.items() if k != _NAMES}
    if isinstance(value, list):
        return [_without_names(v) for v in value]
    return value


#: the fields of ``metav1.Condition`` (`mcruntime.controllerutil.Condition`)
_CONDITION_FIELDS = frozenset(
    {"type", "status", "reason", "message", "observedGeneration", "lastTransitionTime"}
)


def _conditions(items: dict[str, Any]) -> bool:
    """Whether a list's ``items`` are ``metav1.Condition``s: its fields, ``type`` required."""
    props = items.get("properties")
    return (
        isinstance(props, dict)
        and set(props) == _CONDITION_FIELDS
        and "type" in (items.get("required") or ())
    )


def openapi_schema(cls: type[BaseModel]) -> dict[str, Any]:
    """The structural ``openAPIV3Schema`` of a [`Resource`][mcruntime.client.Resource] class.

    ``apiVersion`` and ``kind`` are strings and ``metadata`` is ``type: object``
    (the API server validates metadata itself and allows nothing else there).
    """
    owner = cls.__name__
    try:
        raw = cls.model_json_schema(by_alias=True, mode="validation", schema_generator=_Generator)
    except Exception as exc:  # pydantic raises several types for schemas it cannot build
        raise CRDError(f"{owner}: pydantic cannot build its JSON schema: {exc}") from exc
    defs = raw.pop("$defs", {})
    props = dict(raw.get("properties") or {})
    props.pop("metadata", None)
    raw["properties"] = props
    schema = _without_names(_Structural(defs, owner).node(raw, ""))
    schema.pop(_PRESERVE, None)
    properties: dict[str, Any] = {
        "apiVersion": {
            "type": "string",
            "description": "the versioned schema of this representation of an object",
        },
        "kind": {"type": "string", "description": "the REST resource this object represents"},
        "metadata": {"type": "object"},
        **(schema.get("properties") or {}),
    }
    out: dict[str, Any] = {"type": "object"}
    if schema.get("description"):
        out["description"] = schema["description"]
    out["properties"] = properties
    required = [r for r in schema.get("required") or () if r not in ("metadata",)]
    if required:
        out["required"] = required
    for key, value in schema.items():
        if key.startswith("x-kubernetes-") and key != _PRESERVE:
            out[key] = value
    copied: dict[str, Any] = _json.loads(_json.dumps(out))  # no shared lists (YAML anchors)
    return copied
