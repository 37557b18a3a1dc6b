"""Typed views: pydantic ``Resource`` classes and conversion to/from ``kubernetes`` model classes."""

from __future__ import annotations

import copy
from functools import cache
from typing import Any, ClassVar, Protocol, Self, TypeAlias, TypeVar, overload

from kubernetes.client import ApiClient
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretBytes,
    SecretStr,
    ValidationError,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic.fields import FieldInfo

from mcruntime import _patch
from mcruntime._local import display_name
from mcruntime.client._kinds import GroupVersionKind, is_model_class
from mcruntime.errors import ObjectNotTyped

__all__ = [
    "Model",
    "ObjectLike",
    "ObjectMeta",
    "OwnerReference",
    "Resource",
    "to_dict",
    "to_typed",
    "gvk_of_object",
]


class Model(BaseModel):
    """Base for the parts of a resource: camelCase on the wire, snake_case in Python, extras kept."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="allow", protected_namespaces=()
    )

    #: the values ``default_factory`` gave the fields left out of the input: a factory
    #: called again (a fresh uuid, ``now()``) would not tell a default from a value set
    _factory_values: dict[str, Any] = PrivateAttr(default_factory=dict)

    def model_post_init(self, context: Any, /) -> None:
        fields_set = self.model_fields_set
        for name, info in type(self).model_fields.items():
            if info.default_factory is not None and name not in fields_set:
                self._factory_values[name] = copy.deepcopy(getattr(self, name))


class OwnerReference(Model):
    """An entry of ``metadata.ownerReferences``."""

    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ObjectMeta(Model):
    """``metadata`` of an object; fields not declared here are kept as extras."""

    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    deletion_grace_period_seconds: int | None = None
    owner_references: list[OwnerReference] | None = None
    finalizers: list[str] | None = None


class Resource(Model):
    """A typed Kubernetes object; subclass it and set ``api_version`` and ``kind``.

    ``spec``/``status`` are declared by the subclass (use [`Model`][mcruntime.client.Model]
    for nested parts so camelCase aliases apply). Undeclared fields are kept.

    An object read from the API ([`from_dict`][mcruntime.client.Resource.from_dict], and
    every read of the client and the cache) writes back only the fields it was read with
    and those assigned since: model defaults of fields the server did not send are never
    written, so reading an object and writing it back unchanged is a no-op on the server
    (no new ``metadata.generation``). An object built in Python (``Widget(spec=...)``)
    is written with its defaults. Example:

        class Widget(Resource):
            api_version: ClassVar[str] = "example.com/v1"
            kind: ClassVar[str] = "Widget"
            spec: WidgetSpec
    """

    api_version: ClassVar[str] = ""
    kind: ClassVar[str] = ""

    metadata: ObjectMeta = Field(default_factory=ObjectMeta)

    #: read from the API: dump only the fields set (read or assigned), not model defaults
    _from_api: bool = PrivateAttr(default=False)
    #: the object as read (from_dict): values the model normalises are written back as read
    _raw: dict[str, Any] | None = PrivateAttr(default=None)

    @model_validator(mode="before")
    @classmethod
    def _drop_type_meta(cls, data: Any) -> Any:
        if isinstance(data, dict) and ("apiVersion" in data or "kind" in data):
            data = {k: v for k, v in data.items() if k not in ("apiVersion", "kind")}
        return data

    @classmethod
    def gvk(cls) -> GroupVersionKind:
        """The kind this class stands for."""
        if not cls.api_version or not cls.kind:
            raise ValueError(f"{cls.__qualname__} must set class variables api_version and kind")
        return GroupVersionKind.from_api_version(cls.api_version, cls.kind)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        """Build from a plain object dict (as the API returns it).

        The object remembers which fields it was read with: [`to_dict`][mcruntime.client.Resource.to_dict]
        leaves out the model defaults of fields that were absent and never assigned.
        """
        obj = cls.model_validate(data)
        obj._from_api = True
        obj._raw = _patch.copy_json(data)
        return obj

    def to_dict(self) -> dict[str, Any]:
        """The object as the API expects it: camelCase, with apiVersion/kind.

        A None is written (as ``null``) only for a field read as ``null`` or assigned None.

        For an object read from the API, fields it was read without that still hold
        their model default are left out (a default changed in place, say a dict
        default filled with ``obj.spec.labels["a"] = "b"``, is written); an object
        built in Python includes its defaults. A value of an object read that still
        holds what was read is written as read, though the model normalises it (a URL,
        a UUID's case, nanoseconds); a ``set`` is written sorted. ``SecretStr``/``SecretBytes`` fields are
        written with their value (they stay masked in ``repr``); ``@computed_field``
        properties are not written.
        """
        return self._dict(self._from_api)

    def _dict(self, without_defaults: bool) -> dict[str, Any]:
        out = self._written(without_defaults)
        if self._raw is None:
            return out
        # what reading the raw object gives, written: where this object still writes that,
        # the value is written as read (a URL's case, a UUID's, nanoseconds, a set's order)
        try:
            read = type(self).model_validate(self._raw)
        except ValidationError:
            return out
        read._from_api = self._from_api
        as_read = _as_read(out, read._written(without_defaults), self._raw)
        return as_read if isinstance(as_read, dict) else out

    def _written(self, without_defaults: bool) -> dict[str, Any]:
        exclude = _left_out(self, without_defaults)
        body = self.model_dump(by_alias=True, exclude=exclude, mode="json")
        _python_values(self, body)
        return {"apiVersion": type(self).api_version, "kind": type(self).kind, **body}


def _as_read(new: Any, baseline: Any, raw: Any) -> Any:
    """``new``, with each value equal to ``baseline`` (the raw object's own rewrite) taken
    from ``raw``: only what changed since the read is written in the model's words."""
    if _patch.json_equal(new, baseline):
        return _patch.copy_json(raw)
    if isinstance(new, dict) and isinstance(baseline, dict) and isinstance(raw, dict):
        return {
            k: _as_read(v, baseline[k], raw[k]) if k in baseline and k in raw else v
            for k, v in new.items()
        }
    if (
        isinstance(new, list)
        and isinstance(baseline, list)
        and isinstance(raw, list)
        and len(new) == len(baseline) == len(raw)
    ):
        return [_as_read(*values) for values in zip(new, baseline, raw, strict=True)]
    return new


def _left_out(model: BaseModel, without_defaults: bool) -> dict[str, Any]:
    """The ``exclude`` argument of ``model_dump`` naming, at every depth, each field not written:
    a None never read nor assigned (a None read as ``null`` or assigned is kept, so a nullable
    field's ``null`` is not replaced by the server's default), any None of the metadata (none of
    its fields is nullable), and with ``without_defaults`` each field neither read nor assigned
    that still equals its default; and every ``@computed_field``."""
    # a @computed_field is derived in Python: the CRD does not declare it (its schema is
    # the model's input), so the server would warn about it and refuse it in an apply
    out: dict[str, Any] = dict.fromkeys(type(model).model_computed_fields, True)
    fields_set = model.model_fields_set
    metadata = isinstance(model, (ObjectMeta, OwnerReference))
    for name, info in type(model).model_fields.items():
        value = getattr(model, name)
        unset = name not in fields_set
        if value is None and (unset or metadata):
            out[name] = True
            continue
        if without_defaults and unset and _holds_default(model, name, info, value):
            out[name] = True
            continue
        sub = _nested_left_out(value, without_defaults)
        if sub:
            out[name] = sub
    if metadata:  # obj.metadata.managed_fields = None makes an extra: no null in metadata
        out.update((k, True) for k, v in (model.model_extra or {}).items() if v is None)
    return out


def _holds_default(model: BaseModel, name: str, info: FieldInfo, value: Any) -> bool:
    """Whether the unset field ``name`` still holds its default (not changed in place)."""
    if info.default_factory is None:
        return not info.is_required() and bool(value == info.default)
    given = getattr(model, "_factory_values", {})
    return name in given and bool(value == given[name])


def _nested_left_out(value: Any, without_defaults: bool) -> dict[Any, Any]:
    if isinstance(value, BaseModel):
        return _left_out(value, without_defaults)
    if isinstance(value, (list, tuple)):
        return {
            i: sub for i, v in enumerate(value) if (sub := _nested_left_out(v, without_defaults))
        }
    if isinstance(value, dict):
        return {k: sub for k, v in value.items() if (sub := _nested_left_out(v, without_defaults))}
    return {}


def _python_values(model: BaseModel, body: dict[str, Any]) -> None:
    """Correct, in ``body`` (``model``'s JSON dump), what pydantic's JSON gets wrong for the
    API: a ``SecretStr``/``SecretBytes`` is the mask ``**********``, which a write would
    store (written with its value instead), and a ``set`` is in the process's hash order
    (written sorted, the same in every process)."""
    for name, info in type(model).model_fields.items():
        key = info.serialization_alias or info.alias or name
        if key in body:
            body[key] = _python_value(getattr(model, name), body[key])
    for key, value in (model.model_extra or {}).items():
        if key in body:
            body[key] = _python_value(value, body[key])


def _python_value(value: Any, dumped: Any) -> Any:
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if isinstance(value, SecretBytes):
        return value.get_secret_value().decode()  # read back as UTF-8, as pydantic reads bytes
    if isinstance(value, BaseModel):
        if isinstance(dumped, dict):
            _python_values(value, dumped)
        return dumped
    if isinstance(value, (set, frozenset)) and isinstance(dumped, list):
        try:
            return sorted(dumped)
        except TypeError:
            return dumped
    if isinstance(value, (list, tuple)) and isinstance(dumped, list) and len(value) == len(dumped):
        return [_python_value(v, d) for v, d in zip(value, dumped, strict=True)]
    if isinstance(value, dict) and isinstance(dumped, dict):
        return {k: _python_value(value[k], d) if k in value else d for k, d in dumped.items()}
    return dumped


class _HasMetadata(Protocol):
    """A Resource view or a ``kubernetes`` model object: anything with ``metadata``."""

    @property
    def metadata(self) -> Any: ...


#: An object of any of the flavours mcruntime's helpers take: a dict (camelCase keys; a
#: `MetadataOnly` too), a `Resource` view or a ``kubernetes`` model object. A kind's name or
#: a number given where the object belongs is a type error, not a failure at run time.
ObjectLike: TypeAlias = dict[str, Any] | _HasMetadata


@cache
def _serializer() -> ApiClient:
    return ApiClient()


def to_dict(obj: ObjectLike, *, applied: bool = False) -> dict[str, Any]:
    """A plain dict of ``obj``: a dict (returned as is), a Resource or a ``kubernetes`` model.

    ``applied``: the configuration of a server-side apply, which owns every field it holds.
    A Resource then leaves out every field neither set nor read that holds its model default
    (as Go's apply configurations hold only the fields set): a default it sent would be
    owned, conflict with another manager's value, and overwrite it when forced."""
    if isinstance(obj, dict):
        return obj
    if isinstance(obj, Resource):
        return obj._dict(applied or obj._from_api)
    if is_model_class(type(obj)):
        out = _serializer().sanitize_for_serialization(obj)
        if isinstance(out, dict):
            return out
    raise TypeError(
        f"cannot send a {type(obj).__name__}: pass a dict, a mcruntime.client.Resource "
        "or a kubernetes model object"
    )


_T = TypeVar("_T")


@overload
def to_typed(data: dict[str, Any], cls: type[_T], cluster_name: str | None = None) -> _T: ...


@overload
def to_typed(
    data: dict[str, Any], cls: None, cluster_name: str | None = None
) -> dict[str, Any]: ...


def to_typed(data: dict[str, Any], cls: type | None, cluster_name: str | None = None) -> Any:
    """Convert an object dict into the flavour ``cls`` names (None or str kinds: the dict).

    An object a Resource class does not fit raises `ObjectNotTyped` naming it (and
    ``cluster_name``'s cluster), not pydantic's bare ``ValidationError``."""
    if cls is None:
        return data
    if isinstance(cls, type) and issubclass(cls, Resource):
        try:
            return cls.from_dict(data)
        except ValidationError as exc:
            raise _not_typed(data, cls, exc, cluster_name) from None
    if is_model_class(cls):
        from_dict = getattr(cls, "from_dict", None)
        if callable(from_dict):
            return from_dict(data)
        return _serializer()._ApiClient__deserialize(data, cls)  # type: ignore[attr-defined]
    return data


def _not_typed(
    data: dict[str, Any], cls: type, exc: ValidationError, cluster_name: str | None
) -> ObjectNotTyped:
    meta = data.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    where = "/".join(str(p) for p in (meta.get("namespace"), meta.get("name")) if p)
    problems = "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or '(object)'}: {e['msg']}" for e in exc.errors()
    )
    prefix = f"[cluster {display_name(cluster_name)}] " if cluster_name is not None else ""
    return ObjectNotTyped(
        f"{prefix}{data.get('apiVersion')}/{data.get('kind')} {where or '(no name)'} does not "
        f"fit {cls.__qualname__}: {problems}",
        errors=exc.errors(include_input=False),
        cluster_name=cluster_name,
    )


def gvk_of_object(obj: ObjectLike) -> GroupVersionKind:
    """The kind of an object: its apiVersion/kind fields, or its class."""
    if isinstance(obj, Resource):
        return type(obj).gvk()
    if isinstance(obj, dict):
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
    else:
        api_version, kind = getattr(obj, "api_version", None), getattr(obj, "kind", None)
    if isinstance(api_version, str) and isinstance(kind, str) and api_version and kind:
        return GroupVersionKind.from_api_version(api_version, kind)
    if is_model_class(type(obj)):
        from mcruntime.client._kinds import kind_of

        return kind_of(type(obj))
    raise ValueError(f"cannot tell the kind of this {type(obj).__name__}: set apiVersion and kind")
