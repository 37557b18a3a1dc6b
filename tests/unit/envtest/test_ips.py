"""IPs and CIDRs parsed as k8s.io/utils' sloppy parsers parse them, and the refusals of a
list with an entry they cannot parse (kube 1.31's wording of its dual-stack check)."""

from __future__ import annotations

import pytest

from mcruntime.envtest._ips import HOST_IPS, POD_CIDRS, POD_IPS, cidr_family, ip_family

pytestmark = pytest.mark.timeout(10)


@pytest.mark.parametrize(
    ("text", "family"),
    [
        ("10.0.0.1", 4),
        ("010.000.0.1", 4),  # leading zeros: taken (issue 100895)
        ("::ffff:10.0.0.1", 4),  # IPv4-mapped: Go's To4 calls it IPv4
        ("fd00::1", 6),
        ("256.0.0.1", None),
        ("10.0.0", None),
        ("fe80::1%eth0", None),  # no zone
        ("", None),
    ],
)
def test_an_ip_parses_as_parse_ip_sloppy(text: str, family: int | None) -> None:
    assert ip_family(text) == family


@pytest.mark.parametrize(
    ("text", "family"),
    [
        ("10.0.0.0/24", 4),
        ("10.0.0.1/24", 4),  # host bits set: taken
        ("10.0.0.0/024", 4),
        ("fd00::/64", 6),
        ("10.0.0.0/33", None),
        ("10.0.0.0/", None),
        ("10.0.0.0", None),
        ("fd00::/129", None),
    ],
)
def test_a_cidr_parses_as_parse_cidr_sloppy(text: str, family: int | None) -> None:
    assert cidr_family(text) == family


def test_a_list_with_an_entry_that_does_not_parse_fails_the_dual_stack_check() -> None:
    assert [c[2] for c in POD_IPS.causes([{"ip": "10.0.0.1"}, {"ip": "x"}])] == [
        'status.podIPs[1]: Invalid value: "x": must be a valid IP address, (e.g. 10.9.8.7 or '
        "2001:db8::ffff)",
        "status.podIPs: Internal error: failed to check for dual stack with error:invalid IP[1]: x",
        'status.podIPs: Invalid value: []core.PodIP{core.PodIP{IP:"10.0.0.1"}, '
        'core.PodIP{IP:"x"}}: may specify no more than one IP for each IP family',
    ]
    assert [c[0] for c in HOST_IPS.causes([{"ip": "x"}, {"ip": "x"}])] == [
        "FieldValueInvalid",
        "FieldValueInvalid",
        "FieldValueDuplicate",  # validateHostIPs: duplicates before the families
        "InternalError",
        "FieldValueInvalid",
    ]
    assert POD_CIDRS.causes(["bad", "fd00::/64"])[1][2] == (
        "spec.podCIDRs: Internal error: invalid PodCIDRs. failed to check with dual stack "
        "with error:invalid CIDR[0]: <nil> (invalid CIDR address: bad)"
    )
