"""Kinds: ``GroupVersionKind``, naming a kind (``kind_of``) and the REST mapping of a kind."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeAlias
from urllib.parse import quote

from mcruntime.client._builtin_kinds import MODEL_KINDS

__all__ = ["GroupVersionKind", "KindLike", "RESTMapping", "kind_of", "is_model_class"]

_VERSION = re.compile(r"^v\d+[a-z0-9]*$")
_KIND = re.compile(r"^[A-Za-z][A-Za-z0-9]*$")
_GROUP = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_MODEL_PREFIX = re.compile(r"^(?:[A-Z][a-z0-9]*?)*?V\d+(?:alpha\d+|beta\d+)?(?=[A-Z])")
#: the version at the end of a model class's prefix (``V1``, ``V1beta1``; after a group's name)
_MODEL_VERSION = re.compile(r"V\d+(?:alpha\d+|beta\d+)?$")
_FORMS = "'v1/ConfigMap', 'apps/v1/Deployment' or 'example.com/v1/Widget'"


class GroupVersionKind(NamedTuple):
    """A kind: ``group`` ("" for the core group), ``version`` and ``kind``."""

    group: str
    version: str
    kind: str

    @property
    def api_version(self) -> str:
        """The ``apiVersion`` of objects of this kind: ``v1`` or ``apps/v1``."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @classmethod
    def parse(cls, text: str) -> GroupVersionKind:
        """Parse ``v1/ConfigMap``, ``apps/v1/Deployment`` or ``example.com/v1/Widget``."""
        parts = text.strip().split("/") if isinstance(text, str) else []
        if len(parts) == 2:
            group, (version, kind) = "", parts
        elif len(parts) == 3:
            group, version, kind = parts
        else:
            raise ValueError(_bad_kind(text))
        if not (
            _VERSION.match(version) and _KIND.match(kind) and (not group or _GROUP.match(group))
        ):
            raise ValueError(_bad_kind(text))
        if kind[0].islower() and (meant := _builtin_kind_named(group, version, kind)):
            # a resource's name where its kind belongs ('v1/configmaps'): never served as a
            # kind, the controller would wait for it in vain
            raise ValueError(
                f"cannot read kind {text!r}: {kind!r} is a resource's name, not its kind "
                f"(did you mean {meant!r}?)"
            )
        return cls(group, version, kind)

    @classmethod
    def from_api_version(cls, api_version: str, kind: str) -> GroupVersionKind:
        """Build from an object's ``apiVersion`` and ``kind`` fields."""
        group, _, version = api_version.rpartition("/")
        return cls(group, version, kind)

    def __str__(self) -> str:
        return f"{self.api_version}/{self.kind}"


KindLike: TypeAlias = str | type | GroupVersionKind


#: other spellings of a kind: Go's ``GroupVersionKind.String()`` (``apps/v1, Kind=Deployment``)
#: and kubectl's ``Deployment.v1.apps``
_OTHER_FORMS = (
    re.compile(r"^(?:(?P<group>[^/,\s]*)/)?(?P<version>v[^/,\s]*),\s*Kind=(?P<kind>\w+)$"),
    re.compile(r"^(?P<kind>[A-Z]\w*)\.(?P<version>v\d\w*)\.(?P<group>[\w.-]*)$"),
)


def _bad_kind(text: object) -> str:
    hint = ""
    if isinstance(text, str) and "/" not in text and _KIND.match(text.strip()):
        for model, gvk in MODEL_KINDS.items():
            if gvk.rsplit("/", 1)[1] == text.strip() and model.startswith("V1"):
                hint = f" (did you mean {gvk!r}?)"
                break
    elif isinstance(text, str):
        for form in _OTHER_FORMS:
            if m := form.match(text.strip()):
                group, version, kind = m.group("group") or "", m.group("version"), m.group("kind")
                hint = f" (did you mean {'/'.join(p for p in (group, version, kind) if p)!r}?)"
                break
    return f"cannot read kind {text!r}: name a kind as {_FORMS}{hint}"


def _builtin_kind_named(group: str, version: str, name: str) -> str:
    """The built-in kind of ``group``/``version`` whose resource (plural) or singular name
    is ``name`` (``configmaps``, ``configmap``), as ``v1/ConfigMap``; "" for none."""
    api_version = f"{group}/{version}" if group else version
    for gvk in MODEL_KINDS.values():
        head, _, kind = gvk.rpartition("/")
        if head != api_version:
            continue
        lower = kind.lower()
        plurals = {lower + "s", lower + "es", lower[:-1] + "ies" if lower.endswith("y") else ""}
        if name == lower or name in plurals:
            return gvk
    return ""


def is_model_class(obj: Any) -> bool:
    """True for a ``kubernetes.client`` model class (not a user's Resource)."""
    return isinstance(obj, type) and obj.__module__.startswith("kubernetes.client.models")


def kind_of(kind: KindLike) -> GroupVersionKind:
    """The [`GroupVersionKind`][mcruntime.client.GroupVersionKind] a caller names.

    Accepts a ``GroupVersionKind``, a string (see [`GroupVersionKind.parse()`][mcruntime.client.GroupVersionKind.parse]),
    a [`Resource`][mcruntime.client.Resource] subclass (its ``api_version``/``kind``
    class variables), or a ``kubernetes.client`` model class (``V1ConfigMap``,
    ``V1Deployment``: looked up in a table of the client's built-in kinds; model
    classes outside it raise ``ValueError``, name those kinds by string).
    """
    if isinstance(kind, GroupVersionKind):
        return kind
    if isinstance(kind, tuple) and len(kind) == 3 and all(isinstance(p, str) for p in kind):
        return GroupVersionKind(*kind)
    if isinstance(kind, str):
        return GroupVersionKind.parse(kind)
    if isinstance(kind, type):
        if is_model_class(kind):
            return _model_kind(kind)
        api_version = getattr(kind, "api_version", None)
        k = getattr(kind, "kind", None)
        if isinstance(api_version, str) and isinstance(k, str) and api_version and k:
            return GroupVersionKind.from_api_version(api_version, k)
        raise ValueError(
            f"class {kind.__qualname__} names no kind: give it class variables "
            "api_version and kind (subclass mcruntime.client.Resource), or name the "
            f"kind as {_FORMS}"
        )
    raise ValueError(
        f"cannot read kind from {type(kind).__name__} {kind!r}: name a kind as {_FORMS}"
    )


def _model_kind(model: type) -> GroupVersionKind:
    gvk = MODEL_KINDS.get(model.__name__)
    if gvk is not None:
        return GroupVersionKind.parse(gvk)
    m = _MODEL_PREFIX.match(model.__name__)
    version = _MODEL_VERSION.search(m.group()) if m else None
    guess = (
        f" such as '<group>/{version.group().lower()}/{model.__name__[m.end() :]}'"
        if m and version
        else ""
    )
    raise ValueError(
        f"model class {model.__name__} is not a known top-level kind of the kubernetes client; "
        f"name the kind as a string{guess}"
    )


@dataclass(frozen=True, slots=True)
class RESTMapping:
    """How a kind is served: its resource (plural), scope, verbs and subresources."""

    gvk: GroupVersionKind
    resource: str
    namespaced: bool
    verbs: frozenset[str] = field(default_factory=frozenset)
    subresources: frozenset[str] = field(default_factory=frozenset)

    @property
    def group_version_path(self) -> str:
        """``/api/v1`` for the core group, ``/apis/<group>/<version>`` otherwise."""
        g = self.gvk
        return f"/apis/{g.group}/{g.version}" if g.group else f"/api/{g.version}"

    def path(
        self, namespace: str | None = None, name: str | None = None, subresource: str | None = None
    ) -> str:
        """URL path of the collection or of one object (optionally its subresource).

        ``namespace=None`` on a namespaced kind means all namespaces; the
        namespace is ignored for cluster-scoped kinds.
        """
        parts = [self.group_version_path]
        if self.namespaced and namespace:
            _check_segment("namespace", namespace)
            parts.append("/namespaces/" + quote(namespace, safe=""))
        parts.append("/" + self.resource)
        if name is not None:
            if not name:
                raise ValueError(f"empty object name for {self.gvk}")
            _check_segment("resource name", name)
            parts.append("/" + quote(name, safe=""))
            if subresource:
                for segment in subresource.split("/"):
                    _check_segment("subresource", segment)
                parts.append("/" + subresource)
        elif subresource:
            raise ValueError(f"subresource {subresource!r} of {self.gvk} needs an object name")
        return "".join(parts)


def _check_segment(what: str, value: str) -> None:
    """Refuse a name that is no path segment, as client-go's request builder does
    (``IsValidPathSegmentName``): ``..`` or ``.`` would be resolved away by the URL, so a
    ConfigMap named ``..`` would be its namespace (and a delete of it, the namespace's)."""
    if value in (".", ".."):
        problems = [f"may not be '{value}'"]
    else:
        problems = [f"may not contain '{c}'" for c in ("/", "%") if c in value]
        if not value:
            problems.append("may not be empty")
    if problems:
        raise ValueError(f"invalid {what} {value!r}: {', '.join(problems)}")
