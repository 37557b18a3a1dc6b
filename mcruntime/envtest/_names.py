"""Object name rules, generated names and timestamps, as kube-apiserver applies them."""

from __future__ import annotations

import json
import re
import secrets
import time
from typing import Any

from mcruntime._selectors import (
    dns_label_problems,
    label_value_problems,
    qualified_name_problems,
    regex_error,
    subdomain_problems,
)
from mcruntime.envtest._gofmt import go_pointer

__all__ = ["name_problems", "prefix_problems", "generate_name", "now"]

_DNS1035 = r"[a-z]([-a-z0-9]*[a-z0-9])?"
_DNS1035_LABEL = re.compile(rf"^{_DNS1035}$")
_ALNUM = "bcdfghjklmnpqrstvwxz2456789"


def _size(text: str) -> int:
    """A string's length as Go's ``len`` counts it: in bytes (UTF-8)."""
    return len(text.encode())


def _max_len(n: int) -> str:
    return f"must be no more than {n} characters"


_DNS1035_ERR = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character"
)


def name_problems(name: str, rule: str) -> list[str]:
    """Why ``name`` is not acceptable under ``rule`` ("subdomain", "label", "dns1035",
    "path"), each as kube-apiserver says it (apimachinery's ``IsDNS1123Subdomain``,
    ``IsDNS1123Label``, ``IsDNS1035Label``, ``IsValidPathSegmentName``: a field error each);
    empty when it is. "path" (RBAC objects) allows anything a URL path segment can carry."""
    if rule == "path":
        if name in (".", ".."):
            return [f"may not be '{name}'"]
        return [f"may not contain '{bad}'" for bad in ("/", "%") if bad in name]
    problems: list[str] = []
    if rule == "label":
        problems = dns_label_problems(name)
    elif rule == "dns1035":
        if _size(name) > 63:
            problems.append(_max_len(63))
        if not _DNS1035_LABEL.match(name):
            problems.append(regex_error(_DNS1035_ERR, _DNS1035, "my-name", "abc-123"))
    else:
        problems = subdomain_problems(name)
    return problems


def prefix_problems(prefix: str, rule: str) -> list[str]:
    """Why ``generateName`` ``prefix`` cannot begin a name under ``rule`` (see
    `name_problems`), as kube-apiserver judges it: its trailing dash masked as
    apimachinery's ``maskTrailingDash`` does (its last two characters become an "a"), a
    "path" prefix only checked for what a name may not contain."""
    if rule == "path":
        return [f"may not contain '{bad}'" for bad in ("/", "%") if bad in prefix]
    if len(prefix) > 1 and prefix.endswith("-"):
        prefix = prefix[:-2] + "a"
    return name_problems(prefix, rule)


def generate_name(prefix: str) -> str:
    """``prefix`` plus five random lowercase alphanumerics (the apiserver's alphabet)."""
    return prefix[:58] + "".join(secrets.choice(_ALNUM) for _ in range(5))


def now() -> str:
    """The current time as an RFC 3339 UTC timestamp with second precision."""
    return rfc3339(time.time())


def rfc3339(at: float) -> str:
    """A Unix time as an RFC 3339 UTC timestamp with second precision (a ``metav1.Time``)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))


#: apimachinery's ``TotalAnnotationSizeLimitB``: what an object's annotations (keys and
#: values, in bytes) may total
ANNOTATIONS_SIZE_LIMIT = 256 * 1024

Cause = tuple[str, str, str]  # (reason, field, "field: message")


def _invalid(at: str, value: str, why: str) -> Cause:
    shown = json.dumps(value, ensure_ascii=False)  # Go's %q
    return ("FieldValueInvalid", at, f"{at}: Invalid value: {shown}: {why}")


def label_causes(labels: dict[str, str], at: str) -> list[Cause]:
    """apimachinery's ``ValidateLabels`` of ``labels`` at ``at`` (``metadata.labels``)."""
    causes = []
    for k, v in labels.items():
        causes += [_invalid(at, k, why) for why in qualified_name_problems(k)]
        causes += [_invalid(at, v, why) for why in label_value_problems(v)]
    return causes


def annotation_causes(annotations: dict[str, str], at: str) -> list[Cause]:
    """apimachinery's ``ValidateAnnotations``: each key a qualified name (in any case), and
    all of them within `ANNOTATIONS_SIZE_LIMIT` (``field.TooLong`` in kube-apiserver 1.31's
    words; "may not be more than ... bytes" from 1.32)."""
    causes = [
        _invalid(at, k, why) for k in annotations for why in qualified_name_problems(k.lower())
    ]
    size = sum(len(k.encode()) + len(v.encode()) for k, v in annotations.items())
    if size > ANNOTATIONS_SIZE_LIMIT:
        message = f"{at}: Too long: must have at most {ANNOTATIONS_SIZE_LIMIT} bytes"
        causes.append(("FieldValueTooLong", at, message))
    return causes


#: ``validateOwnerReference``'s required parts (kube 1.27-1.33's words: an ``Invalid``
#: empty value, at the list's path, not the item's)
_OWNER_PARTS = (("apiVersion", "version"), ("kind", "kind"), ("name", "name"), ("uid", "uid"))


def _go_owner_reference(ref: dict[str, Any]) -> str:
    """A ``v1.OwnerReference`` as ``%#v`` prints it."""
    parts = ", ".join(
        f"{go}:{json.dumps(str(ref.get(key) or ''), ensure_ascii=False)}"
        for go, key in (
            ("APIVersion", "apiVersion"),
            ("Kind", "kind"),
            ("Name", "name"),
            ("UID", "uid"),
        )
    )
    controller, blocks = ref.get("controller"), ref.get("blockOwnerDeletion")
    return (
        f"v1.OwnerReference{{{parts}, Controller:(*bool){go_pointer(controller)}, "
        f"BlockOwnerDeletion:(*bool){go_pointer(blocks)}}}"
    )


def owner_reference_causes(refs: list[Any], at: str) -> list[Cause]:
    """apimachinery's ``ValidateOwnerReferences`` (1.27-1.33) of ``refs`` at ``at``
    (``metadata.ownerReferences``): each names its owner's version, kind, name and uid, and
    one at most is the controller."""
    causes: list[Cause] = []
    controller = ""
    for ref in refs:
        if not isinstance(ref, dict):
            continue
        for key, word in _OWNER_PARTS:
            value = ref.get(key)
            value = value if isinstance(value, str) else ""
            if key == "apiVersion":
                value = value.rpartition("/")[2]  # the version: what must not be empty
            if not value:
                causes.append(_invalid(f"{at}.{key}", "", f"{word} must not be empty"))
        if ref.get("controller") is True:
            current = f"{ref.get('kind')}/{ref.get('name')}"
            if controller:
                shown = (
                    "[]v1.OwnerReference{"
                    + ", ".join(_go_owner_reference(r) for r in refs if isinstance(r, dict))
                    + "}"
                )
                why = (
                    'Only one reference can have Controller set to true. Found "true" in '
                    f"references for {controller} and {current}"
                )
                causes.append(("FieldValueInvalid", at, f"{at}: Invalid value: {shown}: {why}"))
            else:
                controller = current
    return causes


def finalizer_causes(finalizers: list[str], at: str) -> list[Cause]:
    """apimachinery's ``ValidateFinalizers``: each a qualified name, not ``orphan`` and
    ``foregroundDeletion`` both."""
    causes = [_invalid(at, f, why) for f in finalizers for why in qualified_name_problems(f)]
    if "orphan" in finalizers and "foregroundDeletion" in finalizers:
        shown = json.dumps(finalizers, separators=(",", ":"))
        why = "finalizer orphan and foregroundDeletion cannot be both set"
        causes.append(("FieldValueInvalid", at, f"{at}: Invalid value: {shown}: {why}"))
    return causes


def embedded_meta_causes(meta: dict[str, Any], at: str) -> list[Cause]:
    """apiextensions' ``validateEmbeddedResource`` of the ``metadata`` (at ``at``) of an
    ``x-kubernetes-embedded-resource``: apimachinery's ``ValidateObjectMeta`` with names
    judged as path segments, a namespace (when given) a DNS label, then the labels,
    annotations and finalizers. Fields of the wrong type are left alone."""
    causes: list[Cause] = []
    prefix = meta.get("generateName")
    if isinstance(prefix, str) and prefix:
        causes += [
            _invalid(f"{at}.generateName", prefix, w) for w in prefix_problems(prefix, "path")
        ]
    name = meta.get("name")
    if isinstance(name, str) and name:  # none is no fault here (kube names it "fakename")
        causes += [_invalid(f"{at}.name", name, w) for w in name_problems(name, "path")]
    namespace = meta.get("namespace")
    if isinstance(namespace, str) and namespace:
        causes += [_invalid(f"{at}.namespace", namespace, w) for w in dns_label_problems(namespace)]
    generation = meta.get("generation")
    if isinstance(generation, int) and not isinstance(generation, bool) and generation < 0:
        causes.append(
            (
                "FieldValueInvalid",
                f"{at}.generation",
                f"{at}.generation: Invalid value: {generation}: must be greater than or equal to 0",
            )
        )
    for field, check in (("labels", label_causes), ("annotations", annotation_causes)):
        value = meta.get(field)
        if isinstance(value, dict) and all(isinstance(v, str) for v in value.values()):
            causes += check(value, f"{at}.{field}")
    finalizers = meta.get("finalizers")
    if isinstance(finalizers, list) and all(isinstance(f, str) for f in finalizers):
        causes += finalizer_causes(finalizers, f"{at}.finalizers")
    return causes
