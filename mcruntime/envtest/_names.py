"""Object name rules, generated names and timestamps, as kube-apiserver applies them."""

from __future__ import annotations

import re
import secrets
import time

from mcruntime._selectors import dns_label_problems, regex_error, subdomain_problems

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
