"""The JSON types of a built-in kind's fields, refused as kube-apiserver's decoder refuses them.

kube-apiserver decodes a built-in object into its Go type (with ``sigs.k8s.io/json``,
a fork of Go's ``encoding/json``) before anything else looks at it: a ConfigMap whose
``data`` holds a number, a Deployment whose ``replicas`` is ``"3"``, a container whose
``args`` are numbers is a 400 (reason BadRequest) with the decoder's words::

    ConfigMap in version "v1" cannot be handled as a ConfigMap: json: cannot unmarshal
    number into Go struct field ConfigMap.data of type string

The error is Go's ``UnmarshalTypeError``: the JSON value (``string``, ``number``,
``number 1.5`` for a number an integer field cannot hold, ``bool``, ``array``,
``object``), the Go struct holding the field and the JSON names of the fields from the
root (list indices and map keys left out), and the field's Go type as ``reflect`` prints
it (``int32``, ``map[string]string``, ``[]v1.Container``, ``v1.PodTemplateSpec``). Go
keeps the first such error and goes on; ``null`` is accepted anywhere. Types that decode
themselves stop at their error, which then wins: ``IntOrString`` (a string, or a JSON
integer decoded as ``int32``), ``Quantity`` (a string or a number; apimachinery's parse
errors), ``Time``/``MicroTime``/``Duration`` (a JSON string, decoded as Go's ``string``).
``[]byte`` fields take base64 strings (Go's ``illegal base64 data at input byte N``);
``RawExtension``, ``FieldsV1`` and types without a Go struct take anything.

The fields, their Go types and JSON names come from the protobuf schema of the built-in
kinds (`mcruntime.envtest._protobuf.schema`, generated from Kubernetes' Go sources); each
kind's checker is compiled once and walks only what a body holds.
"""

from __future__ import annotations

import re
import threading
from functools import cache
from typing import Any

from mcruntime.envtest import _quantity
from mcruntime.envtest._protobuf import message_name, schema

__all__ = ["type_error"]

_QUANTITY = "k8s.io.apimachinery.pkg.api.resource.Quantity"
_INT_OR_STRING = "k8s.io.apimachinery.pkg.util.intstr.IntOrString"
_META = "k8s.io.apimachinery.pkg.apis.meta.v1."
#: types whose ``UnmarshalJSON`` decodes a JSON string (``json.Unmarshal(b, &str)``)
_TEXT = frozenset({_META + "Time", _META + "MicroTime", _META + "Duration"})
#: types whose ``UnmarshalJSON`` keeps any JSON value
_ANY = frozenset(
    {
        "k8s.io.apimachinery.pkg.runtime.RawExtension",
        "k8s.io.apimachinery.pkg.runtime.Unknown",
        _META + "FieldsV1",
    }
)
_INT_RANGES = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}
#: the Go type of a scalar protobuf field whose Go type the schema does not say
_SCALAR_GO_TYPES = {"s": "string", "i": "int64", "b": "bool", "y": "[]uint8"}
_BASE64 = re.compile(r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?")
_BASE64_ALPHABET = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")

# A node says what a value must be: (kind, Go type, detail). Kinds: "s" string, "i"
# integer (detail: its range), "b" bool, "y" []byte, "m" struct (detail: (Go struct
# name, fields by JSON name)), "l" list and "d" map (detail: the item's node), "q"
# Quantity, "n" IntOrString, "t" a JSON string decoded by the type itself, "*" anything.
_Node = tuple[str, str, Any]
_ANYTHING: _Node = ("*", "", None)
#: the fields of each struct message compiled so far (nested ones share them)
_FIELDS: dict[str, dict[str, _Node]] = {}
_COMPILING = threading.Lock()


class _Stop(Exception):
    """An error that ends the decoding at once (a type's own ``UnmarshalJSON`` failed)."""


def type_error(obj: dict[str, Any], api_version: str, kind: str) -> str | None:
    """The error kube-apiserver's decoder reports for ``obj`` (a built-in ``kind``), without
    the ``cannot be handled as`` prefix; None when every field has a JSON type its Go
    field takes (or the kind has no schema)."""
    node = _kind_node(api_version, kind)
    if node is None:
        return None
    errors: list[str] = []
    try:
        _struct(obj, node[2], (), errors)
    except _Stop as e:
        return str(e)
    return errors[0] if errors else None


@cache
def _kind_node(api_version: str, kind: str) -> _Node | None:
    message = message_name(api_version, kind)
    if message not in schema():
        return None
    with _COMPILING:  # nested messages are compiled once, for every kind holding them
        return _message_node(message, "")


def _message_node(message: str, go_type: str) -> _Node:
    if message == _QUANTITY:
        return ("q", go_type, None)
    if message == _INT_OR_STRING:
        return ("n", go_type, None)
    if message in _TEXT:
        return ("t", go_type, None)
    specs = schema().get(message)
    if message in _ANY or specs is None or not any(s[6] for s in specs.values()):
        return _ANYTHING  # decoded by itself, or no Go struct (``ExtraValue``, ``Verbs``)
    fields = _FIELDS.get(message)
    if fields is None:
        fields = _FIELDS[message] = {}  # registered first: a message may hold itself
        _fill(fields, message)
    return ("m", go_type, (message.rpartition(".")[2], fields))


def _fill(fields: dict[str, _Node], message: str) -> None:
    """``fields`` of ``message`` by JSON name; an embedded struct's sit beside its own."""
    for spec in schema()[message].values():
        name, typ, label, inline, go_type, item_type = (
            spec[0],
            spec[1],
            spec[2],
            spec[5],
            spec[6],
            spec[7],
        )
        if not go_type:
            continue  # no Go field: not in the JSON
        if inline and label == 0 and typ in schema():
            _fill(fields, typ)  # Go reports the outer struct for its promoted fields
            continue
        if label:
            item = _leaf(typ, item_type or _SCALAR_GO_TYPES.get(typ, ""))
            fields[name] = ("l" if label == 1 else "d", go_type, item)
        else:
            fields[name] = _leaf(typ, go_type)


def _leaf(typ: str, go_type: str) -> _Node:
    if typ == "i":
        base = go_type if go_type in _INT_RANGES else "int64"
        return ("i", go_type, _INT_RANGES[base])
    if typ in ("s", "b", "y"):
        return (typ, go_type, None)
    if typ not in schema():
        return _ANYTHING  # a message of a group envtest does not serve
    return _message_node(typ, go_type)


#: what Go's decoder calls a JSON value in its errors (Go's own words, not JSON's: ``bool``)
_WORDS = {str: "string", bool: "bool", dict: "object", list: "array"}


def _word(value: Any) -> str:
    return _WORDS.get(type(value), "number")


def _message(word: str, path: tuple[str, str], go_type: str) -> str:
    struct, field = path
    return f"json: cannot unmarshal {word} into Go struct field {struct}.{field} of type {go_type}"


def _struct(obj: dict[str, Any], detail: Any, path: tuple[str, ...], errors: list[str]) -> None:
    struct, fields = detail
    for key, value in obj.items():
        node = fields.get(key)
        if node is None or value is None:
            continue  # an unknown field (dropped later), or null: no error
        where = (*path, key)
        kind = node[0]
        if kind == "s":
            if value.__class__ is not str:
                errors.append(_message(_word(value), (struct, ".".join(where)), node[1]))
        elif kind == "m":
            if isinstance(value, dict):
                _struct(value, node[2], where, errors)
            else:
                errors.append(_message(_word(value), (struct, ".".join(where)), node[1]))
        else:
            _value(value, node, struct, where, errors)


def _value(value: Any, node: _Node, struct: str, where: tuple[str, ...], errors: list[str]) -> None:
    """Check ``value`` against ``node``, at field path ``where`` of Go struct ``struct``."""
    kind, go_type, detail = node
    if value is None or kind == "*":
        return
    if kind == "s":
        ok = isinstance(value, str)
    elif kind == "i":
        if value.__class__ is int:
            ok = detail[0] <= value <= detail[1]
            if not ok:
                errors.append(_message(f"number {value}", (struct, ".".join(where)), go_type))
                return
        elif isinstance(value, float):
            errors.append(_message(f"number {value!r}", (struct, ".".join(where)), go_type))
            return
        else:
            ok = False
    elif kind == "b":
        ok = isinstance(value, bool)
    elif kind == "m":
        if isinstance(value, dict):
            _struct(value, detail, where, errors)
            return
        ok = False
    elif kind in ("l", "d"):
        items = (
            value
            if kind == "l" and isinstance(value, list)
            else value.values()
            if kind == "d" and isinstance(value, dict)
            else None
        )
        if items is not None:
            for item in items:
                if item is not None:
                    _value(item, detail, struct, where, errors)
            return
        ok = False
    elif kind == "y":
        if isinstance(value, str):
            bad = _base64_error(value)
            if bad is not None:
                errors.append(bad)  # no struct or field: Go's base64 error as it is
            return
        if isinstance(value, list):  # a JSON array of bytes decodes too
            _value(value, ("l", go_type, ("i", "uint8", (0, 255))), struct, where, errors)
            return
        ok = False
    else:
        _self_decoded(value, kind, struct, where)
        return
    if not ok:
        errors.append(_message(_word(value), (struct, ".".join(where)), go_type))


def _self_decoded(value: Any, kind: str, struct: str, where: tuple[str, ...]) -> None:
    """A type with its own ``UnmarshalJSON``: its error ends the decoding (`_Stop`)."""
    if kind == "q":
        problem = _quantity.parse_error(value)
        if problem is not None:
            raise _Stop(problem)
        return
    if kind == "n":  # IntOrString: a JSON string, else json.Unmarshal into its int32
        if isinstance(value, str):
            return
        target, (low, high) = "int32", _INT_RANGES["int32"]
        if value.__class__ is int:
            if low <= value <= high:
                return
            word = f"number {value}"
        elif isinstance(value, float):
            word = f"number {value!r}"
        else:
            word = _word(value)
    else:  # Time, MicroTime, Duration: json.Unmarshal into a string first
        if isinstance(value, str):
            return
        target, word = "string", _word(value)
    raise _Stop(_message(word, (struct, ".".join(where)), target))


def _base64_error(text: str) -> str | None:
    """Go's ``base64.StdEncoding.Decode`` error for ``text`` (None when it decodes): the
    offset of the first byte it cannot take. Line breaks are skipped, as Go skips them."""
    if _BASE64.fullmatch(text) is not None:
        return None
    src = text.encode()
    si, end = 0, len(src)
    while si < end:
        j = 0
        while j < 4:
            if si == end:
                if j == 0:
                    return None
                return _corrupt(si - j)  # a quantum cut short (padding is required)
            c = src[si]
            si += 1
            if c in _BASE64_ALPHABET:
                j += 1
                continue
            if c in b"\r\n":
                continue
            if c != ord("=") or j < 2:
                return _corrupt(si - 1)
            if j == 2:  # a second "=" must follow, line breaks aside
                while si < end and src[si] in b"\r\n":
                    si += 1
                if si == end:
                    return _corrupt(end)
                if src[si] != ord("="):
                    return _corrupt(si - 1)
                si += 1
            while si < end and src[si] in b"\r\n":
                si += 1
            return _corrupt(si) if si < end else None  # anything after the padding
    return None


def _corrupt(offset: int) -> str:
    return f"illegal base64 data at input byte {offset}"
