"""Label and field selectors behave like Kubernetes' apimachinery selectors."""

from __future__ import annotations

import pytest

from mcruntime._selectors import (
    FieldSelector,
    LabelSelector,
    Requirement,
    SelectorError,
    parse_field_selector,
    parse_label_selector,
)

pytestmark = pytest.mark.timeout(10)

# --- label selectors: matching -------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "labels", "expected"),
    [
        ("", {}, True),
        ("", {"a": "b"}, True),
        ("a=b", {"a": "b"}, True),
        ("a==b", {"a": "b"}, True),
        ("a=b", {"a": "c"}, False),
        ("a=b", {}, False),
        ("a!=b", {}, True),
        ("a!=b", {"a": "c"}, True),
        ("a!=b", {"a": "b"}, False),
        ("a in (b,c)", {"a": "c"}, True),
        ("a in (b,c)", {"a": "d"}, False),
        ("a in (b,c)", {}, False),
        ("a notin (b,c)", {}, True),
        ("a notin (b,c)", {"a": "d"}, True),
        ("a notin (b,c)", {"a": "b"}, False),
        ("a", {"a": ""}, True),
        ("a", {"b": "x"}, False),
        ("!a", {"b": "x"}, True),
        ("!a", {"a": "x"}, False),
        ("a=", {"a": ""}, True),
        ("a=", {"a": "x"}, False),
        ("a=b,c=d", {"a": "b", "c": "d"}, True),
        ("a=b,c=d", {"a": "b", "c": "e"}, False),
        ("k>5", {"k": "6"}, True),
        ("k>5", {"k": "5"}, False),
        ("k<5", {"k": "4"}, True),
        ("k>5", {"k": "x"}, False),
        ("k>5", {}, False),
        ("example.com/app=web", {"example.com/app": "web"}, True),
    ],
)
def test_label_selector_matches_like_kubernetes(
    text: str, labels: dict[str, str], expected: bool
) -> None:
    assert LabelSelector.parse(text).matches(labels) is expected


def test_none_labels_are_no_labels() -> None:
    assert LabelSelector.parse("!a").matches(None)
    assert not LabelSelector.parse("a").matches(None)
    assert LabelSelector.parse("").matches(None)


def test_everything_and_empty() -> None:
    for sel in (LabelSelector.parse(None), LabelSelector.parse(""), LabelSelector.parse("  ")):
        assert sel.empty()
        assert str(sel) == ""
        assert sel == LabelSelector.everything()
    assert not LabelSelector.parse("a").empty()


# --- label selectors: syntax ----------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "a=b",
        "a = b , c != d",
        "  x in ( b , a ) ,!y, z  ",
        "a notin(b,)",
        "a in ()",
        "k>3",
        "k<10",
        "a=",
        "example.com/x=y",
        "in in (in)",
        "a.b-c_d=E.f-G_h",
    ],
)
def test_label_selector_round_trips_through_its_canonical_text(text: str) -> None:
    sel = LabelSelector.parse(text)
    assert LabelSelector.parse(str(sel)) == sel
    assert hash(LabelSelector.parse(str(sel))) == hash(sel)


def test_canonical_text_is_sorted_and_normalised() -> None:
    sel = LabelSelector.parse("z, x in (b, a), a==1, !y")
    assert str(sel) == "a=1,x in (a,b),!y,z"
    assert [r.operator for r in sel.requirements] == ["=", "in", "!", "exists"]
    assert LabelSelector.parse("a==b") == LabelSelector.parse("a=b")
    assert LabelSelector.parse("a=b,c=d") == LabelSelector.parse("c=d,a=b")


def test_empty_set_values_mean_empty_string_like_kubernetes() -> None:
    assert LabelSelector.parse("a in ()").matches({"a": ""})
    assert LabelSelector.parse("a in (b,)").requirements[0].values == ("", "b")


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("a=b=c", "'='"),
        ("a in b", "'b'"),
        ("a b", "'b'"),
        ("=b", "'='"),
        ("a,", "end of string"),
        ("!", "end of string"),
        ("a=b,,c", "','"),
        ("a in (b c)", "'c'"),
        ("a in (b", "end of string"),
        ("-a=b", "'-a'"),
        ("a=-b", "'-b'"),
        ("a/b/c=d", "'a/b/c'"),
        ("Bad.Com/x=y", "'Bad.Com/x'"),
        ("/x=y", "'/x'"),
        ("x/=y", "'x/'"),
        ("k>x", "'x'"),
        ("k<-3", "'-3'"),  # an integer, but a label value starts with an alphanumeric
        ("a" * 64 + "=b", "a" * 64),
        ("a=" + "b" * 64, "b" * 64),
        ("!a=b", "'='"),
    ],
)
def test_syntax_errors_name_the_offending_part(text: str, names: str) -> None:
    with pytest.raises(SelectorError) as info:
        LabelSelector.parse(text)
    assert names in str(info.value)
    assert isinstance(info.value, ValueError)


def test_syntax_error_reports_position() -> None:
    with pytest.raises(SelectorError, match="position 3"):
        LabelSelector.parse("a=b=c")


def test_long_prefix_and_names_at_the_limits_are_valid() -> None:
    key = "a" * 63 + "." + "b" * 63 + "/" + "c" * 63
    assert LabelSelector.parse(f"{key}={'d' * 63}").matches({key: "d" * 63})


# --- label selectors: other constructors ------------------------------------------------


def test_from_dict_requires_every_label() -> None:
    sel = LabelSelector.from_dict({"app": "web", "tier": "fe"})
    assert sel.matches({"app": "web", "tier": "fe", "x": "y"})
    assert not sel.matches({"app": "web"})
    assert sel == LabelSelector.parse("tier=fe,app=web")
    assert LabelSelector.from_dict({}).empty()
    with pytest.raises(SelectorError, match="'bad value!'"):
        LabelSelector.from_dict({"app": "bad value!"})


def test_from_label_selector_combines_match_labels_and_expressions() -> None:
    sel = LabelSelector.from_label_selector(
        {
            "matchLabels": {"app": "web"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["fe", "be"]},
                {"key": "env", "operator": "NotIn", "values": ["prod"]},
                {"key": "owner", "operator": "Exists"},
                {"key": "legacy", "operator": "DoesNotExist"},
            ],
        }
    )
    assert sel.matches({"app": "web", "tier": "fe", "owner": "me"})
    assert not sel.matches({"app": "web", "tier": "fe", "owner": "me", "env": "prod"})
    assert not sel.matches({"app": "web", "tier": "fe", "owner": "me", "legacy": "1"})
    assert not sel.matches({"app": "web", "tier": "fe"})
    assert sel == LabelSelector.parse("app=web,tier in (be,fe),env notin (prod),owner,!legacy")


def test_null_label_selector_matches_nothing_but_empty_matches_everything() -> None:
    nothing = LabelSelector.from_label_selector(None)
    assert nothing.is_nothing() and not nothing.empty()
    assert not nothing.matches({})
    assert not nothing.matches({"a": "b"})
    assert nothing != LabelSelector.everything()
    assert LabelSelector.from_label_selector({}).empty()
    assert LabelSelector.from_label_selector({}).matches({"a": "b"})


@pytest.mark.parametrize(
    ("sel", "names"),
    [
        ({"matchExpressions": [{"key": "a", "operator": "Equals", "values": ["b"]}]}, "Equals"),
        ({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]}, "non-empty"),
        ({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["b"]}]}, "empty"),
        ({"matchExpressions": [{"key": "a b", "operator": "Exists"}]}, "'a b'"),
        ({"matchExpressions": [{"key": "a", "operator": "In", "values": "b"}]}, "values"),
        ({"matchLabels": {"a": 1}}, "matchLabels['a']"),
    ],
)
def test_invalid_label_selector_objects_are_rejected(sel: dict, names: str) -> None:
    with pytest.raises(SelectorError) as info:
        LabelSelector.from_label_selector(sel)
    assert names in str(info.value)


def test_exact_values_for_index_lookups() -> None:
    sel = LabelSelector.parse("app=web,tier in (a,b),tier in (b,c),env!=prod")
    assert sel.exact_values("app") == {"web"}
    assert sel.exact_values("tier") == {"b"}
    assert sel.exact_values("env") is None
    assert sel.exact_values("other") is None
    assert LabelSelector.nothing().exact_values("app") == set()


def test_requirement_create_validates() -> None:
    assert Requirement.create("a", "==", ["b"]) == Requirement("a", "=", ("b",))
    assert Requirement.create("a", "in", ["c", "b", "c"]).values == ("b", "c")
    with pytest.raises(SelectorError):
        Requirement.create("a", "=", ["b", "c"])
    with pytest.raises(SelectorError):
        Requirement.create("a", "~", ["b"])
    assert Requirement.create("a", "notin", ["b"]).matches({})


@pytest.mark.parametrize("value", ["-1", "x", str(2**63)])
def test_a_requirement_made_in_code_is_refused_where_the_parser_refuses_it(value: str) -> None:
    # what a server refuses in a selector's text is refused when built in code too
    with pytest.raises(SelectorError) as parsed:
        LabelSelector.parse(f"k>{value}")
    with pytest.raises(SelectorError) as created:
        Requirement.create("k", ">", [value])
    assert repr(value) in str(parsed.value) and repr(value) in str(created.value)
    assert Requirement.create("k", "<", [str(2**63 - 1)]).matches({"k": "1"})


def test_selectors_are_usable_as_dict_keys() -> None:
    cache = {LabelSelector.parse("a=b,c"): 1}
    assert cache[LabelSelector.parse("c, a==b")] == 1
    assert parse_label_selector("a=b") == LabelSelector.parse("a=b")


# --- field selectors ---------------------------------------------------------------------

POD = {
    "metadata": {"name": "web-1", "namespace": "default"},
    "spec": {"nodeName": "node-a", "replicas": 3, "unschedulable": False},
    "status": {"phase": "Running"},
}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", True),
        ("metadata.name=web-1", True),
        ("metadata.name==web-1", True),
        ("metadata.name=web-2", False),
        ("metadata.name!=web-2", True),
        ("metadata.name=web-1,metadata.namespace=default", True),
        ("metadata.name=web-1,metadata.namespace=other", False),
        ("status.phase!=Failed,spec.nodeName=node-a", True),
        ("spec.nodeName=", False),
        ("spec.missing=", True),
        ("spec.missing!=", False),
        ("spec.missing!=x", True),
        ("metadata.name.deeper=", True),
        ("spec.replicas=3", True),
        ("spec.unschedulable=false", True),
        ("spec=x", False),
        ("spec!=x", True),
    ],
)
def test_field_selector_matches_dotted_paths(text: str, expected: bool) -> None:
    assert FieldSelector.parse(text).matches(POD) is expected


def test_field_selector_escapes_round_trip() -> None:
    sel = FieldSelector.parse(r"metadata.name=a\,b\=c\\d")
    assert sel.requirements == (("metadata.name", "=", "a,b=c\\d"),)
    assert sel.matches({"metadata": {"name": "a,b=c\\d"}})
    assert FieldSelector.parse(str(sel)) == sel


def test_field_selector_canonical_text_and_equality() -> None:
    sel = parse_field_selector(" status.phase != Failed , metadata.name==x ")
    assert str(sel) == "metadata.name=x,status.phase!=Failed"
    assert sel == FieldSelector.parse("metadata.name=x,status.phase!=Failed")
    assert hash(sel) == hash(FieldSelector.parse(str(sel)))
    assert FieldSelector.parse(None).empty() and FieldSelector.parse("").empty()
    assert not sel.empty()


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("metadata.name", "'metadata.name'"),
        ("a=b,c", "'c'"),
        ("=x", "'=x'"),
        ("a=b=c", "'b=c'"),
        (r"a=\x", r"'\\x'"),
    ],
)
def test_field_selector_errors_name_the_offending_term(text: str, names: str) -> None:
    with pytest.raises(SelectorError) as info:
        FieldSelector.parse(text)
    assert names in str(info.value)


def test_field_selector_from_dict_and_exact_value() -> None:
    sel = FieldSelector.from_dict({"metadata.name": "web-1", "spec.nodeName": "node-a"})
    assert sel.matches(POD)
    assert sel.exact_value("metadata.name") == "web-1"
    assert FieldSelector.parse("metadata.name!=x").exact_value("metadata.name") is None
    assert FieldSelector.from_dict({}).empty()


def test_field_selector_on_non_object_paths() -> None:
    sel = FieldSelector.parse("metadata.name=x")
    assert not sel.matches({"metadata": "oops"})
    assert FieldSelector.parse("metadata.name=").matches({})
