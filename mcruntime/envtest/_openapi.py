"""OpenAPI documents: ``/openapi/v2`` (JSON or protobuf) and ``/openapi/v3``.

Nothing here is written per kind. The schemas of the built-in kinds are
generated from the ``kubernetes`` package's model classes (their
``openapi_types``, ``attribute_map`` and pydantic field metadata: JSON names,
types, required fields, descriptions), so they follow the installed client
and regenerate with it; a field they type loosely (an IntOrString is ``object``, a
Quantity ``str``) is told by its Go type in the protobuf schema of the built-in kinds,
and refers in OpenAPI v3 to kube-apiserver's definition of it. Strategic-merge and list metadata
(``x-kubernetes-patch-merge-key``, ``x-kubernetes-patch-strategy``,
``x-kubernetes-list-type``, ``x-kubernetes-list-map-keys``) come from
[`mcruntime._patch.DEFAULT_MERGE_KEYS`][], the table the server's strategic
merge patch and server-side apply use. Each served CRD version contributes its
``openAPIV3Schema`` (trimmed to what OpenAPI v2 can say for the v2 document).
Every kind's schema carries ``x-kubernetes-group-version-kind``, which is how
kubectl finds it (validation, ``explain``, patch metadata).

The documents declare no paths, so kubectl validates on the client against
``/openapi/v2`` (unknown fields are rejected there, as kubectl does against a
server without field validation). kubectl fetches ``/openapi/v2`` as protobuf
(gnostic's ``openapi.v2.Document``): [`encode_v2`][] writes that message with a
small protobuf writer. The built-in part is built once per process on first
use; the CRD part per request.
"""

from __future__ import annotations

import hashlib
import re
import typing
from collections.abc import Iterable
from functools import cache
from typing import Any, Final

import yaml

from mcruntime import _json
from mcruntime._patch import DEFAULT_MERGE_KEYS
from mcruntime.envtest._protobuf import message_name, varint
from mcruntime.envtest._protobuf import schema as protobuf_schema

if typing.TYPE_CHECKING:
    from mcruntime.envtest._registry import ServedResource

__all__ = [
    "model_class",
    "models",
    "split_generic",
    "V2_PROTOBUF",
    "V2_PROTOBUF_ACCEPT",
    "v2_document",
    "v3_index",
    "v3_document",
    "encode_v2",
]

#: what kubectl asks ``/openapi/v2`` for (Accept), and the type of the answer (Content-Type)
V2_PROTOBUF_ACCEPT: Final = "application/com.github.proto-openapi.spec.v2"
V2_PROTOBUF: Final = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
_PREFIX = re.compile(r"^([A-Z][a-z]+)?(V\d+(?:alpha\d+|beta\d+)?)([A-Z].*)$")
_SCALARS: Final[dict[str, dict[str, Any]]] = {
    "str": {"type": "string"},
    "int": {"type": "integer", "format": "int64"},
    "bool": {"type": "boolean"},
    "float": {"type": "number", "format": "double"},
    "datetime": {"type": "string", "format": "date-time"},
    "date": {"type": "string", "format": "date"},
    "bytes": {"type": "string", "format": "byte"},
    "object": {},  # IntOrString, Quantity, RawExtension, JSON: anything
}
#: the types a field of a built-in kind may be that its model class does not tell (an
#: IntOrString is ``object`` there, a Quantity ``str``): the Go type of the field, from the
#: protobuf schema, names them; their definitions as kube-apiserver's OpenAPI v3 states them
#: (kubectl explain prints ``<IntOrString>``, ``<map[string]Quantity>``), and what OpenAPI v2
#: says of such a field here (anything, a string)
_INT_OR_STRING: Final = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
_QUANTITY: Final = "io.k8s.apimachinery.pkg.api.resource.Quantity"
_GO_TYPES: Final = {
    "k8s.io.apimachinery.pkg.util.intstr.IntOrString": _INT_OR_STRING,
    "k8s.io.apimachinery.pkg.api.resource.Quantity": _QUANTITY,
}
_V3_TYPES: Final[dict[str, dict[str, Any]]] = {
    _INT_OR_STRING: {
        "description": "IntOrString is a type that can hold an int32 or a string.  When used in "
        "JSON or YAML marshalling and unmarshalling, it produces or consumes the inner type.  "
        "This allows you to have, for example, a JSON field that can accept a name or number.",
        "format": "int-or-string",
        "oneOf": [{"type": "integer"}, {"type": "string"}],
    },
    _QUANTITY: {"oneOf": [{"type": "string"}, {"type": "number"}]},
}
_V2_TYPES: Final[dict[str, dict[str, Any]]] = {_INT_OR_STRING: {}, _QUANTITY: {"type": "string"}}


# --------------------------------------------------------------------- built-in kinds


def models() -> Any:
    from kubernetes.client import models

    return models


def model_class(res: ServedResource) -> type | None:
    """The ``kubernetes`` model class of a built-in kind (``V1Deployment``, ``CoreV1Event``)."""
    found = models()
    version = res.version[:1].upper() + res.version[1:]
    group = (res.group or "core").split(".", 1)[0]
    for name in (f"{group.capitalize()}{version}{res.kind}", f"{version}{res.kind}"):
        cls = getattr(found, name, None)
        if isinstance(cls, type) and hasattr(cls, "openapi_types"):
            return cls
    return None


def _def_name(cls: type, kinds: dict[str, str]) -> str:
    """A definition name in the style of kube-apiserver's (``io.k8s.api.apps.v1.Deployment``)."""
    if cls.__name__ in kinds:
        return kinds[cls.__name__]
    m = _PREFIX.match(cls.__name__)
    if not m:
        return f"io.k8s.api.{cls.__name__}"
    group, version, name = m.groups()
    if name in ("ObjectMeta", "ListMeta", "OwnerReference", "ManagedFieldsEntry", "LabelSelector"):
        return f"io.k8s.apimachinery.pkg.apis.meta.{version.lower()}.{name}"
    if name == "LabelSelectorRequirement" or name == "Condition" or name == "Status":
        return f"io.k8s.apimachinery.pkg.apis.meta.{version.lower()}.{name}"
    group_part = f"{group.lower()}." if group else ""
    return f"io.k8s.api.{group_part}{version.lower()}.{name}"


@cache
def _protobuf_messages() -> dict[str, dict[str, list[Any]]]:
    return protobuf_schema()


def _go_types(message: str) -> dict[str, str]:
    """The fields of a protobuf ``message``: JSON name -> its (item's, value's) type; an
    inlined message's fields (a Volume's VolumeSource) are its own."""
    out: dict[str, str] = {}
    for f in _protobuf_messages().get(message, {}).values():
        if f[5]:
            out.update(_go_types(f[1]))
        else:
            out[f[0]] = f[1]
    return out


def _doc(cls: type) -> str:
    text = (cls.__doc__ or "").strip()
    return text.split("\n\n", 1)[0].split("Attributes:", 1)[0].strip()


def split_generic(t: str) -> tuple[str, str] | None:
    for prefix in ("List[", "Dict[str, "):
        if t.startswith(prefix) and t.endswith("]"):
            return prefix, t[len(prefix) : -1]
    return None


class _Builder:
    """Walks model classes from the served kinds and writes one definition per class."""

    def __init__(self, kinds: dict[str, str]) -> None:
        self.kinds = kinds
        self.defs: dict[str, dict[str, Any]] = {}
        self.models = models()

    def type_schema(self, t: str, via: str, go_type: str | None = None) -> dict[str, Any]:
        """The schema of a field of model type ``t`` whose Go type (of its items or values,
        from the protobuf schema) is ``go_type``, when known."""
        t = t.strip()
        special = _GO_TYPES.get(go_type or "")
        if special is not None and split_generic(t) is None:
            self.defs.setdefault(special, _V3_TYPES[special])
            return {"$ref": special}
        if t in _SCALARS:
            return dict(_SCALARS[t])
        generic = split_generic(t)
        if generic is not None:
            prefix, inner = generic
            sub = self.type_schema(inner, via, go_type)
            if prefix == "List[":
                return {"type": "array", "items": sub}
            return {"type": "object", "additionalProperties": sub}
        cls = getattr(self.models, t, None)
        if isinstance(cls, type) and hasattr(cls, "openapi_types"):
            return {"$ref": self.model(cls, via, go_type)}
        return {}

    def model(self, cls: type, via: str, message: str | None = None) -> str:
        """The definition name of ``cls``, written on first use (``via``: the field it hangs
        off; ``message``: its protobuf message, which tells its fields' Go types)."""
        name = _def_name(cls, self.kinds)
        if name in self.defs:
            return name
        go_fields = _go_types(message or "")
        schema: dict[str, Any] = {"type": "object"}
        self.defs[name] = schema
        desc = _doc(cls)
        if desc:
            schema["description"] = desc
        fields: dict[str, Any] = getattr(cls, "model_fields", {})
        types: dict[str, str] = cls.openapi_types  # type: ignore[attr-defined]
        names: dict[str, str] = cls.attribute_map  # type: ignore[attr-defined]
        props: dict[str, Any] = {}
        required: list[str] = []
        for attr, t in types.items():
            json_name = names.get(attr, attr)
            prop = self.type_schema(t, json_name, go_fields.get(json_name))
            info = fields.get(attr)
            if info is not None:
                if info.description:
                    prop = _described(prop, info.description)
                if info.is_required():
                    required.append(json_name)
            if prop.get("type") == "array":
                prop.update(_list_metadata(via, json_name))
            props[json_name] = prop
        schema["properties"] = props
        if required:
            schema["required"] = required
        return name


def _described(prop: dict[str, Any], description: str) -> dict[str, Any]:
    if "$ref" in prop:
        return {"allOf": [prop], "description": description}
    return {**prop, "description": description}


def _list_metadata(parent: str, field: str) -> dict[str, Any]:
    key = DEFAULT_MERGE_KEYS.get(f"{parent}.{field}") if parent else None
    if key is None:
        key = DEFAULT_MERGE_KEYS.get(field)
    if key is None:
        return {"x-kubernetes-list-type": "atomic"}
    if key == "":
        return {"x-kubernetes-list-type": "set", "x-kubernetes-patch-strategy": "merge"}
    return {
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": [key],
        "x-kubernetes-patch-merge-key": key,
        "x-kubernetes-patch-strategy": "merge",
    }


def _gvk(res: ServedResource) -> dict[str, str]:
    return {"group": res.group, "version": res.version, "kind": res.kind}


@cache
def _builtin_definitions(kinds: tuple[ServedResource, ...]) -> dict[str, dict[str, Any]]:
    """Definitions (v3 style, ``$ref`` into ``#/definitions/``) of the built-in kinds; cached."""
    named: dict[str, str] = {}
    classes: list[tuple[ServedResource, type]] = []
    for res in kinds:
        cls = model_class(res)
        if cls is not None:
            group = res.group.split(".", 1)[0] if res.group.endswith(".k8s.io") else res.group
            named[cls.__name__] = f"io.k8s.api.{group or 'core'}.{res.version}.{res.kind}"
            if res.group == "apiextensions.k8s.io":
                named[cls.__name__] = (
                    f"io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.{res.version}.{res.kind}"
                )
            classes.append((res, cls))
    b = _Builder(named)
    for res, cls in classes:
        message = message_name(res.api_version, res.kind)
        name = b.model(cls, "", message)
        b.defs[name]["x-kubernetes-group-version-kind"] = [_gvk(res)]
        list_cls = getattr(b.models, cls.__name__ + "List", None)
        if isinstance(list_cls, type) and hasattr(list_cls, "openapi_types"):
            list_name = b.model(list_cls, "", message + "List")
            b.defs[list_name]["x-kubernetes-group-version-kind"] = [
                {**_gvk(res), "kind": res.list_kind}
            ]
    return b.defs


# --------------------------------------------------------------------- CRDs


def _crd_name(res: ServedResource) -> str:
    return ".".join(reversed(res.group.split("."))) + f".{res.version}.{res.kind}"


_V2_DROP: Final = frozenset({"nullable", "oneOf", "anyOf", "not", "x-kubernetes-validations"})


def _crd_v2(schema: Any) -> Any:
    """A CRD's structural schema as OpenAPI v2 can state it."""
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for k, v in schema.items():
        if k in _V2_DROP:
            continue
        if k == "properties" and isinstance(v, dict):
            out[k] = {name: _crd_v2(sub) for name, sub in v.items()}
        elif k in ("items", "additionalProperties") and isinstance(v, dict):
            out[k] = _crd_v2(v)
        elif k == "allOf" and isinstance(v, list):
            out[k] = [_crd_v2(s) for s in v]
        else:
            out[k] = v
    if out.get("x-kubernetes-preserve-unknown-fields") is True:
        out.pop("properties", None)  # anything goes: v2 cannot say "these, and more"
        out.pop("required", None)
    if out.get("x-kubernetes-int-or-string") is True:
        out.pop("type", None)
    return out


#: kube-apiserver's description of a custom resource's ``metadata`` (its builder's)
_CRD_METADATA_DESCRIPTION: Final = (
    "Standard object's metadata. More info: "
    "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"
)


@cache
def _type_meta(field: str) -> dict[str, Any]:
    """TypeMeta's ``apiVersion`` or ``kind``, described as the installed client's models are."""
    attr = {"apiVersion": "api_version", "kind": "kind"}[field]
    info = getattr(models().V1ConfigMap, "model_fields", {}).get(attr)
    description = getattr(info, "description", None)
    return {"type": "string", **({"description": description} if description else {})}


def _crd_definition(res: ServedResource, meta_ref: str, v2: bool) -> dict[str, Any]:
    schema = res.schema if isinstance(res.schema, dict) else {"type": "object"}
    out = _crd_v2(schema) if v2 else dict(schema)
    out.setdefault("type", "object")
    if out.get("x-kubernetes-preserve-unknown-fields") is not True:
        # as kube-apiserver's builder: TypeMeta's apiVersion and kind, whatever the CRD says,
        # and ObjectMeta described (kubectl explain shows these descriptions)
        props = dict(out.get("properties") or {})
        props["apiVersion"] = dict(_type_meta("apiVersion"))
        props["kind"] = dict(_type_meta("kind"))
        meta = {"$ref": meta_ref}
        props["metadata"] = (
            {**meta, "description": _CRD_METADATA_DESCRIPTION}
            if v2
            else _described(meta, _CRD_METADATA_DESCRIPTION)
        )
        out["properties"] = props
    out["x-kubernetes-group-version-kind"] = [_gvk(res)]
    return out


# --------------------------------------------------------------------- documents


def _rewrite_refs(value: Any, prefix: str) -> Any:
    if isinstance(value, dict):
        return {
            k: (prefix + v if k == "$ref" and isinstance(v, str) else _rewrite_refs(v, prefix))
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_rewrite_refs(v, prefix) for v in value]
    return value


@cache
def _builtin_v2(kinds: tuple[ServedResource, ...]) -> dict[str, Any]:
    return {
        name: _v2_schema(_rewrite_refs(_v2_types(d), "#/definitions/"))
        for name, d in _builtin_definitions(kinds).items()
        if name not in _V2_TYPES
    }


def _v2_types(value: Any) -> Any:
    """``value`` with its references to IntOrString and Quantity replaced by what OpenAPI v2
    says of them here (`_V2_TYPES`)."""
    if isinstance(value, dict):
        ref = value.get("$ref")
        if isinstance(ref, str) and ref in _V2_TYPES:
            return dict(_V2_TYPES[ref])
        return {k: _v2_types(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_v2_types(v) for v in value]
    return value


def _v2_schema(value: Any) -> Any:
    """v2 has no ``allOf`` beside a description: fold single-``$ref`` allOf back."""
    if isinstance(value, dict):
        all_of = value.get("allOf")
        if isinstance(all_of, list) and len(all_of) == 1 and set(value) <= {"allOf", "description"}:
            return {
                **all_of[0],
                **({"description": value["description"]} if "description" in value else {}),
            }
        return {k: _v2_schema(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_v2_schema(v) for v in value]
    return value


def _split(
    resources: Iterable[ServedResource],
) -> tuple[tuple[ServedResource, ...], list[ServedResource]]:
    builtin: list[ServedResource] = []
    custom: list[ServedResource] = []
    for r in resources:
        (custom if r.custom else builtin).append(r)
    builtin.sort(key=lambda r: (r.group, r.version, r.plural))
    return tuple(builtin), custom


_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
_INFO = {"title": "Kubernetes", "version": "v1.31.0-mcruntime"}


def v2_document(resources: Iterable[ServedResource]) -> dict[str, Any]:
    """The swagger 2.0 document of everything served."""
    builtin, custom = _split(resources)
    defs = dict(_builtin_v2(builtin))
    for res in custom:
        defs[_crd_name(res)] = _crd_definition(res, "#/definitions/" + _META, v2=True)
    return {
        "swagger": "2.0",
        "info": _INFO,
        "paths": {},
        "definitions": dict(sorted(defs.items())),
    }


def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def v3_index(resources: Iterable[ServedResource]) -> dict[str, Any]:
    """``/openapi/v3``: one entry per served group/version, with a content hash."""
    gvs = sorted({(r.group, r.version) for r in resources})
    out = {}
    by_gv: dict[tuple[str, str], list[ServedResource]] = {}
    for r in resources:
        by_gv.setdefault((r.group, r.version), []).append(r)
    for g, v in gvs:
        served = sorted(by_gv[(g, v)], key=lambda r: r.plural)
        fingerprint: list[Any] = [
            (r.plural, r.kind, r.schema if r.custom else None) for r in served
        ]
        if any(not r.custom for r in served):  # a new mcruntime may describe them anew
            fingerprint.append(_builtin_digest())
        digest = hashlib.sha512(_json.dumps(fingerprint)).hexdigest()[:32].upper()
        out[_gv_path(g, v)] = {"serverRelativeURL": f"/openapi/v3/{_gv_path(g, v)}?hash={digest}"}
    return {"paths": out}


@cache
def _builtin_digest() -> str:
    """A digest of the built-in kinds' definitions: part of their documents' hashes, so a
    client's cache of a document keyed by its hash (kubectl's) does not outlive it."""
    return hashlib.sha512(_json.dumps(_builtin_v3(_all_builtins()))).hexdigest()


@cache
def _builtin_v3(kinds: tuple[ServedResource, ...]) -> dict[str, Any]:
    return {
        name: _rewrite_refs(d, "#/components/schemas/")
        for name, d in _builtin_definitions(kinds).items()
    }


def _reachable(schemas: dict[str, Any], roots: Iterable[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    todo = [r for r in roots if r in schemas]
    while todo:
        name = todo.pop()
        if name in out:
            continue
        out[name] = schemas[name]
        stack = [schemas[name]]
        while stack:
            node = stack.pop()
            if isinstance(node, dict):
                ref = node.get("$ref")
                if isinstance(ref, str):
                    target = ref.rsplit("/", 1)[-1]
                    if target not in out and target in schemas:
                        todo.append(target)
                stack.extend(node.values())
            elif isinstance(node, list):
                stack.extend(node)
    return dict(sorted(out.items()))


def v3_document(resources: Iterable[ServedResource], group: str, version: str) -> dict[str, Any]:
    """The OpenAPI 3 document of one group/version: its kinds and what they refer to."""
    mine = [r for r in resources if r.group == group and r.version == version]
    builtin, custom = _split(mine)
    every = _builtin_v3(_all_builtins())
    schemas = dict(every)
    roots: list[str] = []
    for name, d in every.items():
        for gvk in d.get("x-kubernetes-group-version-kind") or ():
            if (gvk["group"], gvk["version"]) == (group, version) and any(
                r.kind == gvk["kind"] or r.list_kind == gvk["kind"] for r in builtin
            ):
                roots.append(name)
    for res in custom:
        name = _crd_name(res)
        schemas[name] = _crd_definition(res, "#/components/schemas/" + _META, v2=False)
        roots.append(name)
    if custom:
        roots.append(_META)
    return {
        "openapi": "3.0.0",
        "info": _INFO,
        "paths": _v3_paths(mine),
        "components": {"schemas": _reachable(schemas, roots)},
    }


def _v3_paths(resources: list[ServedResource]) -> dict[str, Any]:
    """A read path per kind: how ``kubectl explain`` maps a resource to its kind.

    Each path also declares its PATCH with the ``fieldValidation`` parameter:
    kubectl then leaves unknown fields to the server (``Strict``), as with
    kube-apiserver."""
    out: dict[str, Any] = {}
    for r in sorted(resources, key=lambda r: r.plural):
        base = "/" + _gv_path(r.group, r.version)
        where = f"{base}/namespaces/{{namespace}}" if r.namespaced else base
        item: dict[str, Any] = {
            "get": {
                "description": f"read the specified {r.kind}",
                "operationId": f"read{r.kind}",
                "responses": {"200": {"description": "OK"}},
                "x-kubernetes-action": "get",
                "x-kubernetes-group-version-kind": _gvk(r),
            }
        }
        if "patch" in r.verbs:
            item["patch"] = {
                "description": f"partially update the specified {r.kind}",
                "operationId": f"patch{r.kind}",
                "parameters": [_FIELD_VALIDATION],
                "responses": {"200": {"description": "OK"}},
                "x-kubernetes-action": "patch",
                "x-kubernetes-group-version-kind": _gvk(r),
            }
        out[f"{where}/{r.plural}/{{name}}"] = item
    return out


_FIELD_VALIDATION = {
    "name": "fieldValidation",
    "in": "query",
    "description": "how the server treats fields the schema does not know: Ignore, Warn "
    "(the default: dropped with a warning) or Strict (refused)",
    "schema": {"type": "string", "uniqueItems": True},
}


@cache
def _all_builtins() -> tuple[ServedResource, ...]:
    from mcruntime.envtest._registry import BUILTINS

    return tuple(sorted(BUILTINS, key=lambda r: (r.group, r.version, r.plural)))


# --------------------------------------------------------------------- protobuf (gnostic)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (strings, bytes, messages)."""
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def _str(number: int, value: str) -> bytes:
    return _field(number, value.encode())


def _any_yaml(value: Any) -> bytes:
    """gnostic ``Any`` holding ``value`` as YAML (field 2)."""
    return _str(2, yaml.safe_dump(value, default_flow_style=False))


def _pb_schema(s: dict[str, Any]) -> bytes:
    out = bytearray()
    if isinstance(s.get("$ref"), str):
        out += _str(1, s["$ref"])
    if isinstance(s.get("format"), str):
        out += _str(2, s["format"])
    if isinstance(s.get("description"), str):
        out += _str(4, s["description"])
    for r in s.get("required") or ():
        out += _str(19, r)
    for e in s.get("enum") or ():
        out += _field(20, _any_yaml(e))
    ap = s.get("additionalProperties")
    if isinstance(ap, dict):
        out += _field(21, _field(1, _pb_schema(ap)))
    elif isinstance(ap, bool):
        out += _field(21, varint(2 << 3 | 0) + varint(int(ap)))
    t = s.get("type")
    if isinstance(t, str):
        out += _field(22, _str(1, t))
    if isinstance(s.get("items"), dict):
        out += _field(23, _field(1, _pb_schema(s["items"])))
    for sub in s.get("allOf") or ():
        if isinstance(sub, dict):
            out += _field(24, _pb_schema(sub))
    props = s.get("properties")
    if isinstance(props, dict):
        named = b"".join(
            _field(1, _str(1, k) + _field(2, _pb_schema(v)))
            for k, v in props.items()
            if isinstance(v, dict)
        )
        out += _field(25, named)
    for k, v in s.items():
        if k.startswith("x-"):
            out += _field(31, _str(1, k) + _field(2, _any_yaml(v)))
    return bytes(out)


def encode_v2(doc: dict[str, Any]) -> bytes:
    """``doc`` (from [`v2_document`][]) as gnostic's ``openapi.v2.Document`` protobuf."""
    info = _str(1, doc["info"]["title"]) + _str(2, doc["info"]["version"])
    defs = b"".join(
        _field(1, _str(1, name) + _field(2, _pb_schema(schema)))
        for name, schema in doc["definitions"].items()
    )
    return _str(1, doc["swagger"]) + _field(2, info) + _field(8, b"") + _field(9, defs)
