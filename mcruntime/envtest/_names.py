"""Object name rules, generated names and timestamps, as kube-apiserver applies them."""

from __future__ import annotations

import re
import secrets
import time

__all__ = ["validate_name", "generate_name", "now"]

_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL = re.compile(rf"^{_LABEL}$")
_DNS1123_SUBDOMAIN = re.compile(rf"^{_LABEL}(\.{_LABEL})*$")
_DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_ALNUM = "bcdfghjklmnpqrstvwxz2456789"


def validate_name(name: str, rule: str) -> str | None:
    """Why ``name`` is not acceptable under ``rule`` ("subdomain", "label", "dns1035", "path"),
    or None. "path" (RBAC objects) allows anything a URL path segment can carry."""
    if rule == "path":
        if name in (".", ".."):
            return f"may not be '{name}'"
        for bad in ("/", "%"):
            if bad in name:
                return f"may not contain '{bad}'"
    elif rule == "label":
        if len(name) > 63:
            return "must be no more than 63 characters"
        if not _DNS1123_LABEL.match(name):
            return (
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters "
                "or '-', and must start and end with an alphanumeric character"
            )
    elif rule == "dns1035":
        if len(name) > 63:
            return "must be no more than 63 characters"
        if not _DNS1035_LABEL.match(name):
            return (
                "a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
                "start with an alphabetic character, and end with an alphanumeric character"
            )
    else:
        if len(name) > 253:
            return "must be no more than 253 characters"
        if not _DNS1123_SUBDOMAIN.match(name):
            return (
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                "characters, '-' or '.', and must start and end with an alphanumeric character"
            )
    return None


def generate_name(prefix: str) -> str:
    """``prefix`` plus five random lowercase alphanumerics (the apiserver's alphabet)."""
    return prefix[:58] + "".join(secrets.choice(_ALNUM) for _ in range(5))


def now() -> str:
    """The current time as an RFC 3339 UTC timestamp with second precision."""
    return rfc3339(time.time())


def rfc3339(at: float) -> str:
    """A Unix time as an RFC 3339 UTC timestamp with second precision (a ``metav1.Time``)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))


_QUALIFIED = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_QUALIFIED_HELP = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and "
    "end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex "
    "used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)


def validate_qualified_name(key: str) -> str | None:
    """Why ``key`` is not a valid label/annotation key (``[prefix/]name``), or None."""
    prefix, sep, name = key.rpartition("/")
    if sep:
        if not prefix:
            return "prefix part must be non-empty"
        if len(prefix) > 253 or not _DNS1123_SUBDOMAIN.match(prefix):
            return "prefix part " + (
                validate_name(prefix, "subdomain") or "must be no more than 253 characters"
            )
    if not name:
        return "name part must be non-empty"
    if len(name) > 63:
        return "name part must be no more than 63 characters"
    if not _QUALIFIED.match(name):
        return _QUALIFIED_HELP
    return None


def validate_label_value(value: str) -> str | None:
    """Why ``value`` is not a valid label value, or None."""
    if len(value) > 63:
        return "must be no more than 63 characters"
    if not _LABEL_VALUE.match(value):
        return (
            "a valid label must be an empty string or consist of alphanumeric characters, '-', "
            "'_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  "
            "or 'my_value',  or '12345', regex used for validation is "
            "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
        )
    return None
