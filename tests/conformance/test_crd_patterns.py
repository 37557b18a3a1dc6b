"""A CRD's ``pattern``s are Go regular expressions (RE2): compiled with ``regexp.Compile``
when the CRD is written, values matched with ``regexp.MatchString``."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client import ApiClient

from ._support import check_object, crd_manifest, create_crd, raises_status

pytestmark = pytest.mark.timeout(60)

_AT = "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[s].pattern"


def _crd(group: str, props: dict[str, Any]) -> dict[str, Any]:
    manifest = crd_manifest(group, "checks", "Check")
    schema = manifest["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    schema["properties"]["spec"] = {"type": "object", "properties": props}
    return manifest


@pytest.mark.parametrize(
    ("pattern", "shown", "why"),
    [
        ("^(?=a)a$", '"^(?=a)a$"', "invalid or unsupported Perl syntax: `(?=`"),
        ("^(a)\\1$", '"^(a)\\\\1$"', "invalid escape sequence: `\\1`"),
        ("+", '"+"', "missing argument to repetition operator: `+`"),
        ("a(b", '"a(b"', "missing closing ): `a(b`"),
    ],
    ids=["lookahead", "backreference", "bare-repeat", "unclosed"],
)
def test_a_pattern_go_refuses_refuses_the_crd_in_go_s_words(
    api: ApiClient, fresh_group: str, pattern: str, shown: str, why: str
) -> None:
    # apiextensions' validateValueValidation: regexp.Compile
    manifest = _crd(fresh_group, {"s": {"type": "string", "pattern": pattern}})
    with raises_status(422, "Invalid") as status:
        client.ApiextensionsV1Api(api).create_custom_resource_definition(manifest)
    detail = (
        f"Invalid value: {shown}: must be a valid regular expression, but isn't: "
        f"error parsing regexp: {why}"
    )
    assert {"reason": "FieldValueInvalid", "message": detail, "field": _AT} in status["details"][
        "causes"
    ]
    assert f"{_AT}: {detail}" in status["message"]


#: pattern, values it matches, values it does not (as Go's regexp has them)
_PATTERNS: list[tuple[str, list[str], list[str]]] = [
    ("^(?i)(abort|warn)?$", ["ABORT", "warn", ""], ["x"]),  # a flag mid-pattern (PrometheusRule)
    ("^[[:alpha:]]+$", ["abc"], [":"]),  # a POSIX class
    ("^abc$", ["abc"], ["abc\n"]),  # $ is the end of the text
    ("^abc\\z", ["abc"], ["abcd"]),
    ("^\\pL+$", ["abc", "\u00e9t\u00e9"], ["1"]),  # a Unicode class
    ("^\\Qa.b\\E$", ["a.b"], ["axb"]),  # quoted text
    ("^\\d+$", ["123"], ["\u0663"]),  # \d is ASCII digits only
    ("b", ["abc"], ["xyz"]),  # found anywhere
]


@pytest.mark.parametrize(("pattern", "matching", "other"), _PATTERNS)
def test_patterns_are_go_regular_expressions(
    api: ApiClient,
    custom: client.CustomObjectsApi,
    ns: str,
    fresh_group: str,
    pattern: str,
    matching: list[str],
    other: list[str],
) -> None:
    create_crd(api, _crd(fresh_group, {"s": {"type": "string", "pattern": pattern}}))
    for value in matching:
        created = custom.create_namespaced_custom_object(
            fresh_group, "v1", ns, "checks", check_object(fresh_group, s=value)
        )
        assert created["spec"] == {"s": value}
    for value in other:
        with raises_status(422, "Invalid") as status:
            custom.create_namespaced_custom_object(
                fresh_group, "v1", ns, "checks", check_object(fresh_group, s=value)
            )
        [cause] = status["details"]["causes"]
        assert cause["field"] == "spec.s"
        assert cause["message"].endswith(f"spec.s in body should match '{pattern}'")
