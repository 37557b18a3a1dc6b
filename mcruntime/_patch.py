"""JSON merge patch (RFC 7386), JSON patch (RFC 6902) and strategic merge patch.

One implementation serves the embedded API server (PATCH requests) and the
client (computing merge patches). Objects are plain JSON values (dict, list,
str, int, float, bool, None).

Sharing: inputs are never mutated. Results are built from new containers along
every changed path, but unchanged sub-trees of ``target`` and values taken from
the patch are shared with the result, not copied. Treat results as immutable or
`copy_json()` them before mutating in place.

Error messages name the operation and path but never include values, which may
be secret data.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

__all__ = [
    "DEFAULT_MERGE_KEYS",
    "MergeKeyMissing",
    "PatchError",
    "copy_json",
    "create_json_patch",
    "create_merge_patch",
    "json_equal",
    "json_patch",
    "merge_keys_for",
    "merge_patch",
    "strategic_merge_patch",
]


class PatchError(ValueError):
    """A patch that is malformed or cannot be applied to the target."""


class MergeKeyMissing(PatchError):
    """A strategic merge patch's list item (``item``) without the merge key (``key``) of the
    list it merges into: the failure Kubernetes' ``strategicpatch`` reports as
    ``mergepatch.ErrNoMergeKey``, which kube-apiserver passes on as a 500."""

    def __init__(self, message: str, item: dict[str, Any], key: str) -> None:
        super().__init__(message)
        self.item = item
        self.key = key


_MISSING: Final = object()


def copy_json(value: Any) -> Any:
    """Deep copy of a JSON value (dicts and lists are copied, scalars shared); fast."""
    if isinstance(value, dict):
        return {k: copy_json(v) if isinstance(v, dict | list) else v for k, v in value.items()}
    if isinstance(value, list):
        return [copy_json(v) if isinstance(v, dict | list) else v for v in value]
    return value


def json_equal(a: Any, b: Any) -> bool:
    """JSON equality: numbers by value, booleans distinct from numbers, objects unordered."""
    if a is b:
        return True
    ta, tb = type(a), type(b)
    if ta is bool or tb is bool:
        return ta is tb and a == b
    if ta is dict:
        if tb is not dict or len(a) != len(b):
            return False
        for k, v in a.items():
            other = b.get(k, _MISSING)
            if other is _MISSING or not json_equal(v, other):
                return False
        return True
    if ta is list:
        return tb is list and len(a) == len(b) and all(map(json_equal, a, b))
    if isinstance(a, int | float):
        return isinstance(b, int | float) and a == b
    return ta is tb and a == b


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


# --- RFC 7386 ----------------------------------------------------------------------


def merge_patch(target: Any, patch: Any) -> Any:
    """Apply an RFC 7386 JSON merge patch: objects merge recursively, null deletes, the rest replaces."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            result.pop(k, None)
        elif isinstance(v, dict):
            result[k] = merge_patch(result.get(k), v)
        else:
            result[k] = v
    return result


def create_merge_patch(original: Any, modified: Any) -> Any:
    """The RFC 7386 merge patch that turns ``original`` into ``modified`` (``{}`` if equal).

    Lists are replaced whole, removed keys become null. A merge patch cannot set
    a value to null; such keys are deleted instead.
    """
    if not isinstance(original, dict) or not isinstance(modified, dict):
        return modified
    patch: dict[str, Any] = {}
    for k in original:
        if k not in modified:
            patch[k] = None
    for k, v in modified.items():
        old = original.get(k, _MISSING)
        if old is _MISSING:
            patch[k] = v
        elif isinstance(old, dict) and isinstance(v, dict):
            sub = create_merge_patch(old, v)
            if sub:
                patch[k] = sub
        elif not json_equal(old, v):
            patch[k] = v
    return patch


# --- RFC 6902 ----------------------------------------------------------------------

_OPS: Final = frozenset({"add", "remove", "replace", "move", "copy", "test"})


def _parse_pointer(pointer: Any, member: str) -> list[str]:
    if not isinstance(pointer, str):
        raise PatchError(f"{member!r} must be a JSON pointer string")
    if pointer == "":
        return []
    if pointer[0] != "/":
        raise PatchError(f"{member!r} {pointer!r} is not a JSON pointer (must start with '/')")
    tokens = pointer[1:].split("/")
    if "~" in pointer:
        for i, tok in enumerate(tokens):
            if "~" in tok:
                rest = tok.replace("~0", "").replace("~1", "")
                if "~" in rest:
                    raise PatchError(
                        f"{member!r} {pointer!r}: '~' must be escaped as '~0' ('/' as '~1')"
                    )
                tokens[i] = tok.replace("~1", "/").replace("~0", "~")
    return tokens


def _array_index(token: str, size: int, *, allow_end: bool) -> int:
    if token == "-":
        if allow_end:
            return size
        raise PatchError("'-' (past the end of the array) is only valid for 'add'")
    if not token.isdigit() or not token.isascii() or (len(token) > 1 and token[0] == "0"):
        raise PatchError(f"{token!r} is not a valid array index")
    index = int(token)
    limit = size if allow_end else size - 1
    if index > limit:
        raise PatchError(f"array index {index} is out of bounds (array length {size})")
    return index


class _Document:
    """A document being patched: containers along written paths are copied once."""

    def __init__(self, root: Any) -> None:
        self.root = root
        self._owned: dict[int, Any] = {}

    def _own(self, value: Any) -> Any:
        if id(value) in self._owned:
            return value
        copy = dict(value) if isinstance(value, dict) else list(value)
        self._owned[id(copy)] = copy
        return copy

    def get(self, tokens: list[str]) -> Any:
        cur = self.root
        for depth, tok in enumerate(tokens):
            if isinstance(cur, dict):
                cur = cur.get(tok, _MISSING)
                if cur is _MISSING:
                    raise PatchError(f"path {_pointer(tokens[: depth + 1])!r} does not exist")
            elif isinstance(cur, list):
                cur = cur[_array_index(tok, len(cur), allow_end=False)]
            else:
                raise PatchError(
                    f"path {_pointer(tokens[:depth])!r} is a {_kind(cur)}, not an object or array"
                )
        return cur

    def parent(self, tokens: list[str]) -> Any:
        """The writable (owned) container holding the last token of ``tokens``."""
        if not isinstance(self.root, dict | list):
            raise PatchError(f"the document is a {_kind(self.root)}, not an object or array")
        self.root = cur = self._own(self.root)
        for depth, tok in enumerate(tokens[:-1]):
            if isinstance(cur, dict):
                child = cur.get(tok, _MISSING)
                if child is _MISSING:
                    raise PatchError(f"path {_pointer(tokens[: depth + 1])!r} does not exist")
                key: Any = tok
            else:
                key = _array_index(tok, len(cur), allow_end=False)
                child = cur[key]
            if not isinstance(child, dict | list):
                raise PatchError(
                    f"path {_pointer(tokens[: depth + 1])!r} is a {_kind(child)}, "
                    "not an object or array"
                )
            owned = self._own(child)
            if owned is not child:
                cur[key] = owned
            cur = owned
        return cur

    def add(self, tokens: list[str], value: Any) -> None:
        if not tokens:
            self.root = value
            return
        parent, last = self.parent(tokens), tokens[-1]
        if isinstance(parent, dict):
            parent[last] = value
        else:
            parent.insert(_array_index(last, len(parent), allow_end=True), value)

    def remove(self, tokens: list[str]) -> Any:
        if not tokens:
            raise PatchError("cannot remove the whole document")
        parent, last = self.parent(tokens), tokens[-1]
        if isinstance(parent, dict):
            if last not in parent:
                raise PatchError(f"path {_pointer(tokens)!r} does not exist")
            return parent.pop(last)
        return parent.pop(_array_index(last, len(parent), allow_end=False))

    def replace(self, tokens: list[str], value: Any) -> None:
        if not tokens:
            self.root = value
            return
        parent, last = self.parent(tokens), tokens[-1]
        if isinstance(parent, dict):
            if last not in parent:
                raise PatchError(f"path {_pointer(tokens)!r} does not exist")
            parent[last] = value
        else:
            parent[_array_index(last, len(parent), allow_end=False)] = value


def _pointer(tokens: list[str]) -> str:
    return "".join("/" + t.replace("~", "~0").replace("/", "~1") for t in tokens)


def json_patch(target: Any, operations: list[dict[str, Any]]) -> Any:
    """Apply an RFC 6902 JSON patch (add, remove, replace, move, copy, test) atomically.

    Raises `PatchError` naming the failing operation's index, op and
    path; ``target`` is left untouched either way.
    """
    if not isinstance(operations, list):
        raise PatchError(f"a JSON patch must be an array of operations, got {_kind(operations)}")
    doc = _Document(target)
    for i, operation in enumerate(operations):
        if not isinstance(operation, dict):
            raise PatchError(f"operation {i}: must be an object, got {_kind(operation)}")
        op, path = operation.get("op"), operation.get("path")
        where = f"operation {i} ({op} {path!r})" if isinstance(op, str) else f"operation {i}"
        try:
            if op not in _OPS:
                raise PatchError(
                    f"unknown op {op!r} (expected add, remove, replace, move, copy or test)"
                )
            if "path" not in operation:
                raise PatchError("missing 'path'")
            tokens = _parse_pointer(path, "path")
            if op in ("add", "replace", "test") and "value" not in operation:
                raise PatchError("missing 'value'")
            if op == "add":
                doc.add(tokens, operation["value"])
            elif op == "remove":
                doc.remove(tokens)
            elif op == "replace":
                doc.replace(tokens, operation["value"])
            elif op == "test":
                if not json_equal(doc.get(tokens), operation["value"]):
                    raise PatchError("test failed: the value differs")
            else:
                if "from" not in operation:
                    raise PatchError("missing 'from'")
                source = _parse_pointer(operation["from"], "from")
                if op == "copy":
                    doc.add(tokens, copy_json(doc.get(source)))
                elif source != tokens:
                    if tokens[: len(source)] == source:
                        raise PatchError("cannot move a value into one of its own children")
                    doc.get(source)
                    doc.add(tokens, doc.remove(source))
                else:
                    doc.get(source)
        except PatchError as exc:
            raise PatchError(f"{where}: {exc}") from None
    return doc.root


# --- strategic merge patch -----------------------------------------------------------

#: Merge keys of built-in Kubernetes list fields. A key is a list field's name,
#: or ``parent.field`` to scope it to the enclosing field; the value is the merge
#: key of the list's objects, or "" for a list of scalars merged as a set. Lists
#: not named here are replaced whole.
DEFAULT_MERGE_KEYS: Final[Mapping[str, str]] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "containers.ports": "containerPort",
    "initContainers.ports": "containerPort",
    "ephemeralContainers.ports": "containerPort",
    "spec.ports": "port",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
    "resourceClaims": "name",
    "schedulingGates": "name",
    "podIPs": "ip",
    "hostIPs": "ip",
    "conditions": "type",
    "status.addresses": "type",
    "ownerReferences": "uid",
    "finalizers": "",
    "podCIDRs": "",
    "secrets": "name",
    "webhooks": "name",
}

_BUILTIN_KINDS: Final = frozenset(
    {
        "Binding", "ComponentStatus", "ConfigMap", "Endpoints", "Event", "LimitRange",
        "Namespace", "Node", "PersistentVolume", "PersistentVolumeClaim", "Pod",
        "PodTemplate", "ReplicationController", "ResourceQuota", "Secret", "Service",
        "ServiceAccount", "ControllerRevision", "DaemonSet", "Deployment", "ReplicaSet",
        "StatefulSet", "HorizontalPodAutoscaler", "CronJob", "Job", "Lease", "EndpointSlice",
        "Ingress", "IngressClass", "NetworkPolicy", "PodDisruptionBudget", "ClusterRole",
        "ClusterRoleBinding", "Role", "RoleBinding", "PriorityClass", "CSIDriver", "CSINode",
        "CSIStorageCapacity", "StorageClass", "VolumeAttachment", "RuntimeClass",
        "CustomResourceDefinition", "APIService", "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration", "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding", "CertificateSigningRequest", "FlowSchema",
        "PriorityLevelConfiguration",
    }
)  # fmt: skip


def create_json_patch(original: Any, modified: Any) -> list[dict[str, Any]]:
    """The RFC 6902 operations that turn ``original`` into ``modified`` (for `json_patch()`).

    Objects are compared member by member; lists of equal length element by
    element, other lists are replaced whole (simple, and always correct). An
    unchanged document gives ``[]``.
    """
    ops: list[dict[str, Any]] = []
    _diff(original, modified, [], ops)
    return ops


def _diff(a: Any, b: Any, path: list[str], ops: list[dict[str, Any]]) -> None:
    if json_equal(a, b):
        return
    if type(a) is dict and type(b) is dict:
        for k in a:
            if k not in b:
                ops.append({"op": "remove", "path": _pointer([*path, k])})
        for k, v in b.items():
            if k in a:
                _diff(a[k], v, [*path, k], ops)
            else:
                ops.append({"op": "add", "path": _pointer([*path, k]), "value": v})
        return
    if type(a) is list and type(b) is list and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _diff(x, y, [*path, str(i)], ops)
        return
    ops.append({"op": "replace", "path": _pointer(path), "value": b})


#: a ServiceAccount's ``imagePullSecrets`` has no patch strategy (a Pod's merges by name):
#: a strategic merge patch replaces it
_SERVICE_ACCOUNT_MERGE_KEYS: Final[Mapping[str, str]] = {
    k: v for k, v in DEFAULT_MERGE_KEYS.items() if k != "imagePullSecrets"
}


def merge_keys_for(kind: str) -> Mapping[str, str] | None:
    """Merge keys for a built-in kind, or None: Kubernetes refuses strategic merge
    patches for custom resources (415), so callers should too."""
    if kind == "ServiceAccount":
        return _SERVICE_ACCOUNT_MERGE_KEYS
    return DEFAULT_MERGE_KEYS if kind in _BUILTIN_KINDS else None


_DIRECTIVE: Final = "$patch"
_RETAIN_KEYS: Final = "$retainKeys"
_SET_ORDER: Final = "$setElementOrder/"
_DELETE_FROM: Final = "$deleteFromPrimitiveList/"


def strategic_merge_patch(
    target: Any, patch: Any, merge_keys: Mapping[str, str] | None = None
) -> Any:
    """Apply a Kubernetes strategic merge patch to ``target``.

    Maps merge recursively and null deletes. A list whose field has a merge key
    (``merge_keys``, default `DEFAULT_MERGE_KEYS`) merges element-wise by
    that key; a list of scalars with merge strategy ("") merges as a set; other
    lists are replaced. Supports the ``$patch`` (replace, delete),
    ``$retainKeys``, ``$setElementOrder/<field>`` and
    ``$deleteFromPrimitiveList/<field>`` directives. Merged lists are ordered as
    Kubernetes orders them: patch items in patch order, interleaved with
    server-only items by their server order (new items come before unrelated
    server items unless ``$setElementOrder`` says otherwise).
    """
    if not isinstance(patch, dict):
        raise PatchError(f"a strategic merge patch must be an object, got {_kind(patch)}")
    if target is None:
        target = {}
    if not isinstance(target, dict):
        raise PatchError(f"cannot strategic-merge into a {_kind(target)}")
    keys = DEFAULT_MERGE_KEYS if merge_keys is None else merge_keys
    return _Strategic(keys).merge_map(target, patch, "", "")


def _scalar_key(value: Any) -> Any:
    """Hashable identity of a list item or merge-key value (True and 1 stay distinct)."""
    if isinstance(value, dict | list):
        return (2, id(value))
    return (type(value) is bool, value)


class _Strategic:
    def __init__(self, merge_keys: Mapping[str, str]) -> None:
        self.merge_keys = merge_keys

    def strategy(self, parent: str, field: str) -> str | None:
        """Merge key for list ``field`` inside ``parent`` ("" = set of scalars; None = replace)."""
        scoped = self.merge_keys.get(f"{parent}.{field}") if parent else None
        return scoped if scoped is not None else self.merge_keys.get(field)

    def merge_map(
        self, original: dict[str, Any], patch: dict[str, Any], field: str, where: str
    ) -> dict[str, Any]:
        if _DIRECTIVE in patch:
            directive = patch[_DIRECTIVE]
            if directive == "replace":
                rest = {k: v for k, v in patch.items() if k != _DIRECTIVE}
                return self.merge_map({}, rest, field, where)
            if directive == "delete":
                return {}
            raise PatchError(f"{where or '<root>'}: invalid $patch directive {directive!r}")
        result = dict(original)
        if _RETAIN_KEYS in patch:
            self._retain_keys(result, patch, where)
        ordered: set[str] = set()
        for k, v in patch.items():
            if k.startswith(_SET_ORDER):
                ordered.add(self._set_element_order(result, patch, k, v, field, where))
        for k, v in patch.items():
            if k in ordered or k == _RETAIN_KEYS or k.startswith(_SET_ORDER):
                continue
            if k.startswith(_DELETE_FROM):
                self._delete_from_list(result, k, v, where)
                continue
            if v is None:
                result.pop(k, None)
                continue
            sub = f"{where}.{k}" if where else k
            cur = result.get(k, _MISSING)
            if isinstance(v, dict) and isinstance(cur, dict):
                result[k] = self.merge_map(cur, v, k, sub)
            elif isinstance(v, list) and isinstance(cur, list):
                result[k] = self.merge_list(cur, v, field, k, sub)
            else:
                value = _as_is(v)
                if value is _MISSING:
                    result.pop(k, None)
                else:
                    result[k] = value
        return result

    def _retain_keys(self, result: dict[str, Any], patch: dict[str, Any], where: str) -> None:
        retain = patch[_RETAIN_KEYS]
        if not isinstance(retain, list) or not all(isinstance(k, str) for k in retain):
            raise PatchError(f"{where or '<root>'}: $retainKeys must be a list of field names")
        allowed = set(retain)
        for k, v in patch.items():
            if v is None or k.startswith("$") or k in allowed:
                continue
            raise PatchError(f"{where or '<root>'}: field {k!r} is set but not in $retainKeys")
        for k in [k for k in result if k not in allowed]:
            del result[k]

    def _delete_from_list(self, result: dict[str, Any], key: str, value: Any, where: str) -> None:
        name = key[len(_DELETE_FROM) :]
        if not name or not isinstance(value, list):
            raise PatchError(f"{where or '<root>'}: {key} must name a field and hold a list")
        current = result.get(name)
        if isinstance(current, list):
            doomed = {_scalar_key(v) for v in value if not isinstance(v, dict | list)}
            result[name] = [
                x for x in current if isinstance(x, dict | list) or _scalar_key(x) not in doomed
            ]

    def _set_element_order(
        self,
        result: dict[str, Any],
        patch: dict[str, Any],
        key: str,
        order: Any,
        field: str,
        where: str,
    ) -> str:
        name = key[len(_SET_ORDER) :]
        if not name or not isinstance(order, list):
            raise PatchError(f"{where or '<root>'}: {key} must name a field and hold a list")
        sub = f"{where}.{name}" if where else name
        mkey = self.strategy(field, name) or None
        if patch.get(name, _MISSING) is None:
            return ""
        original = result.get(name)
        patch_list = patch.get(name)
        if original is not None and not isinstance(original, list):
            raise PatchError(f"{sub}: $setElementOrder applies to a list, found {_kind(original)}")
        if patch_list is not None and not isinstance(patch_list, list):
            raise PatchError(
                f"{sub}: $setElementOrder applies to a list, found {_kind(patch_list)}"
            )
        if mkey and not all(isinstance(o, dict) and mkey in o for o in order):
            raise PatchError(f"{sub}: every $setElementOrder item needs the merge key {mkey!r}")
        server = original or []
        if patch_list is not None and original is None:
            # a list the target lacks is the patch's, as it is; it must still be ordered
            merged = _as_is(patch_list)
            for item in merged:
                if mkey and isinstance(item, dict) and mkey not in item:
                    raise MergeKeyMissing(f"{sub}: element lacks merge key {mkey!r}", item, mkey)
            self._check_order(patch_list, order, mkey, sub)
        elif patch_list is not None:
            self._check_order(patch_list, order, mkey, sub)
            if mkey and all(isinstance(x, dict) for x in (*server, *patch_list)):
                merged, kept, _ = self._merge_objects(server, patch_list, name, mkey, sub)
                if kept is not None:
                    # Kubernetes edits the live list in place: deleted items shift it
                    # left and new items fill the freed tail; that is the order it uses.
                    server = merged[: len(server)]
            else:
                merged = self.merge_list(server, patch_list, field, name, sub)
        elif original is not None:
            merged = original
        else:
            return name
        ident = self._identity(mkey)
        wanted = {ident(o) for o in order}
        in_patch = [m for m in merged if ident(m) in wanted]
        server_only = [m for m in merged if ident(m) not in wanted]
        result[name] = _order(in_patch, server_only, order, server, ident)
        return name

    def _check_order(
        self, patch_list: list[Any], order: list[Any], mkey: str | None, where: str
    ) -> None:
        ident = self._identity(mkey)
        items = [p for p in patch_list if not (isinstance(p, dict) and _DIRECTIVE in p)]
        j = 0
        for item in items:
            want = ident(item)
            while j < len(order) and ident(order[j]) != want:
                j += 1
            if j == len(order):
                raise PatchError(
                    f"{where}: the patch list's order does not match its $setElementOrder list"
                )
            j += 1

    @staticmethod
    def _identity(mkey: str | None) -> Any:
        if mkey:
            return lambda item: _scalar_key(item.get(mkey)) if isinstance(item, dict) else None
        return lambda item: _scalar_key(item) if not isinstance(item, dict | list) else id(item)

    def merge_list(
        self,
        original: list[Any],
        patch: list[Any],
        parent: str,
        field: str,
        where: str,
    ) -> list[Any]:
        """``patch`` merged into the list ``original`` the target holds (an item without
        the merge key is `MergeKeyMissing`)."""
        mkey = self.strategy(parent, field)
        if mkey is None:
            return patch
        if not original and not patch:
            return []
        maps = [isinstance(x, dict) for x in original] + [isinstance(x, dict) for x in patch]
        if any(isinstance(x, list) for x in original) or any(isinstance(x, list) for x in patch):
            raise PatchError(f"{where}: lists of lists cannot be merged")
        if all(maps):
            if not mkey:
                raise PatchError(f"{where}: cannot merge a list of objects without a merge key")
            merged, server, plain = self._merge_objects(original, patch, field, mkey, where)
            if server is None:
                return merged
            ident = self._identity(mkey)
            in_patch = {ident(p) for p in plain}
            return _order(
                [m for m in merged if ident(m) in in_patch],
                [m for m in merged if ident(m) not in in_patch],
                plain,
                server,
                ident,
            )
        if any(maps):
            raise PatchError(f"{where}: list elements must all be objects or all be scalars")
        ident = self._identity(None)
        seen: set[Any] = set()
        merged = []
        for x in (*original, *patch):
            key = ident(x)
            if key not in seen:
                seen.add(key)
                merged.append(x)
        in_patch = {ident(p) for p in patch}
        return _order(
            [m for m in merged if ident(m) in in_patch],
            [m for m in merged if ident(m) not in in_patch],
            patch,
            original,
            ident,
        )

    def _merge_objects(
        self,
        original: list[Any],
        patch: list[Any],
        field: str,
        mkey: str,
        where: str,
    ) -> tuple[list[Any], list[Any] | None, list[dict[str, Any]]]:
        """Unordered merge by key: (server items then new items, server after deletes or
        None when the patch replaced the list, patch items without directives)."""

        def lacking(el: dict[str, Any], what: str) -> PatchError:
            return MergeKeyMissing(f"{where}: {what} lacks merge key {mkey!r}", el, mkey)

        plain: list[dict[str, Any]] = []
        replace = False
        server = original
        for el in patch:
            if _DIRECTIVE not in el:
                plain.append(el)
                continue
            directive = el[_DIRECTIVE]
            if directive == "delete":
                if mkey not in el:
                    raise lacking(el, "$patch: delete element")
                doomed = _scalar_key(el[mkey])
                server = [o for o in server if mkey not in o or _scalar_key(o[mkey]) != doomed]
            elif directive == "replace":
                replace = True
            elif directive == "merge":
                raise PatchError(f"{where}: $patch: merge is not supported in lists")
            else:
                raise PatchError(f"{where}: invalid $patch directive {directive!r}")
        if replace:
            return [self.merge_map({}, el, field, f"{where}[{mkey}]") for el in plain], None, plain
        merged = list(server)
        index: dict[Any, int] = {}
        for i, o in enumerate(merged):
            if mkey in o:
                index.setdefault(_scalar_key(o[mkey]), i)
        for el in plain:
            if mkey not in el:
                raise lacking(el, "element")
            key = _scalar_key(el[mkey])
            sub = f"{where}[{mkey}={el[mkey]}]"
            i = index.get(key, -1)
            if i >= 0:
                merged[i] = self.merge_map(merged[i], el, field, sub)
            else:
                index[key] = len(merged)
                merged.append(self.merge_map({}, el, field, sub))
        return merged, server, plain


def _as_is(value: Any) -> Any:
    """A patch value for a field the target lacks (or holds as another JSON type), taken
    as Kubernetes takes it: without nulls in objects and without the objects holding a
    ``$patch`` directive (apimachinery's ``discardNullValuesFromPatch`` and
    ``removeDirectives``), merge keys unchecked: validation judges the result.
    `_MISSING` when ``value`` itself holds ``$patch``."""
    if isinstance(value, dict):
        if value.get(_DIRECTIVE) is not None:
            return _MISSING
        out: dict[str, Any] = {}
        for k, v in value.items():
            if v is not None and (kept := _as_is(v)) is not _MISSING:
                out[k] = kept
        return out
    if isinstance(value, list):
        return [kept for kept in map(_as_is, value) if kept is not _MISSING]
    return value


def _order(
    in_patch: list[Any],
    server_only: list[Any],
    patch_order: list[Any],
    server_order: list[Any],
    ident: Any,
) -> list[Any]:
    """Kubernetes' element order: patch items by patch order, server-only items by
    server order, interleaved where both are known to the server."""
    if not server_only:
        positions = _positions(patch_order, ident)
        return sorted(in_patch, key=lambda x: positions.get(ident(x), len(positions)))
    if not in_patch:
        return server_only
    positions = _positions(patch_order, ident)
    right = sorted(in_patch, key=lambda x: positions.get(ident(x), len(positions)))
    server_pos = _positions(server_order, ident)
    out: list[Any] = []
    i = j = 0
    while i < len(server_only) and j < len(right):
        li = server_pos.get(ident(server_only[i]), -1)
        ri = server_pos.get(ident(right[j]), -1)
        if li >= 0 and ri >= 0 and li < ri:
            out.append(server_only[i])
            i += 1
        else:
            out.append(right[j])
            j += 1
    out.extend(server_only[i:])
    out.extend(right[j:])
    return out


def _positions(items: list[Any], ident: Any) -> dict[Any, int]:
    positions: dict[Any, int] = {}
    for i, item in enumerate(items):
        positions.setdefault(ident(item), i)
    return positions
