"""CRD structural schemas: pruning, defaulting and validation of custom objects.

Covers what controllers meet in practice: unknown fields are dropped unless
``x-kubernetes-preserve-unknown-fields``; ``default`` values are filled in
where a field is missing or a null its schema does not allow (`apply_defaults`
alone, without pruning, is what a mutating webhook's patched object gets);
``type``, ``nullable``, ``enum``, ``required``, numeric and length bounds,
``multipleOf``, ``pattern`` (a Go regular expression, `_regexp`), item counts,
``x-kubernetes-int-or-string`` and ``format`` (``date-time``, ``date``, the ``uuid`` ones and those of `_formats`), the uniqueness of
``x-kubernetes-list-type: set`` items and of ``map`` items' keys
are checked.
"""

from __future__ import annotations

import copy
import datetime
import re
from collections.abc import Callable, Mapping
from typing import Any, cast

from mcruntime import _json
from mcruntime.envtest import _formats
from mcruntime.envtest._gofmt import go_string, go_syntax
from mcruntime.envtest._names import embedded_meta_causes, name_problems
from mcruntime.envtest._regexp import GoRegexpError, compile_go

__all__ = [
    "apply_defaults",
    "apply_schema",
    "declares_default",
    "default_errors",
    "default_on_read",
    "in_version",
    "prune",
    "unchanged",
    "Cause",
]

Cause = tuple[str, str, str]  # (reason, field, message)
_ROOT_KEEP = frozenset({"apiVersion", "kind", "metadata"})
_PRESERVE = "x-kubernetes-preserve-unknown-fields"
_EMBEDDED = "x-kubernetes-embedded-resource"
_MISSING = object()
_DUPLICATE = "FieldValueDuplicate"


def in_version(
    obj: dict[str, Any],
    api_version: str,
    schema: dict[str, Any] | None,
    custom: bool,
    read_defaults: Mapping[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """``obj`` as served in ``api_version``: only its ``apiVersion`` changes, but a custom
    resource stored in another version is pruned to that version's ``schema``, as
    kube-apiserver's ``schemaCoercingConverter`` prunes what a CRD's conversion (``None``
    or a webhook) returns. Before that, a custom resource gets the defaults of the version
    it is stored in (`default_on_read`; ``read_defaults`` maps a CRD's versions to their
    schemas)."""
    if read_defaults:
        obj = default_on_read(obj, read_defaults)
    if obj.get("apiVersion") == api_version:
        return obj
    out = {**obj, "apiVersion": api_version}
    return prune(out, schema) if custom else out


def default_on_read(
    obj: dict[str, Any], read_defaults: Mapping[str, dict[str, Any]]
) -> dict[str, Any]:
    """``obj`` as kube-apiserver decodes it from storage: with the ``default`` values of the
    schema of the version it is stored in (its ``apiVersion``), so an object written before
    a default was added to the CRD is read with it. ``read_defaults`` maps the versions
    whose schemas declare a default to those schemas; ``obj`` itself when its version has
    none (the object stored is never changed)."""
    schema = read_defaults.get(str(obj.get("apiVersion", "")).rpartition("/")[2])
    return obj if schema is None else apply_defaults(obj, schema)


def declares_default(schema: Any) -> bool:
    """Whether a structural schema declares a ``default`` anywhere in it."""
    if not isinstance(schema, dict):
        return False
    if schema.get("default") is not None:
        return True
    props = schema.get("properties")
    subs = [*(props.values() if isinstance(props, dict) else ()), schema.get("items")]
    return any(declares_default(s) for s in (*subs, schema.get("additionalProperties")))


def prune(obj: dict[str, Any], schema: dict[str, Any] | None) -> dict[str, Any]:
    """``obj`` without the fields ``schema`` does not declare (as it is without a schema)."""
    pruned: dict[str, Any] = _prune(obj, schema, root=True) if schema else obj
    return pruned


def apply_schema(
    obj: dict[str, Any],
    schema: dict[str, Any] | None,
    dropped: list[str] | None = None,
    old: dict[str, Any] | None = None,
) -> tuple[dict[str, Any], list[Cause]]:
    """Prune and default ``obj`` (a new object is returned) and list schema violations;
    the paths of the fields pruned are appended to ``dropped`` when given.

    ``old`` is the stored object of an update: its violations ratchet, as kube-apiserver's
    (1.30+, ``CRDValidationRatcheting``) do: a value equal to the one it replaces (the old
    value at the same field, the same key of a map, the item of a ``map`` list with the
    same keys; a list of another type as a whole, not item by item) is not checked again,
    so an object stored before its CRD's schema was tightened may still be updated where it
    keeps its old values; and the uniqueness of ``set`` and ``map`` lists is checked only
    when the old object kept it."""
    if not schema:
        return obj, []
    out = _default(_prune(obj, schema, root=True, dropped=dropped), schema, root=True)
    causes: list[Cause] = []
    if old is not None and unchanged(out, old, schema):
        return out, causes
    olds: dict[str, Any] = old if old is not None else {}
    for key, value in out.items():
        if key in _ROOT_KEEP:
            continue
        sub = (schema.get("properties") or {}).get(key)
        if sub is not None:
            _validate(value, sub, key, causes, olds.get(key, _MISSING))
    for req in schema.get("required") or ():
        if req not in out and req not in _ROOT_KEEP:
            causes.append(("FieldValueRequired", req, f"{req}: Required value"))
    if old is not None and any(c[0] == _DUPLICATE for c in causes):
        _, before = apply_schema(old, schema)
        if any(c[0] == _DUPLICATE for c in before):
            # apiextensions' strategy: ValidateListSetsAndMaps of the new object only when
            # the old one passes it
            causes = [c for c in causes if c[0] != _DUPLICATE]
    return out, causes


def _same(a: Any, b: Any) -> bool:
    """``reflect.DeepEqual`` of two decoded JSON values: the order of an object's keys
    does not count, a value's type does (``1``, ``1.0`` and ``true`` differ)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(v, b[k]) for k, v in a.items())
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def unchanged(value: Any, old: Any, schema: dict[str, Any]) -> bool:
    """Whether ``value`` equals ``old``, the value it replaces, as kube-apiserver's ratcheting
    tells (``common.CorrelatedObject.CachedDeepEqual``): a ``map`` list item by item, matched
    by their keys (so in any order); an object key by key, where a key its schema does not
    declare (a field kept unknown, metadata's) makes it unequal; other lists and scalars as
    ``reflect.DeepEqual`` does (`_same`)."""
    if value is None or old is None:
        return value is None and old is None
    if isinstance(value, list) and isinstance(old, list):
        if len(value) != len(old):
            return False
        items = schema.get("items")
        if schema.get("x-kubernetes-list-type") != "map" or not isinstance(items, dict):
            return _same(value, old)
        return all(
            o is not _MISSING and unchanged(v, o, items)
            for v, o in zip(value, _old_items(value, old, schema), strict=True)
        )
    if isinstance(value, dict) and isinstance(old, dict):
        if len(value) != len(old):
            return False
        props = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        for k, v in value.items():
            sub = props.get(k, additional if isinstance(additional, dict) else None)
            if k not in old or not isinstance(sub, dict) or not unchanged(v, old[k], sub):
                return False
        return True
    return _same(value, old)


def _old_items(value: list[Any], old: Any, schema: dict[str, Any]) -> list[Any]:
    """The old value each item of the list ``value`` is correlated with (`_MISSING` where
    none), as kube-apiserver's ratcheting (``common.CorrelatedObject``) correlates them: a
    ``map`` list's items by their keys; the items of any other list (``set``, ``atomic``,
    or no list type, which is atomic) not at all (the list is, as a whole)."""
    if not isinstance(old, list) or schema.get("x-kubernetes-list-type") != "map":
        return [_MISSING] * len(value)
    names = schema.get("x-kubernetes-list-map-keys") or []

    def key(item: Any) -> bytes:
        return _json.dumps([item.get(k) for k in names] if isinstance(item, dict) else None)

    by_key: dict[bytes, Any] = {}
    for item in old:
        by_key.setdefault(key(item), item)
    return [by_key.get(key(v), _MISSING) for v in value]


def _prune(
    value: Any,
    schema: dict[str, Any],
    root: bool = False,
    path: str = "",
    dropped: list[str] | None = None,
) -> Any:
    """``value`` without the fields ``schema`` does not know (their paths appended to
    ``dropped`` when given), and without the nulls of declared fields that may be neither
    null nor defaulted (kube-apiserver's ``PruneNonNullableNullsWithoutDefaults``: such a
    null is dropped without a word, not refused)."""
    if isinstance(value, dict):
        props = schema.get("properties")
        additional = schema.get("additionalProperties")
        preserve = schema.get(_PRESERVE) is True
        if props is None and not isinstance(additional, dict) and (preserve or additional is True):
            return value
        out: dict[str, Any] = {}
        # an embedded resource keeps its apiVersion and kind (when strings) and its metadata
        # as the root does (pruning.Prune)
        embedded = not root and schema.get(_EMBEDDED) is True
        for k, v in value.items():
            sub = f"{path}.{k}" if path else k
            if (root and k in _ROOT_KEEP) or (
                embedded and (k == "metadata" or (k in _ROOT_KEEP and isinstance(v, str)))
            ):
                out[k] = v
            elif props is not None and k in props:
                if not _null_to_drop(v, props[k]):
                    out[k] = _prune(v, props[k], path=sub, dropped=dropped)
            elif isinstance(additional, dict):
                if not _null_to_drop(v, additional):
                    out[k] = _prune(v, additional, path=sub, dropped=dropped)
            elif preserve or additional is True:
                out[k] = v
            elif dropped is not None:
                dropped.append(sub)
        return out
    if isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, dict):
            return [
                _prune(v, items, path=f"{path}[{i}]", dropped=dropped) for i, v in enumerate(value)
            ]
    return value


def _null_to_drop(value: Any, schema: dict[str, Any]) -> bool:
    return value is None and not schema.get("nullable") and schema.get("default") is None


def apply_defaults(obj: dict[str, Any], schema: dict[str, Any] | None) -> dict[str, Any]:
    """``obj`` with the defaults of ``schema`` filled in (a new object), neither pruned nor
    checked: what kube-apiserver's defaulter of a custom resource does, also to the object a
    mutating webhook patched."""
    if not schema:
        return obj
    return cast(dict[str, Any], _default(obj, schema, root=True))


def _with_default(value: Any, schema: dict[str, Any]) -> Any:
    """``schema``'s default (pruned, a copy) in place of ``value`` when ``value`` is missing
    (``_MISSING``) or a null ``schema`` does not allow; ``value`` otherwise."""
    default = schema.get("default")
    if default is None or not (value is _MISSING or (value is None and not schema.get("nullable"))):
        return value
    return _prune(copy.deepcopy(default), schema)


def _default(value: Any, schema: dict[str, Any], root: bool = False) -> Any:
    """``value`` with the defaults of ``schema`` filled in, in the fields it declares (those
    it does not know are left as they are); the defaults' own fields are defaulted too."""
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        out = dict(value)
        for k, sub in props.items():
            if not (root and k in _ROOT_KEEP):
                v = _with_default(out.get(k, _MISSING), sub)
                if v is not _MISSING:
                    out[k] = v
        for k, v in out.items():
            if root and k in _ROOT_KEEP:
                continue
            if k in props:
                out[k] = _default(v, props[k])
            elif isinstance(additional, dict):
                out[k] = _default(_with_default(v, additional), additional)
        return out
    if isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, dict):
            return [_default(_with_default(v, items), items) for v in value]
    return value


_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "boolean": (bool,),
    "integer": (int,),
    "number": (int, float),
}


def _show(value: Any) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, dict | list):
        return '"object"' if isinstance(value, dict) else '"array"'
    return str(value)


def _repeats(values: list[Any]) -> list[int]:
    """The index of the second appearance of each value appearing more than once, as
    apiextensions' ``validateListSet`` reports them (JSON equality: 1 and true differ)."""
    count: dict[bytes, int] = {}
    out = []
    for i, v in enumerate(values):
        key = _json.dumps(v)
        count[key] = count.get(key, 0) + 1
        if count[key] == 2:
            out.append(i)
    return out


def _dup(value: Any) -> str:
    """A duplicate as ``field.Duplicate`` shows it: a scalar as ``%v`` (a string quoted), an
    object or a list as Go's ``%#v`` of the decoded JSON."""
    if isinstance(value, dict | list):
        return go_syntax(value)
    if isinstance(value, float):
        return go_syntax(value)
    return _show(value)


def _any(_: str) -> bool:
    return True


def _is_date(text: str) -> bool:
    """kube-openapi's ``strfmt.IsDate``: Go's ``time.Parse("2006-01-02", text)``."""
    if not re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", text):
        return False
    try:
        datetime.date(int(text[:4]), int(text[5:7]), int(text[8:]))
    except ValueError:
        return False
    return True


_DATE_TIME_CLOCK = re.compile(
    r"^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))\Z"
)


def _is_date_time(text: str) -> bool:
    """kube-openapi's ``strfmt.IsDateTime``: an RFC 3339 date, a ``T`` and a clock with a zone."""
    if len(text) < 4:
        return False
    parts = text.lower().split("t")
    if len(parts) < 2 or not _is_date(parts[0]):
        return False
    m = _DATE_TIME_CLOCK.search(parts[1])
    return m is not None and m[1] <= "23" and m[2] <= "59" and m[3] <= "59"


def _matches(pattern: str) -> Callable[[str], bool]:
    rx = re.compile(pattern)
    return lambda text: rx.search(text) is not None


#: the string formats kube-apiserver checks a custom object's fields for (apiextensions'
#: supported formats, by kube-openapi's strfmt registry, names without their ``-``); a
#: format not here is accepted as any string
_FORMATS: dict[str, Callable[[str], bool]] = {
    **_formats.CHECKS,
    "date": _is_date,
    "datetime": _is_date_time,
    # strfmt's UUIDPattern, UUID3Pattern, UUID4Pattern and UUID5Pattern
    "uuid": _matches(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}\Z"),
    "uuid3": _matches(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}\Z"),
    "uuid4": _matches(
        r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}\Z"
    ),
    "uuid5": _matches(
        r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}\Z"
    ),
}


def format_matches(fmt: str, value: str) -> bool:
    """Whether ``value`` is of string format ``fmt`` (true of a format not checked)."""
    return _FORMATS.get(fmt.replace("-", ""), _any)(value)


def _too_many(path: str, actual: int, most: int) -> Cause:
    """apiextensions' maxItems and maxProperties error (field.TooMany: "items" for both)."""
    return (
        "FieldValueTooMany",
        path,
        f"{path}: Too many: {actual}: must have at most {most} items",
    )


def _multiple(value: float, step: float) -> bool:
    quotient = value / step
    return abs(quotient - round(quotient)) < 1e-9


def _matches_pattern(pattern: Any, value: str) -> bool:
    """kube-openapi's pattern check: Go's ``regexp.MatchString`` (a pattern Go refuses, which
    the CRD was refused for, matches nothing)."""
    try:
        return compile_go(str(pattern)).search(value) is not None
    except GoRegexpError:
        return False


def _validate(
    value: Any, schema: dict[str, Any], path: str, causes: list[Cause], old: Any = _MISSING
) -> None:
    """Append to ``causes`` what ``schema`` refuses of ``value`` at ``path``; nothing when
    ``value`` equals ``old``, the value it replaces in an update (ratcheting)."""
    if old is not _MISSING and unchanged(value, old, schema):
        return

    def bad(why: str, reason: str = "FieldValueInvalid") -> None:
        causes.append((reason, path, f"{path}: Invalid value: {_show(value)}: {why}"))

    if value is None:
        if not schema.get("nullable"):
            t = schema.get("type")
            if t:
                causes.append(
                    (
                        "FieldValueTypeInvalid",
                        path,
                        f'{path}: Invalid value: "null": {path} in body must be of type {t}: "null"',
                    )
                )
        return
    t = schema.get("type")
    if schema.get("x-kubernetes-int-or-string"):
        if not isinstance(value, int | str) or isinstance(value, bool):
            bad(f"{path} in body must be of type integer or string")
            return
    elif t:
        ok = isinstance(value, _TYPES.get(t, (object,))) and not (
            t in ("integer", "number") and isinstance(value, bool)
        )
        if t == "integer" and isinstance(value, float) and value.is_integer():
            ok = True
        if not ok:
            got = {
                dict: "object",
                list: "array",
                str: "string",
                bool: "boolean",
                int: "integer",
                float: "number",
            }.get(type(value), "unknown")
            causes.append(
                (
                    "FieldValueTypeInvalid",
                    path,
                    f'{path}: Invalid value: "{got}": {path} in body must be of type {t}: "{got}"',
                )
            )
            return
    enum = schema.get("enum")
    if enum is not None and value not in enum:
        allowed = ", ".join(_show(e) for e in enum)
        causes.append(
            (
                "FieldValueNotSupported",
                path,
                f"{path}: Unsupported value: {_show(value)}: supported values: {allowed}",
            )
        )
    if isinstance(value, int | float) and not isinstance(value, bool):
        lo, hi = schema.get("minimum"), schema.get("maximum")
        if lo is not None and (value < lo or (schema.get("exclusiveMinimum") and value == lo)):
            op = "greater than" if schema.get("exclusiveMinimum") else "greater than or equal to"
            bad(f"{path} in body should be {op} {lo}")
        if hi is not None and (value > hi or (schema.get("exclusiveMaximum") and value == hi)):
            op = "less than" if schema.get("exclusiveMaximum") else "less than or equal to"
            bad(f"{path} in body should be {op} {hi}")
        step = schema.get("multipleOf")
        if isinstance(step, int | float) and step > 0 and not _multiple(value, step):
            bad(f"{path} in body should be a multiple of {_show(step)}")
    elif isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            bad(f"{path} in body should be at least {schema['minLength']} chars long")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            # field.TooLongMaxLength: "Too long" shows no value
            causes.append(
                (
                    "FieldValueTooLong",
                    path,
                    f"{path}: Too long: may not be longer than {schema['maxLength']}",
                )
            )
        if "pattern" in schema and not _matches_pattern(schema["pattern"], value):
            bad(f"{path} in body should match '{schema['pattern']}'")
        fmt = schema.get("format")
        if isinstance(fmt, str) and not _FORMATS.get(fmt.replace("-", ""), _any)(value):
            causes.append(
                (
                    "FieldValueTypeInvalid",
                    path,
                    f"{path}: Invalid value: {_show(value)}: {path} in body must be of type "
                    f"{fmt}: {_show(value)}",
                )
            )
    elif isinstance(value, list):
        if "minItems" in schema and len(value) < schema["minItems"]:
            bad(f"{path} in body should have at least {schema['minItems']} items")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            causes.append(_too_many(path, len(value), schema["maxItems"]))
        items = schema.get("items")
        if isinstance(items, dict):
            olds = _old_items(value, old, schema)
            for i, v in enumerate(value):
                _validate(v, items, f"{path}[{i}]", causes, olds[i])
        list_type = schema.get("x-kubernetes-list-type")
        if list_type == "set":
            for i in _repeats(value):
                at = f"{path}[{i}]"
                causes.append((_DUPLICATE, at, f"{at}: Duplicate value: {_dup(value[i])}"))
        elif list_type == "map" and all(isinstance(v, dict | None) for v in value):
            names = schema.get("x-kubernetes-list-map-keys") or []
            keys = [
                {k: v[k] for k in names if k in v} if isinstance(v, dict) else {} for v in value
            ]
            for i in _repeats(keys):
                at = f"{path}[{i}]"
                causes.append((_DUPLICATE, at, f"{at}: Duplicate value: {_dup(keys[i])}"))
    elif isinstance(value, dict):
        props = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        if schema.get(_EMBEDDED) is True:
            _embedded_errors(value, path, causes)
        old_map = old if isinstance(old, dict) else {}
        for k, v in value.items():
            sub = props.get(k)
            if sub is not None:
                # kube-openapi names a property of the value validated "k", not ".k"
                _validate(v, sub, f"{path}.{k}" if path else k, causes, old_map.get(k, _MISSING))
            elif isinstance(additional, dict):
                _validate(v, additional, f"{path}.{k}", causes, old_map.get(k, _MISSING))
        for req in schema.get("required") or ():
            if req not in value:
                causes.append(
                    ("FieldValueRequired", f"{path}.{req}", f"{path}.{req}: Required value")
                )
        if "minProperties" in schema and len(value) < schema["minProperties"]:
            bad(f"{path} in body should have at least {schema['minProperties']} properties")
        if "maxProperties" in schema and len(value) > schema["maxProperties"]:
            causes.append(_too_many(path, len(value), schema["maxProperties"]))


def _embedded_errors(value: dict[str, Any], path: str, causes: list[Cause]) -> None:
    """What kube-apiserver refuses of an embedded resource (apiextensions'
    ``objectmeta.Validate``): its ``apiVersion`` and ``kind`` are required, strings, not
    empty, a group/version and a DNS-1035 label in any case; its metadata is valid object
    metadata (`embedded_meta_causes`)."""
    for key in ("apiVersion", "kind"):
        at = f"{path}.{key}"
        if key not in value:
            causes.append(("FieldValueRequired", at, f"{at}: Required value"))
            continue
        v = value[key]
        if not isinstance(v, str):
            why = "must be a string"
        elif not v:
            why = "must not be empty"
        elif key == "apiVersion":
            if v == "/" or v.count("/") < 2:
                continue
            why = f"unexpected GroupVersion string: {v}"
        elif problems := name_problems(v.lower(), "dns1035"):
            why = "may have mixed case, but should otherwise match: " + ",".join(problems)
        else:
            continue
        causes.append(("FieldValueInvalid", at, f"{at}: Invalid value: {_show(v)}: {why}"))
    meta = value.get("metadata")
    if isinstance(meta, dict):
        causes += embedded_meta_causes(meta, f"{path}.metadata")


def default_errors(schema: dict[str, Any], path: str = "openAPIV3Schema") -> list[Cause]:
    """The ``default`` values of a structural ``schema`` that kube-apiserver refuses the CRD
    for (apiextensions' ``defaulting.ValidateDefaults``): a default with fields its schema
    prunes, or one its own schema node (its type, enum, bounds, pattern, format, its
    fields' schemas and ``required``) does not validate, each at ``<path>.default``. The
    value is validated as a whole document: kube-openapi names it "" and its fields from
    there (`` in body must be of type string``, ``default.a``). Defaults under an
    object's ``metadata``, ``apiVersion`` and ``kind`` are left alone, and
    ``additionalProperties`` are not followed (defaults are forbidden there)."""
    causes: list[Cause] = []
    _default_errors(schema, path, causes, root=True)
    return causes


def _default_errors(schema: Any, path: str, causes: list[Cause], root: bool = False) -> None:
    if not isinstance(schema, dict):
        return
    value = schema.get("default")
    if value is not None:
        at = f"{path}.default"
        # an embedded resource keeps its apiVersion, kind and metadata (pruning.Prune)
        embedded = schema.get("x-kubernetes-embedded-resource") is True
        if _prune(copy.deepcopy(value), schema, root=embedded) != value:
            causes.append(
                (
                    "FieldValueInvalid",
                    at,
                    f"{at}: Invalid value: {_dup(value)}: must not have unknown fields",
                )
            )
        found: list[Cause] = []
        _validate(value, schema, "", found)
        for reason, name, message in found:
            if reason == "FieldValueDuplicate":
                continue  # list-type uniqueness is no part of the OpenAPI validation
            where = f"{at}.{name.removeprefix('.')}" if name not in ("", ".") else at
            causes.append((reason, where, f"{where}: {message[len(name) + 2 :]}"))
    items = schema.get("items")
    if items is not None:
        _default_errors(items, f"{path}.items", causes)
    props = schema.get("properties")
    if isinstance(props, dict):
        for k, sub in props.items():
            if root and k in _ROOT_KEEP:
                continue
            _default_errors(sub, f"{path}.properties[{k}]", causes)


def check_schema(schema: Any, path: str = "openAPIV3Schema", level: str = "root") -> str | None:
    """Why ``schema`` is not a usable structural schema (``path: reason``, the reason as
    kube-apiserver words it), or None. ``level`` is where the schema sits: ``root``, an
    object's ``field`` or an array's ``item`` (apiextensions' structural rules differ)."""
    if not isinstance(schema, dict):
        return f"{path}: Invalid value: must be an object"
    why = _structural(schema, path, level)
    if why:
        return why
    props = schema.get("properties")
    if props is not None:
        if not isinstance(props, dict):
            return f"{path}.properties: Invalid value: must be an object"
        for k, sub in props.items():
            why = check_schema(sub, f"{path}.properties[{k}]", "field")
            if why:
                return why
    items = schema.get("items")
    if items is not None:
        why = check_schema(items, f"{path}.items", "item")
        if why:
            return why
    additional = schema.get("additionalProperties")
    if additional is not None and not isinstance(additional, bool):
        why = check_schema(additional, f"{path}.additionalProperties", "field")
        if why:
            return why
    required = schema.get("required")
    if required is not None and not (
        isinstance(required, list) and all(isinstance(r, str) for r in required)
    ):
        return f"{path}.required: Invalid value: must be a list of strings"
    enum = schema.get("enum")
    if enum is not None and not isinstance(enum, list):
        return f"{path}.enum: Invalid value: must be a list"
    pattern = schema.get("pattern")
    if pattern is not None:
        if not isinstance(pattern, str):
            return f"{path}.pattern: Invalid value: must be a valid regular expression"
        try:
            compile_go(pattern)
        except GoRegexpError as e:
            # apiextensions' validateValueValidation: regexp.Compile
            return (
                f"{path}.pattern: Invalid value: {go_string(pattern)}: must be a valid regular "
                f"expression, but isn't: {e}"
            )
    for bound in (
        "minimum",
        "maximum",
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
        "minProperties",
        "maxProperties",
    ):
        v = schema.get(bound)
        if v is not None and (not isinstance(v, int | float) or isinstance(v, bool)):
            return f"{path}.{bound}: Invalid value: must be a number"
    return None


#: apiextensions' words for a schema node without a type, by where it sits
_NO_TYPE = {
    "root": "must not be empty at the root",
    "item": "must not be empty for specified array items",
    "field": "must not be empty for specified object fields",
}


def _structural(schema: dict[str, Any], path: str, level: str) -> str | None:
    """The structural-schema rule ``schema`` breaks first (apiextensions-apiserver's
    ``validateStructuralInvariants`` and the CRD schema validation), or None: a v1 CRD
    must have a structural schema, so kube-apiserver refuses the CRD."""
    t = schema.get("type") or ""
    if schema.get("properties") and schema.get("additionalProperties") is not None:
        return (
            f"{path}.additionalProperties: Forbidden: additionalProperties and properties "
            "are mutual exclusive"
        )
    if schema.get("x-kubernetes-embedded-resource") and t != "object":
        return (
            f"{path}.type: Invalid value: {_show(t)}: must be object if "
            "x-kubernetes-embedded-resource is true"
            if t
            else f"{path}.type: Required value: must be object if "
            "x-kubernetes-embedded-resource is true"
        )
    if (
        not t
        and not schema.get("x-kubernetes-int-or-string")
        and not schema.get("x-kubernetes-preserve-unknown-fields")
    ):
        return f"{path}.type: Required value: {_NO_TYPE[level]}"
    if level == "root" and t and t != "object":
        return f"{path}.type: Invalid value: {_show(t)}: must be object at the root"
    return None
