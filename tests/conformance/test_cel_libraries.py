"""The functions a CRD's ``x-kubernetes-validations`` rules may call: kube-apiserver 1.31's
base CEL environment (cel-go's standard functions and its strings and sets extensions,
Kubernetes' regex, IP, CIDR and format libraries), evaluated as kube-apiserver evaluates
them; and what a rule may not call or name."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client import ApiClient

from ._support import assert_status, check_object, crd_manifest, create_crd, raises_status

pytestmark = pytest.mark.timeout(60)


def _crd(group: str, rules: list[dict[str, Any]]) -> dict[str, Any]:
    manifest = crd_manifest(group, "checks", "Check")
    schema = manifest["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    schema["properties"]["spec"] = {
        "type": "object",
        "properties": {
            "s": {"type": "string"},
            "ips": {"type": "array", "items": {"type": "string"}},
        },
        "x-kubernetes-validations": rules,
    }
    return manifest


def _failed(
    api: ApiClient,
    custom: client.CustomObjectsApi,
    ns: str,
    group: str,
    rules: list[str],
    **spec: Any,
) -> list[str]:
    """The rules (by index) an object of ``spec`` breaks, each given its index as message."""
    create_crd(api, _crd(group, [{"rule": r, "message": str(i)} for i, r in enumerate(rules)]))
    try:
        custom.create_namespaced_custom_object(
            group, "v1", ns, "checks", check_object(group, **spec)
        )
    except client.ApiException as e:
        status = assert_status(e, 422, "Invalid")
        return [c["message"].rpartition(": ")[2] for c in status["details"]["causes"]]
    return []


_REGEX_RULES = [
    "self.s.matches('^a(?i)b$')",  # a flag mid-pattern
    "matches(self.s, '^a')",  # the global form
    "!'\\u0663'.matches('^\\\\d+$')",  # \d is ASCII digits only
    "!'ab\\n'.matches('^ab$')",  # $ is the end of the text
    "'a.b'.matches('^\\\\Qa.b\\\\E$')",
    "'\u00e9t\u00e9'.matches('^\\\\pL+$')",
    "'baaab'.findAll('a*') == ['', 'aaa', '']",  # no empty match right after a match
    "'x123y'.find('[[:digit:]]+') == '123'",
]


def test_regular_expressions_in_rules_are_go_s(
    api: ApiClient, custom: client.CustomObjectsApi, ns: str, fresh_group: str
) -> None:
    assert _failed(api, custom, ns, fresh_group, _REGEX_RULES, s="aB") == []


def test_a_regular_expression_go_refuses_fails_the_rule_in_go_s_words(
    api: ApiClient, custom: client.CustomObjectsApi, ns: str, fresh_group: str
) -> None:
    # a pattern that is not a literal: kube-apiserver compiles it when the rule runs
    create_crd(api, _crd(fresh_group, [{"rule": "'a'.matches(self.s)"}]))
    with raises_status(422, "Invalid") as status:
        custom.create_namespaced_custom_object(
            fresh_group, "v1", ns, "checks", check_object(fresh_group, s="(?=a)")
        )
    [cause] = status["details"]["causes"]
    assert cause["field"] == "spec"
    assert cause["message"] == (
        'Invalid value: "object": error parsing regexp: invalid or unsupported Perl syntax: '
        "`(?=` evaluating rule: 'a'.matches(self.s)"
    )


_LIBRARY_RULES = [
    # Kubernetes' IP and CIDR libraries (Gateway API's TLSRoute: !isIP(hostname))
    "!isIP(self.s) && isIP('10.0.0.1') && !isIP('010.0.0.1') && !isIP('::ffff:1.2.3.4')",
    "self.ips.all(i, isIP(i) && ip(i).family() == 4 && ip(i).isGlobalUnicast())",
    "ip('::1') == ip('0:0::1') && ip('127.0.0.1').isLoopback() && ip('::').isUnspecified()",
    "ip('fe80::1').isLinkLocalUnicast() && ip('ff02::1').isLinkLocalMulticast()",
    "ip.isCanonical('2001:db8::abcd') && !ip.isCanonical('2001:DB8::ABCD')",
    "self.ips.all(i, cidr('10.0.0.0/8').containsIP(i) && cidr('10.0.0.0/8').containsIP(ip(i)))",
    "isCIDR('10.0.0.0/8') && !isCIDR('10.0.0.0/33') && cidr('2001:db8::/32').prefixLength() == 32",
    "cidr('192.168.0.0/24').containsCIDR('192.168.0.0/25') && "
    "!cidr('192.168.0.0/24').containsCIDR(cidr('192.168.0.0/23'))",
    "cidr('192.168.0.1/24').masked() == cidr('192.168.0.0/24') && "
    "cidr('192.168.0.1/24').ip() == ip('192.168.0.1')",
    # cel-go's strings extension, version 2
    "'%s has %d ips, %.1f%%'.format([self.s, size(self.ips), 50.0]) == 'abc has 2 ips, 50.0%'",
    "strings.quote(self.s) == '\"abc\"'",
    # cel-go's sets extension
    "sets.contains(self.ips, ['10.0.0.1']) && sets.intersects(self.ips, ['10.1.1.1', 'x'])",
    "sets.equivalent(self.ips, ['10.1.1.1', '10.0.0.1', '10.0.0.1'])",
    # Kubernetes' format library (1.31)
    "!format.dns1123Label().validate(self.s).hasValue() && "
    "format.named('labelValue').hasValue() && !format.named('nope').hasValue()",
]


def test_the_ip_cidr_strings_and_sets_libraries_are_offered(
    api: ApiClient, custom: client.CustomObjectsApi, ns: str, fresh_group: str
) -> None:
    failed = _failed(
        api, custom, ns, fresh_group, _LIBRARY_RULES, s="abc", ips=["10.0.0.1", "10.1.1.1"]
    )
    assert failed == []


def test_library_rules_refuse_what_they_do_not_hold(
    api: ApiClient, custom: client.CustomObjectsApi, ns: str, fresh_group: str
) -> None:
    failed = _failed(
        api, custom, ns, fresh_group, _LIBRARY_RULES, s="10.0.0.1", ips=["192.168.0.1"]
    )
    assert failed == ["0", "5", "9", "10", "11", "12", "13"]


def _rule_refusal(api: ApiClient, group: str, rule: str, root: bool = False) -> str:
    """The message a CRD with ``rule`` (on its spec, or its root) is refused with."""
    manifest = _crd(group, [] if root else [{"rule": rule}])
    if root:
        manifest["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["x-kubernetes-validations"] = [
            {"rule": rule}
        ]
    with raises_status(422, "Invalid") as status:
        client.ApiextensionsV1Api(api).create_custom_resource_definition(manifest)
    [cause] = status["details"]["causes"]
    assert cause["field"].endswith("x-kubernetes-validations[0].rule"), cause
    return str(status["message"])


@pytest.mark.parametrize(
    ("rule", "column", "name"),
    [
        ("fooBar(self.s)", 7, "fooBar"),
        ("self.s.size() > 0 && self.s.fooBar()", 35, "fooBar"),
    ],
)
def test_a_crd_whose_rule_calls_an_undeclared_function_is_refused(
    api: ApiClient, fresh_group: str, rule: str, column: int, name: str
) -> None:
    # kube-apiserver type-checks a rule when the CRD is written: cel-go's checker marks the
    # call's opening parenthesis
    message = _rule_refusal(api, fresh_group, rule)
    assert message.endswith(
        f": compilation failed: ERROR: <input>:1:{column}: undeclared reference to '{name}' "
        f"(in container '')\n | {rule}\n | {'.' * (column - 1)}^"
    ), message


@pytest.mark.parametrize(
    ("rule", "column", "field"),
    [
        ("self.metadata.namespace == 'default'", 14, "namespace"),
        ("!has(self.metadata.labels) || size(self.metadata.labels) < 3", 19, "labels"),
    ],
)
def test_a_root_rule_sees_only_the_name_and_generate_name_of_metadata(
    api: ApiClient, fresh_group: str, rule: str, column: int, field: str
) -> None:
    message = _rule_refusal(api, fresh_group, rule, root=True)
    assert message.endswith(
        f": compilation failed: ERROR: <input>:1:{column}: undefined field '{field}'\n"
        f" | {rule}\n | {'.' * (column - 1)}^"
    ), message


def test_a_root_rule_on_the_name_and_generate_name_is_accepted_and_checked(
    api: ApiClient, custom: client.CustomObjectsApi, ns: str, fresh_group: str
) -> None:
    manifest = _crd(fresh_group, [])
    manifest["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["x-kubernetes-validations"] = [
        {
            "rule": "self.metadata.name.startsWith('check-') && !has(self.metadata.generateName)",
            "message": "bad name",
        }
    ]
    create_crd(api, manifest)
    custom.create_namespaced_custom_object(
        fresh_group, "v1", ns, "checks", check_object(fresh_group)
    )
    body = check_object(fresh_group)
    body["metadata"] = {"name": "other"}
    with raises_status(422, "Invalid") as status:
        custom.create_namespaced_custom_object(fresh_group, "v1", ns, "checks", body)
    assert status["message"].endswith(
        '"other" is invalid: <nil>: Invalid value: "object": bad name'
    )


def test_a_crd_whose_rule_matches_a_literal_pattern_go_refuses_is_refused(
    api: ApiClient, fresh_group: str
) -> None:
    # cel-go's ValidateRegexLiterals, in kube-apiserver's base environment since 1.29
    rule = "self.s.matches('^(?=a)')"
    message = _rule_refusal(api, fresh_group, rule)
    assert message.endswith(
        f": compilation failed: ERROR: <input>:1:16: invalid matches argument\n | {rule}\n"
        f" | {'.' * 15}^"
    ), message


def test_a_format_s_problems_word_the_refusal(
    api: ApiClient, custom: client.CustomObjectsApi, ns: str, fresh_group: str
) -> None:
    rule = {
        "rule": "!format.dns1123Label().validate(self.s).hasValue()",
        "messageExpression": "format.dns1123Label().validate(self.s).value().join(', ')",
    }
    create_crd(api, _crd(fresh_group, [rule]))
    with raises_status(422, "Invalid") as status:
        custom.create_namespaced_custom_object(
            fresh_group, "v1", ns, "checks", check_object(fresh_group, s="Not_A_Label")
        )
    [cause] = status["details"]["causes"]
    assert cause["message"].startswith(
        'Invalid value: "object": a lowercase RFC 1123 label must consist of lower case '
        "alphanumeric characters or '-'"
    ), cause


def test_string_of_a_value_is_cel_go_s(
    api: ApiClient, custom: client.CustomObjectsApi, ns: str, fresh_group: str
) -> None:
    rule = {
        "rule": "!isIP(self.s)",
        "messageExpression": "string(ip(self.s)) + ' ' + string(2.0) + ' ' + string(true) + ' ' "
        "+ string(duration('1m30s')) + ' ' + string(timestamp('2024-01-02T03:04:05Z'))",
    }
    create_crd(api, _crd(fresh_group, [rule]))
    with raises_status(422, "Invalid") as status:
        custom.create_namespaced_custom_object(
            fresh_group, "v1", ns, "checks", check_object(fresh_group, s="0:0::1")
        )
    [cause] = status["details"]["causes"]
    assert cause["message"] == 'Invalid value: "object": ::1 2 true 90s 2024-01-02T03:04:05Z'
