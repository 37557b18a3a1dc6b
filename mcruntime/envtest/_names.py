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
    """Why ``name`` is not acceptable under ``rule`` ("subdomain", "label", "dns1035"), or None."""
    if rule == "label":
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
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
