"""The CEL adapter (`_cel`) and a CRD's rules (`_cel_rules`) without a server."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from mcruntime.envtest import _cel, _cel_rules
from mcruntime.envtest._crds import validate_crd

pytest.importorskip("cel")


def run(expr: str, **variables: Any) -> Any:
    return _cel.compile_rule(expr).run(variables)


@pytest.mark.parametrize(
    "expr",
    [
        "'Hello'.lowerAscii() == 'hello' && 'Hello'.upperAscii() == 'HELLO'",
        "'a,b,c'.split(',') == ['a', 'b', 'c'] && 'a,b,c'.split(',', 2) == ['a', 'b,c']",
        "['a', 'b'].join('-') == 'a-b' && ['a', 'b'].join() == 'ab'",
        "'  x '.trim() == 'x' && 'a-b-c'.replace('-', '_', 1) == 'a_b-c'",
        "'hello'.indexOf('l') == 2 && 'hello'.lastIndexOf('l') == 3",
        "'hello'.substring(1, 3) == 'el' && 'hello'.substring(3) == 'lo'",
        "'hello'.charAt(1) == 'e'",
        "[1, 2, 3].isSorted() && ![2, 1].isSorted()",
        "[1, 2, 3].sum() == 6 && [3, 1, 2].min() == 1 && [3, 1, 2].max() == 3",
        "[1, 2, 3].indexOf(2) == 1 && [1, 2, 2].lastIndexOf(2) == 2",
        "isURL('https://example.com:8443/a?b=c') && !isURL('not a url')",
        "url('https://example.com:8443/a').getHostname() == 'example.com'",
        "url('https://example.com:8443/a').getPort() == '8443'",
        "url('https://example.com/a').getScheme() == 'https'",
        "isQuantity('1.5Gi') && !isQuantity('1.5GB')",
        "quantity('1Gi') == quantity('1024Mi')",
        "quantity('500m').isLessThan(quantity('1'))",
        "quantity('1').add(quantity('500m')) == quantity('1500m')",
        "quantity('2').asInteger() == 2",
        "'abc123'.find('[0-9]+') == '123'",
        "self.all(x, x > 0) && self.exists_one(x, x == 2) && self.map(x, x * 2) == [2, 4]",
    ],
)
def test_kubernetes_extension_functions(expr: str) -> None:
    assert run(expr, self=[1, 2]) is True


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("self.nope == 1", "no such key: nope"),
        ("[1][3] == 1", "index out of bounds: 3"),
        ("1 / 0 == 1", "division by zero"),
        ("'abc'.substring(5) == ''", "index out of range: 5"),
        ("'abc'.lowerAscii(1) == ''", "no such overload"),
    ],
)
def test_evaluation_errors_are_worded_as_cel_go_words_them(expr: str, message: str) -> None:
    with pytest.raises(_cel.EvalError) as info:
        run(expr, self={})
    assert str(info.value) == message


@pytest.mark.parametrize(
    ("expr", "size"),
    [
        ("size('h\u00e9llo')", 5),
        ("'\u65e5\u672c'.size()", 2),
        ("size(self)", 3),
        ("self.size ()", 3),
        ("size(b'\\xc3\\xa9')", 2),
        ("size([1, 2])", 2),
        ("{'a': 1}.size()", 1),
    ],
)
def test_size_counts_a_strings_code_points_as_cel_go(expr: str, size: int) -> None:
    # cel-go's size of a string is its rune count (the library's is its UTF-8 byte count)
    assert run(expr, self="\U0001f642ab") == size


def test_size_is_taken_for_a_call_only() -> None:
    parts = [
        "self.size",  # a field named size: 10
        "size('size(')",  # 5
        r"size(r'\')",  # a raw string, whose backslash escapes nothing: 1
        r'size("""x\"size(""")',  # a quote escaped in a triple-quoted string: 7
    ]
    expr = " + ".join(parts) + " // size('a comment')\n"
    assert run(expr, self={"size": 10}) == 10 + 5 + 1 + 7
    with pytest.raises(_cel.EvalError) as info:
        run("size(1) == 1")
    assert str(info.value) == "no such overload"


@pytest.mark.parametrize(
    ("expr", "value"),
    [
        ("'aB'.matches('^a(?i)b$')", True),  # a flag mid-pattern
        ("matches('abc', '^a')", True),  # the global form
        ("'\u0663'.matches('^\\\\d+$')", False),  # \d is ASCII
        ("'ab\\n'.matches('^ab$')", False),  # $ is the end of the text
        ("'a.b'.matches('^\\\\Qa.b\\\\E$')", True),
        ("self.matches == 1 && 'matches(' != ''", True),  # a field, a string: not calls
        ("'baaab'.findAll('a*')", ["", "aaa", ""]),  # Go drops an empty match after a match
        ("'baaab'.findAll('a*', 2)", ["", "aaa"]),
        ("'x12y3'.find('[[:digit:]]+')", "12"),
    ],
)
def test_regular_expressions_are_go_s(expr: str, value: Any) -> None:
    assert run(expr, self={"matches": 1}) == value


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("'a'.matches('(?=a)')", "error parsing regexp: invalid or unsupported Perl syntax: `(?=`"),
        ("'a'.find('(')", "Illegal regex: error parsing regexp: missing closing ): `(`"),
        (
            "'a'.findAll('a**')",
            "Illegal regex: error parsing regexp: invalid nested repetition operator: `**`",
        ),
    ],
)
def test_a_regular_expression_go_refuses_fails_in_go_s_words(expr: str, message: str) -> None:
    with pytest.raises(_cel.EvalError) as info:
        run(expr)
    assert str(info.value) == message


@pytest.mark.parametrize(
    "expr",
    [
        "isIP('10.0.0.1') && isIP('2001:db8::1') && !isIP('1.2.3') && !isIP('010.0.0.1')",
        "!isIP('::ffff:1.2.3.4') && !isIP('fe80::1%eth0')",  # mapped, zoned: refused
        "ip('10.0.0.1').family() == 4 && ip('::1').family() == 6",
        "ip('::1') == ip('0:0::1') && ip('10.0.0.1') != ip('10.0.0.2')",
        "ip('0.0.0.0').isUnspecified() && ip('::').isUnspecified()",
        "ip('127.1.2.3').isLoopback() && !ip('::2').isLoopback()",
        "ip('224.0.0.1').isLinkLocalMulticast() && !ip('224.0.1.1').isLinkLocalMulticast()",
        "ip('ff02::1').isLinkLocalMulticast() && !ip('fd00::1').isLinkLocalMulticast()",
        "ip('169.254.169.254').isLinkLocalUnicast() && ip('fe80::1').isLinkLocalUnicast()",
        "ip('192.168.0.1').isGlobalUnicast() && !ip('255.255.255.255').isGlobalUnicast()",
        "!ip('ff00::1').isGlobalUnicast() && ip('2001:db8::abcd').isGlobalUnicast()",
        "ip.isCanonical('2001:db8::abcd') && !ip.isCanonical('2001:DB8::ABCD')",
        "isCIDR('10.0.0.0/8') && !isCIDR('10.0.0.0/33') && !isCIDR('10.0.0.0')",
        "cidr('192.168.0.0/24').containsIP(ip('192.168.0.1'))",
        "!cidr('192.168.0.0/24').containsIP('192.168.1.1')",
        "cidr('192.168.0.0/24').containsCIDR(cidr('192.168.0.0/25'))",
        "!cidr('192.168.0.0/24').containsCIDR('192.168.0.0/23')",
        "cidr('192.168.0.1/24').ip() == ip('192.168.0.1')",
        "cidr('192.168.0.1/24').masked() == cidr('192.168.0.0/24')",
        "cidr('192.168.0.1/24') != cidr('192.168.0.1/24').masked()",
        "cidr('2001:db8::/32').prefixLength() == 32",
        "'%s: %d of %.2f'.format(['a', 3, 1.5]) == 'a: 3 of 1.50'",
        "'%s %s %s'.format([[1, 'a'], {'b': 1, 'a': true}, 2.5]) == '[1, \"a\"] {\"a\":true, \"b\":1} 2.5'",
        "'%b %o %x %X %%'.format([5, 8, 255, 'hi']) == '101 10 ff 6869 %'",
        "strings.quote('a\"b\\n') == '\"a\\\\\"b\\\\n\"'",
        "sets.contains(['a', 'b'], ['a']) && !sets.contains(['a'], ['a', 'b'])",
        "sets.equivalent([1, 2, 2], [2, 1]) && sets.intersects(['a', 'b'], ['b'])",
        "self.sets.contains('y')",  # a field named sets: a string's contains
    ],
)
def test_kubernetes_ip_cidr_format_quote_and_sets(expr: str) -> None:
    assert run(expr, self={"sets": "xyz"}) is True


@pytest.mark.parametrize(
    ("expr", "value"),
    [
        ("format.dns1123Label().validate('my-name').hasValue()", False),
        ("format.dns1123LabelPrefix().validate('my-prefix-').hasValue()", False),
        ("format.dns1035Label().validate('1abc').hasValue()", True),
        ("format.qualifiedName().validate('example.com/Name').hasValue()", False),
        ("format.named('labelValue').value().validate('a b').hasValue()", True),
        ("format.named('nope').hasValue()", False),
        (
            "format.uri().validate('relative').value()",
            ['parse "relative": invalid URI for request'],
        ),
        ("format.uuid().validate('x').value()", ["does not match the UUID format"]),
        ("format.byte().validate('aGk=').hasValue()", False),
        ("format.date().validate('2024-02-30').value()", ["invalid date"]),
        ("format.datetime().validate('2024-01-02T03:04:05Z').hasValue()", False),
    ],
)
def test_the_format_library(expr: str, value: Any) -> None:
    assert run(expr) == value


@pytest.mark.parametrize(
    ("expr", "text"),
    [
        ("string(2.0)", "2"),
        ("string(1e21)", "1e+21"),
        ("string(1234567.0)", "1.234567e+06"),
        ("string(true)", "true"),
        ("string(timestamp('2024-01-02T03:04:05.120Z'))", "2024-01-02T03:04:05.12Z"),
        ("string(duration('1m30s'))", "90s"),
        ("string(ip('::1'))", "::1"),
        ("string(cidr('10.1.2.3/8').masked())", "10.0.0.0/8"),
        ("'n=' + string(self.string)", "n=3"),  # a field named string is no call
    ],
)
def test_string_words_a_value_as_cel_go_does(expr: str, text: str) -> None:
    assert run(expr, self={"string": 3}) == text


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        (
            "ip('x') == ip('x')",
            'IP Address "x" parse error during conversion from string: ParseAddr("x"): '
            "unable to parse IP",
        ),
        (
            "ip('fe80::1%eth0') == ip('::')",
            'IP address "fe80::1%eth0" with zone value is not allowed',
        ),
        (
            "cidr('192.168.0.0/') == cidr('::/0')",
            "network address parse error during conversion from string: network address parse "
            'error during conversion from string: netip.ParsePrefix("192.168.0.0/"): bad bits '
            'after slash: ""',
        ),
        ("'%s %s'.format([1]) == ''", "index 1 out of range"),
    ],
)
def test_kubernetes_library_errors_are_worded_as_kube_words_them(expr: str, message: str) -> None:
    with pytest.raises(_cel.EvalError) as info:
        run(expr)
    assert str(info.value) == message


def test_a_rule_that_does_not_parse_is_a_compile_error_in_cel_go_s_format() -> None:
    with pytest.raises(_cel.CompileError) as info:
        _cel.compile_rule("self.replicas <=")
    assert str(info.value).startswith("ERROR: <input>:1:17: Syntax error: ")
    assert str(info.value).endswith("\n | self.replicas <=\n | ................^")


def schema(rules: list[dict[str, Any]], spec: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "type": "object",
        "x-kubernetes-validations": rules,
        "properties": {
            "spec": spec
            or {
                "type": "object",
                "properties": {"n": {"type": "integer"}, "ratio": {"type": "number"}},
            }
        },
    }


def obj(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "x/v1", "kind": "X", "metadata": {"name": "a", "uid": "u"}, "spec": spec}


def test_a_schema_without_rules_builds_nothing() -> None:
    assert _cel_rules.build({"type": "object", "properties": {"spec": {"type": "object"}}}) is None


def test_a_root_rule_sees_type_and_object_meta_and_fails_at_nil() -> None:
    rules = _cel_rules.build(
        schema([{"rule": "self.metadata.name == 'b' && !has(self.metadata.uid)"}])
    )
    assert rules is not None
    causes, warnings = rules.validate(obj(n=1), None, ratchet=False)
    assert causes == [
        (
            "FieldValueInvalid",
            "<nil>",
            "<nil>: Invalid value: \"object\": failed rule: self.metadata.name == 'b' && "
            "!has(self.metadata.uid)",
        )
    ]
    assert warnings == []


def test_a_number_is_a_double_and_keywords_and_dashes_are_escaped() -> None:
    spec = {
        "type": "object",
        "properties": {
            "ratio": {"type": "number"},
            "namespace": {"type": "string"},
            "max-size": {"type": "integer"},
        },
    }
    rule = "self.spec.ratio * 2.0 == 2.0 && self.spec.__namespace__ == 'x' && self.spec.max__dash__size == 3"
    rules = _cel_rules.build(schema([{"rule": rule}], spec))
    assert rules is not None
    body = obj(ratio=1, namespace="x", **{"max-size": 3})
    assert rules.validate(body, None, ratchet=False) == ([], [])


def test_an_unchanged_node_s_failure_is_a_warning_on_update_ratcheting() -> None:
    rules = _cel_rules.build(
        schema(
            [],
            {
                "type": "object",
                "x-kubernetes-validations": [{"rule": "self.n < 5"}],
                "properties": {"n": {"type": "integer"}, "m": {"type": "integer"}},
            },
        )
    )
    assert rules is not None
    old = obj(n=7)
    assert rules.validate(obj(n=7, m=1), old, ratchet=True)[0] != []  # spec changed
    causes, warnings = rules.validate({**obj(n=7), "metadata": {"name": "a"}}, old, ratchet=True)
    assert causes == []
    assert warnings == ['spec: Invalid value: "object": failed rule: self.n < 5']
    assert rules.validate(obj(n=7), old, ratchet=False)[0] != []  # without ratcheting


def test_ratcheting_tells_unchanged_values_as_kube_apiserver_s_correlated_object() -> None:
    # a map list reordered is unchanged (its items match by key): its failing rule warns;
    # an object holding keys its schema does not declare is never unchanged: its rule fails
    ports = {
        "type": "array",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["name"],
        "x-kubernetes-validations": [{"rule": "self.size() <= 1", "message": "one port"}],
        "items": {
            "type": "object",
            "required": ["name"],
            "properties": {"name": {"type": "string"}, "port": {"type": "integer"}},
        },
    }
    free = {
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,
        "x-kubernetes-validations": [{"rule": "self.size() <= 1", "message": "one key"}],
    }
    rules = _cel_rules.build(
        schema([], {"type": "object", "properties": {"ports": ports, "free": free}})
    )
    assert rules is not None
    two = [{"name": "a", "port": 1}, {"name": "b", "port": 2}]
    old = obj(ports=two, free={"x": 1, "y": 2})
    causes, warnings = rules.validate(
        obj(ports=two[::-1], free={"x": 1, "y": 2}), old, ratchet=True
    )
    assert [c[2] for c in causes] == ['spec.free: Invalid value: "object": one key']
    assert warnings == ['spec.ports: Invalid value: "array": one port']


def test_optional_old_self_runs_on_create_with_an_empty_optional() -> None:
    spec = {
        "type": "object",
        "properties": {
            "n": {
                "type": "integer",
                "x-kubernetes-validations": [
                    {
                        "rule": "!oldSelf.hasValue() || self >= oldSelf.value()",
                        "optionalOldSelf": True,
                        "message": "may not shrink",
                    }
                ],
            }
        },
    }
    rules = _cel_rules.build(schema([], spec))
    assert rules is not None
    assert rules.validate(obj(n=1), None, ratchet=False) == ([], [])
    causes, _ = rules.validate(obj(n=1), obj(n=2), ratchet=True)
    assert causes == [
        ("FieldValueInvalid", "spec.n", 'spec.n: Invalid value: "integer": may not shrink')
    ]


def crd(rules: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "metadata": {"name": "xs.example.com"},
        "spec": {
            "group": "example.com",
            "names": {"plural": "xs", "kind": "X"},
            "scope": "Namespaced",
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": schema(rules)},
                }
            ],
        },
    }


def test_a_rule_s_reason_and_field_path_are_checked_with_the_crd() -> None:
    with pytest.raises(Exception) as info:
        validate_crd(crd([{"rule": "true", "reason": "Nope", "fieldPath": ".missing"}]))
    message = str(info.value)
    assert 'x-kubernetes-validations[0].reason: Unsupported value: "Nope"' in message
    assert (
        'x-kubernetes-validations[0].fieldPath: Invalid value: ".missing": fieldPath must be a valid path'
        in message
    )


def test_without_the_library_rules_are_accepted_unchecked_with_one_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(_cel, "_library", lambda: None)
    monkeypatch.setattr(_cel, "_warned", set())
    bad = crd([{"rule": "self.n <="}])
    with caplog.at_level(logging.WARNING, logger="mcruntime.envtest"):
        validate_crd(bad)
        validate_crd(bad)
    assert _cel_rules.build(schema([{"rule": "false"}])) is None
    warnings = [
        r.getMessage() for r in caplog.records if "x-kubernetes-validations" in r.getMessage()
    ]
    assert len(warnings) == 1
    assert "xs.example.com" in warnings[0] and "mcruntime[cel]" in warnings[0]


def test_the_library_is_not_imported_with_mcruntime() -> None:
    import subprocess
    import sys

    code = "import sys, mcruntime, mcruntime.envtest, mcruntime.client; print('cel' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


_TYPED = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "sub": {"type": "object", "properties": {"a": {"type": "string"}}},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        "items": {"type": "array", "items": {"type": "object", "properties": {}}},
    },
}


@pytest.mark.parametrize(
    ("rule", "root", "undefined"),
    [
        ("self.name == oldSelf.name", False, None),
        ("self.nmae == 'x'", False, "nmae"),
        ("oldSelf.sub.b == 'x'", False, "b"),
        ("has(self.sub.a) && !has(self.sub.c)", False, "c"),
        ("self.name.startsWith('x')", False, None),  # a method, not a field
        ("'self.nope' == self.name && \"oldSelf.x\" != ''", False, None),  # in strings
        ("'''a ' self.x''' == self.name", False, None),  # a triple-quoted string
        ("self.name == 'x' // self.nope", False, None),  # a comment
        ("self.labels.anything == 'x'", False, None),  # a map's key
        ("self.free.anything.deeper == 1", False, None),  # preserved unknown fields
        ("self.items.all(i, i.x == 1)", False, None),  # not the rule's own value
        ("self.metadata.name == 'x' && self.kind == 'K'", True, None),  # the root's own
        ("self.metadata.generateName == 'x'", True, None),
        ("self.metadata.namespace == 'x'", True, "namespace"),  # name, generateName only
        ("has(self.metadata.labels)", True, "labels"),
        ("self.metadata.name == 'x'", False, "metadata"),  # not at the root
        ("self.__namespace__ == 'x'", False, None),  # escaped names are left alone
    ],
)
def test_a_rule_naming_a_field_the_schema_does_not_declare_does_not_compile(
    rule: str, root: bool, undefined: str | None
) -> None:
    if undefined is None:
        _cel_rules.undefined_field(rule, _TYPED, root)
        return
    with pytest.raises(_cel.CompileError) as e:
        _cel_rules.undefined_field(rule, _TYPED, root)
    first, line, caret = str(e.value).split("\n")
    column = int(first.split(":")[3])
    assert first.endswith(f": undefined field '{undefined}'")
    assert line == f" | {rule}"
    # cel-go marks the select's dot: the field follows it
    assert caret == " | " + "." * (column - 1) + "^"
    assert rule[column - 1] == "." and rule[column:].startswith(undefined)
