"""String formats kube-apiserver checks a custom object's fields for, beyond dates and
UUIDs (`_schema`): kube-openapi's ``strfmt`` registry, whose checks come from go-openapi's
strfmt and its fork of govalidator, each followed here as Go has it.

``ipv4`` and ``cidr`` take what k8s.io/utils' ``ParseIPSloppy`` (``ParseCIDRSloppy``)
takes (leading zeros in an IPv4 field); ``ipv6`` what ``net.ParseIP`` takes, with a
colon; ``hostname`` strfmt's pattern (a Go regular expression) and label lengths; ``email``
``net/mail.ParseAddress``, in its common forms (no comments, no obsolete syntax);
``uri`` ``net/url.ParseRequestURI``; ``byte`` govalidator's base64 pattern; ``mac``
``net.ParseMAC``; ``hexcolor`` and ``rgbcolor`` govalidator's patterns; ``duration``
strfmt's ``ParseDuration`` (Go's ``time.ParseDuration``, or numbers with unit words:
``3 days``); ``password`` anything. Not checked (any string passes): ``bsonobjectid``,
``isbn``, ``isbn10``, ``isbn13``, ``creditcard``, ``ssn``.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable
from typing import Final

from mcruntime.envtest import _ips, _regexp

__all__ = ["CHECKS"]


def _go(pattern: str) -> Callable[[str], bool]:
    """A check by a Go regular expression (``MatchString``)."""
    return lambda text: _regexp.compile_go(pattern).search(text) is not None


# strfmt's HostnamePattern
_HOSTNAME: Final = (
    r"^([a-zA-Z0-9\p{S}\p{L}]((-?[a-zA-Z0-9\p{S}\p{L}]{0,62})?)|"
    r"([a-zA-Z0-9\p{S}\p{L}](([a-zA-Z0-9-\p{S}\p{L}]{0,61}[a-zA-Z0-9\p{S}\p{L}])?)(\.)){1,}"
    r"([a-zA-Z\p{L}]){2,63})$"
)


def _is_hostname(text: str) -> bool:
    """strfmt's ``IsHostname``: the pattern, at most 255 bytes, labels of at most 63."""
    if not _go(_HOSTNAME)(text) or len(text.encode()) > 255:
        return False
    return all(len(label.encode()) <= 63 for label in text.split("."))


def _is_ipv4(text: str) -> bool:
    return "." in text and _ips.ip_family(text) is not None


def _is_ipv6(text: str) -> bool:
    """``net.ParseIP`` (no leading zeros in an embedded IPv4 address) and a colon."""
    if ":" not in text or _ips.ip_family(text) is None:
        return False
    tail = text.rpartition(":")[2]
    return "." not in tail or all(f == "0" or not f.startswith("0") for f in tail.split("."))


def _is_cidr(text: str) -> bool:
    return _ips.cidr_family(text) is not None


_HEX: Final = frozenset(string.hexdigits)


def _is_mac(text: str) -> bool:
    """Go's ``net.ParseMAC``: 6, 8 or 20 octets, as ``xx:xx``, ``xx-xx`` or ``xxxx.xxxx``."""
    s = text.encode()
    if len(s) < 14:
        return False
    if s[2:3] in (b":", b"-"):
        sep, size, groups = s[2:3], 2, (len(s) + 1) // 3
        if (len(s) + 1) % 3:
            return False
    elif s[4:5] == b".":
        sep, size, groups = b".", 4, (len(s) + 1) // 5
        if (len(s) + 1) % 5:
            return False
    else:
        return False
    if groups * size // 2 not in (6, 8, 20):
        return False
    parts = s.split(sep)
    return len(parts) == groups and all(
        len(p) == size and all(chr(c) in _HEX for c in p) for p in parts
    )


_ATEXT: Final = r"[^\s()<>\[\]:;@\\,.\"\x00-\x1f\x7f]"
_DOT_ATOM: Final = rf"{_ATEXT}+(?:\.{_ATEXT}+)*"
_QUOTED: Final = r'"(?:[^"\\\r\n]|\\.)*"'
_ADDR_SPEC: Final = rf"(?:{_DOT_ATOM}|{_QUOTED})@{_DOT_ATOM}"
_WORD: Final = rf"(?:[^\s()<>\[\]:;@\\,\"\x00-\x1f\x7f]+|{_QUOTED})"
_EMAIL: Final = re.compile(
    rf"\s*(?:{_ADDR_SPEC}|(?:{_WORD}(?:\s+{_WORD})*\s*)?<{_ADDR_SPEC}>)\s*", re.S
)


def _is_email(text: str) -> bool:
    """``net/mail.ParseAddress`` with an address: ``a@b.c`` or ``Name <a@b.c>``."""
    return _EMAIL.fullmatch(text) is not None


_SCHEME: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*")
_ESCAPE: Final = re.compile(r"%(?![0-9A-Fa-f]{2})")
#: what may be written in a URL's host unescaped (``shouldEscape`` for ``encodeHost``)
_HOST_CHARS: Final = frozenset(string.ascii_letters + string.digits + "-_.~!$&'()*+,;=:[]<>\"%")


def _valid_port(port: str) -> bool:
    return port == "" or (port.startswith(":") and port[1:].isdigit() and port[1:].isascii())


def _is_request_uri(text: str) -> bool:
    """Go's ``url.ParseRequestURI``: an absolute URI or an absolute path (no fragment is
    split off), without control characters or bad escapes, its host and port well formed."""
    if not text or any(ord(c) < 0x20 or ord(c) == 0x7F for c in text):
        return False
    rest = text
    m = _SCHEME.match(text)
    if m and text[m.end() : m.end() + 1] == ":":
        rest = text[m.end() + 1 :]
        scheme = True
    elif text.startswith(":"):
        return False  # missing protocol scheme
    else:
        scheme = False
    rest = rest.partition("?")[0]
    if not rest.startswith("/"):
        return scheme  # a rootless path after a scheme is opaque
    if scheme and rest.startswith("//"):
        authority, slash, path = rest[2:].partition("/")
        rest = slash + path
        userinfo, at, host = authority.rpartition("@")
        if not at:
            host = authority
        elif any(c in "/?#[]" for c in userinfo) or _ESCAPE.search(userinfo):
            return False
        if host.startswith("["):
            close = host.find("]")
            if close < 0 or not _valid_port(host[close + 1 :]):
                return False
        else:
            colon = host.rfind(":")
            if colon >= 0 and not _valid_port(host[colon:]):
                return False
            if any(c.isascii() and c not in _HOST_CHARS for c in host):
                return False
        if _ESCAPE.search(host):
            return False
    return _ESCAPE.search(rest) is None


_GO_UNITS: Final = {
    "ns": 1,
    "us": 1_000,
    "\u00b5s": 1_000,
    "\u03bcs": 1_000,
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}
_GO_PART: Final = re.compile(r"([0-9]*)(?:\.([0-9]*))?([^0-9.]*)")


def _go_duration(text: str) -> bool:
    """Go's ``time.ParseDuration`` takes ``text``."""
    s = text[1:] if text[:1] in ("-", "+") else text
    if s == "0":
        return True
    if not s:
        return False
    total = 0
    while s:
        m = _GO_PART.match(s)
        assert m is not None
        whole, fraction, unit = m.group(1), m.group(2), m.group(3)
        if not whole and not fraction or unit not in _GO_UNITS:
            return False
        total += int(whole or "0") * _GO_UNITS[unit]
        if total > 1 << 63:
            return False
        s = s[m.end() :]
    return True


#: strfmt's scala-like durations: a number (maybe negative) and a unit word
_SCALA: Final = r"(((?:-\s?)?\d+)\s*([A-Za-z\x{b5}]+))"
_SCALA_UNITS: Final = (
    ("ns", "nano"),
    ("us", "\u00b5s", "micro"),
    ("ms", "milli"),
    ("s", "sec"),
    ("m", "min"),
    ("h", "hr", "hour"),
    ("d", "day"),
    ("w", "wk", "week"),
)


def _is_duration(text: str) -> bool:
    """strfmt's ``ParseDuration``: Go's, or any number followed by a unit (``3 days``,
    ``1hour``) found in the text."""
    if _go_duration(text):
        return True
    found = False
    for m in _regexp.compile_go(_SCALA).finditer(text):
        value = m.group(2).removeprefix("-").strip()
        if len(value) > 18 and int(value) >= 1 << 63:
            return False  # strconv.Atoi refuses it
        unit = m.group(3).strip().lower()
        for variants in _SCALA_UNITS:
            last = len(variants) - 1
            if any(
                (i == last and unit.startswith(v)) or unit == v.lower()
                for i, v in enumerate(variants)
            ):
                found = True
    return found


#: the checks by format name (without ``-``)
CHECKS: Final[dict[str, Callable[[str], bool]]] = {
    "hostname": _is_hostname,
    "ipv4": _is_ipv4,
    "ipv6": _is_ipv6,
    "cidr": _is_cidr,
    "mac": _is_mac,
    "email": _is_email,
    "uri": _is_request_uri,
    "byte": _go(
        r"^(?:[A-Za-z0-9+\/]{4})*(?:[A-Za-z0-9+\/]{2}==|[A-Za-z0-9+\/]{3}=|[A-Za-z0-9+\/]{4})$"
    ),
    "hexcolor": _go(r"^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$"),
    "rgbcolor": _go(
        r"^rgb\(\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*,\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])"
        r"\s*,\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*\)$"
    ),
    "duration": _is_duration,
    "password": lambda _: True,
}
