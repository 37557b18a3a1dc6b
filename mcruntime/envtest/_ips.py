"""Lists of IPs and CIDRs in built-in kinds, validated as kube-apiserver 1.31 validates them
(``pkg/apis/core/validation``: ``validatePodIPs``, ``validateHostIPs``, ``ValidateNode``'s
``spec.podCIDRs``).

Each entry must parse as k8s.io/utils' ``ParseIPSloppy`` (``ParseCIDRSloppy``) parses it:
Go's old parser, which takes leading zeros in an IPv4 octet (``010.0.0.1``) and no IPv6
zone (``fe80::1%eth0``); its refusal is ``must be a valid IP address, (e.g. 10.9.8.7 or
2001:db8::ffff)`` (``must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)``) at
the entry. A list of more than one must hold one entry of each family, so two at most
(``may specify no more than one IP for each IP family``, the whole list the bad value), and
no entry twice (``Duplicate value``); an unparsable entry in such a list also makes
``IsDualStackIPStrings`` fail, which kube reports as an ``InternalError`` of the list.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mcruntime.envtest._gofmt import go_string

__all__ = ["IPList", "POD_CIDRS", "POD_IPS", "HOST_IPS", "cidr_family", "in_step", "ip_family"]

_Cause = tuple[str, str, str]
_IPV4 = re.compile(r"[0-9]+(\.[0-9]+){3}")
_PREFIX = re.compile(r"[0-9]+")


def _sloppy_v4(text: str) -> ipaddress.IPv4Address | None:
    if not _IPV4.fullmatch(text):
        return None
    octets = [int(o) for o in text.split(".")]
    if any(o > 255 for o in octets):
        return None
    return ipaddress.IPv4Address(".".join(map(str, octets)))


def _v6(text: str) -> ipaddress.IPv6Address | None:
    if "%" in text:  # Go's parser takes no zone
        return None
    try:
        return ipaddress.IPv6Address(text)
    except ValueError:
        return None


def ip_family(text: Any) -> int | None:
    """4 or 6 for an IP ``ParseIPSloppy`` takes (an IPv4-mapped IPv6 is IPv4, as Go's
    ``To4`` has it), None for anything else."""
    if not isinstance(text, str):
        return None
    if _sloppy_v4(text) is not None:
        return 4
    v6 = _v6(text)
    if v6 is None:
        return None
    return 4 if v6.ipv4_mapped is not None else 6


def cidr_family(text: Any) -> int | None:
    """4 or 6 for a CIDR ``ParseCIDRSloppy`` takes (host bits may be set; the prefix
    length may have leading zeros), None for anything else."""
    if not isinstance(text, str) or "/" not in text:
        return None
    addr, length = text.split("/", 1)
    if not _PREFIX.fullmatch(length):
        return None
    if _sloppy_v4(addr) is not None:
        return 4 if int(length) <= 32 else None
    v6 = _v6(addr)
    if v6 is None or int(length) > 128:
        return None
    network = ipaddress.IPv6Network(f"{v6}/{int(length)}", strict=False)
    return 4 if network.network_address.ipv4_mapped is not None else 6


def in_step(obj: dict[str, Any], one: str, many: str, key: str | None) -> dict[str, Any]:
    """``obj`` with its field ``one`` and its list ``many`` in step, as kube's core/v1
    conversion keeps them (the internal type has the list only: a Pod's ``podIP`` and
    ``podIPs``, a Node's ``podCIDR`` and ``podCIDRs``): ``one`` alone fills ``many``;
    ``many`` alone gives ``one`` its first entry; when both are set and differ, ``one`` wins
    (``many`` is ``[one]``: what an older client that wrote ``one`` only gets). ``key``: the
    key of an entry's value when the entries are objects."""
    value, items = obj.get(one), obj.get(many)
    first = items[0] if isinstance(items, list) and items else None
    if key is not None:
        first = first.get(key) if isinstance(first, dict) else None
    if value and first != value:
        return {**obj, many: [value if key is None else {key: value}]}
    if not value and first:
        return {**obj, one: first}
    return obj


def _go_entries(values: list[str], go_type: str | None) -> str:
    """The list as Go's ``%#v`` prints it: a ``[]string`` or a slice of ``{IP: ...}`` structs."""
    if go_type is None:
        return "[]string{" + ", ".join(go_string(v) for v in values) + "}"
    return f"[]{go_type}{{" + ", ".join(_go_entry(v, go_type) for v in values) + "}"


def _go_entry(value: str, go_type: str | None) -> str:
    return go_string(value) if go_type is None else f"{go_type}{{IP:{go_string(value)}}}"


@dataclass(frozen=True)
class IPList:
    """One validated list: where it is, how its entries are written and parsed, and the
    words and order of its checks."""

    at: str
    #: the key of an entry's IP in its object (None: the entries are strings)
    key: str | None
    #: the Go type of an entry as ``%#v`` names it (None: a string)
    go_type: str | None
    family: Callable[[Any], int | None]
    invalid: str
    #: the dual-stack check's error for an entry it cannot parse, as kube wraps it
    #: (``{index}``, ``{value}``: the entry's index and the entry)
    internal: str
    mixed: str
    #: ``validateHostIPs`` looks for duplicates before it checks the families
    duplicates_first: bool = False

    def entries(self, items: Any) -> list[str]:
        """The entries of ``items`` (a JSON list) as the internal type holds them."""
        out: list[str] = []
        for item in items if isinstance(items, list) else ():
            value = item.get(self.key) if self.key and isinstance(item, dict) else item
            out.append(value if isinstance(value, str) else "")
        return out

    def causes(self, items: Any) -> list[_Cause]:
        """The refusals of the list ``items`` (empty when it is valid)."""
        values = self.entries(items)
        causes: list[_Cause] = []
        for i, value in enumerate(values):
            if self.family(value) is None:
                at = f"{self.at}[{i}]"
                why = f"Invalid value: {go_string(value)}: {self.invalid}"
                causes.append(("FieldValueInvalid", at, f"{at}: {why}"))
        if len(values) < 2:
            return causes
        if self.duplicates_first:
            return causes + self._duplicates(values) + self._families(values)
        return causes + self._families(values) + self._duplicates(values)

    def _families(self, values: list[str]) -> list[_Cause]:
        causes: list[_Cause] = []
        families = [self.family(v) for v in values]
        bad = next((i for i, f in enumerate(families) if f is None), None)
        if bad is not None:
            detail = self.internal.format(index=bad, value=values[bad])
            causes.append(("InternalError", self.at, f"{self.at}: Internal error: {detail}"))
        if bad is not None or set(families) != {4, 6} or len(values) > 2:
            why = f"Invalid value: {_go_entries(values, self.go_type)}: {self.mixed}"
            causes.append(("FieldValueInvalid", self.at, f"{self.at}: {why}"))
        return causes

    def _duplicates(self, values: list[str]) -> list[_Cause]:
        causes: list[_Cause] = []
        seen: set[str] = set()
        for i, value in enumerate(values):
            if value in seen:
                at = f"{self.at}[{i}]"
                why = f"Duplicate value: {_go_entry(value, self.go_type)}"
                causes.append(("FieldValueDuplicate", at, f"{at}: {why}"))
            seen.add(value)
        return causes


_IP_INVALID = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"
#: k8s.io/utils (kube 1.31's): ``IsDualStackIPStrings``' error
_IP_INTERNAL = "failed to check for dual stack with error:invalid IP[{index}]: {value}"
_IP_MIXED = "may specify no more than one IP for each IP family"

POD_IPS = IPList(
    "status.podIPs", "ip", "core.PodIP", ip_family, _IP_INVALID, _IP_INTERNAL, _IP_MIXED
)
HOST_IPS = IPList(
    "status.hostIPs",
    "ip",
    "core.HostIP",
    ip_family,
    _IP_INVALID,
    _IP_INTERNAL,
    _IP_MIXED,
    duplicates_first=True,
)
POD_CIDRS = IPList(
    "spec.podCIDRs",
    None,
    None,
    cidr_family,
    "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)",
    # ``ParseCIDRs``' error (its CIDR is a nil ``*net.IPNet``), wrapped by ``ValidateNode``
    "invalid PodCIDRs. failed to check with dual stack with error:invalid CIDR[{index}]: "
    "<nil> (invalid CIDR address: {value})",
    "may specify no more than one CIDR for each IP family",
)
