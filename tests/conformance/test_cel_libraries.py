"""The functions a CRD's ``x-kubernetes-validations`` rules may call: kube-apiserver 1.31's
base CEL environment (cel-go's standard functions and its strings and sets extensions,
Kubernetes' regex, IP and CIDR libraries), evaluated as kube-apiserver evaluates them."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client import ApiClient

from ._support import assert_status, crd_manifest, create_crd, raises_status, unique

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


def _check(group: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{group}/v1",
        "kind": "Check",
        "metadata": {"name": unique("check")},
        "spec": spec,
    }


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
        custom.create_namespaced_custom_object(group, "v1", ns, "checks", _check(group, **spec))
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
            fresh_group, "v1", ns, "checks", _check(fresh_group, s="(?=a)")
        )
    [cause] = status["details"]["causes"]
    assert cause["field"] == "spec"
    assert cause["message"] == (
        'Invalid value: "object": error parsing regexp: invalid or unsupported Perl syntax: '
        "`(?=` evaluating rule: 'a'.matches(self.s)"
    )
