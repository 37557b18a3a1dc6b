"""JSON merge patch, JSON patch and strategic merge patch follow their specifications."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from mcruntime._patch import (
    DEFAULT_MERGE_KEYS,
    MergeKeyMissing,
    PatchError,
    copy_json,
    create_merge_patch,
    json_equal,
    json_patch,
    merge_keys_for,
    merge_patch,
    strategic_merge_patch,
)

pytestmark = pytest.mark.timeout(10)

# --- RFC 7386 ------------------------------------------------------------------------

RFC7386_APPENDIX_A = [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    (["a", "b"], ["c", "d"], ["c", "d"]),
    ({"a": "b"}, ["c"], ["c"]),
    ({"a": "foo"}, None, None),
    ({"a": "foo"}, "bar", "bar"),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
]


@pytest.mark.parametrize(("target", "patch", "expected"), RFC7386_APPENDIX_A)
def test_merge_patch_rfc7386_appendix(target: Any, patch: Any, expected: Any) -> None:
    before = copy.deepcopy(target), copy.deepcopy(patch)
    assert merge_patch(target, patch) == expected
    assert (target, patch) == before


def test_merge_patch_does_not_mutate_nested_target() -> None:
    target = {"metadata": {"labels": {"a": "1"}}, "spec": {"x": 1}}
    result = merge_patch(target, {"metadata": {"labels": {"b": "2"}}})
    assert result == {"metadata": {"labels": {"a": "1", "b": "2"}}, "spec": {"x": 1}}
    assert target == {"metadata": {"labels": {"a": "1"}}, "spec": {"x": 1}}
    assert result["metadata"] is not target["metadata"]


@pytest.mark.parametrize(
    ("original", "modified"),
    [(t, e) for t, _, e in RFC7386_APPENDIX_A if not (isinstance(e, dict) and None in e.values())],
)
def test_create_merge_patch_reproduces_the_modified_document(original: Any, modified: Any) -> None:
    assert merge_patch(original, create_merge_patch(original, modified)) == modified


def test_create_merge_patch_is_minimal() -> None:
    original = {"metadata": {"name": "x", "labels": {"a": "1", "b": "2"}}, "spec": {"n": 1}}
    modified = {"metadata": {"name": "x", "labels": {"a": "1", "c": "3"}}, "spec": {"n": 1}}
    assert create_merge_patch(original, modified) == {"metadata": {"labels": {"b": None, "c": "3"}}}
    assert create_merge_patch(original, copy.deepcopy(original)) == {}
    assert create_merge_patch({"n": 1}, {"n": True}) == {"n": True}


# --- RFC 6902 --------------------------------------------------------------------------

RFC6902_APPENDIX_A = [
    ("A.1", {"foo": "bar"}, [{"op": "add", "path": "/baz", "value": "qux"}],
     {"baz": "qux", "foo": "bar"}),
    ("A.2", {"foo": ["bar", "baz"]}, [{"op": "add", "path": "/foo/1", "value": "qux"}],
     {"foo": ["bar", "qux", "baz"]}),
    ("A.3", {"baz": "qux", "foo": "bar"}, [{"op": "remove", "path": "/baz"}], {"foo": "bar"}),
    ("A.4", {"foo": ["bar", "qux", "baz"]}, [{"op": "remove", "path": "/foo/1"}],
     {"foo": ["bar", "baz"]}),
    ("A.5", {"baz": "qux", "foo": "bar"}, [{"op": "replace", "path": "/baz", "value": "boo"}],
     {"baz": "boo", "foo": "bar"}),
    ("A.6", {"foo": {"bar": "baz", "waldo": "fred"}, "qux": {"corge": "grault"}},
     [{"op": "move", "from": "/foo/waldo", "path": "/qux/thud"}],
     {"foo": {"bar": "baz"}, "qux": {"corge": "grault", "thud": "fred"}}),
    ("A.7", {"foo": ["all", "grass", "cows", "eat"]},
     [{"op": "move", "from": "/foo/1", "path": "/foo/3"}],
     {"foo": ["all", "cows", "eat", "grass"]}),
    ("A.8", {"baz": "qux", "foo": ["a", 2, "c"]},
     [{"op": "test", "path": "/baz", "value": "qux"}, {"op": "test", "path": "/foo/1", "value": 2}],
     {"baz": "qux", "foo": ["a", 2, "c"]}),
    ("A.10", {"foo": "bar"}, [{"op": "add", "path": "/child", "value": {"grandchild": {}}}],
     {"foo": "bar", "child": {"grandchild": {}}}),
    ("A.11", {"foo": "bar"}, [{"op": "add", "path": "/baz", "value": "qux", "xyz": 123}],
     {"foo": "bar", "baz": "qux"}),
    ("A.14", {"/": 9, "~1": 10}, [{"op": "test", "path": "/~01", "value": 10}],
     {"/": 9, "~1": 10}),
    ("A.16", {"foo": ["bar"]}, [{"op": "add", "path": "/foo/-", "value": ["abc", "def"]}],
     {"foo": ["bar", ["abc", "def"]]}),
]  # fmt: skip


@pytest.mark.parametrize(
    ("target", "ops", "expected"),
    [case[1:] for case in RFC6902_APPENDIX_A],
    ids=[case[0] for case in RFC6902_APPENDIX_A],
)
def test_json_patch_rfc6902_appendix(target: Any, ops: list, expected: Any) -> None:
    before = copy.deepcopy(target)
    assert json_patch(target, ops) == expected
    assert target == before


@pytest.mark.parametrize(
    ("name", "target", "ops", "names"),
    [
        ("A.9", {"baz": "qux"}, [{"op": "test", "path": "/baz", "value": "bar"}],
         "operation 0 (test '/baz')"),
        ("A.12", {"foo": "bar"}, [{"op": "add", "path": "/baz/bat", "value": "qux"}], "'/baz'"),
        ("A.15", {"/": 9, "~1": 10}, [{"op": "test", "path": "/~01", "value": "10"}],
         "operation 0 (test '/~01')"),
    ],
)  # fmt: skip
def test_json_patch_rfc6902_appendix_errors(name: str, target: Any, ops: list, names: str) -> None:
    with pytest.raises(PatchError) as info:
        json_patch(target, ops)
    assert names in str(info.value)


@pytest.mark.parametrize(
    ("target", "ops", "names"),
    [
        ({}, [{"op": "bogus", "path": "/a"}], "operation 0 (bogus '/a'): unknown op 'bogus'"),
        ({}, [{"path": "/a"}], "operation 0: unknown op None"),
        ({}, [{"op": "add", "value": 1}], "missing 'path'"),
        ({}, [{"op": "add", "path": "/a"}], "missing 'value'"),
        ({}, [{"op": "move", "path": "/a"}], "missing 'from'"),
        ({}, [{"op": "add", "path": "a", "value": 1}], "must start with '/'"),
        ({"a": 1}, [{"op": "remove", "path": "/b"}], "operation 0 (remove '/b')"),
        ({"a": 1}, [{"op": "replace", "path": "/b", "value": 2}], "'/b' does not exist"),
        ({"a": [1]}, [{"op": "add", "path": "/a/2", "value": 2}], "out of bounds"),
        ({"a": [1]}, [{"op": "add", "path": "/a/01", "value": 2}], "'01'"),
        ({"a": [1]}, [{"op": "remove", "path": "/a/-"}], "'-'"),
        ({"a": [1]}, [{"op": "remove", "path": "/a/1"}], "out of bounds"),
        ({"a": 1}, [{"op": "add", "path": "/a/b", "value": 2}], "'/a' is a number"),
        ({"a": {"b": {}}}, [{"op": "move", "from": "/a", "path": "/a/b/c"}], "own children"),
        ({"a": 1}, [{"op": "copy", "from": "/x", "path": "/b"}], "'/x' does not exist"),
        ({"a": 1}, [{"op": "add", "path": "/~2", "value": 1}], "'~'"),
        ({}, [{"op": "remove", "path": ""}], "whole document"),
        ({}, {"op": "add"}, "array of operations"),
        ({}, ["add"], "operation 0: must be an object"),
    ],
)
def test_json_patch_errors_name_the_operation_and_path(target: Any, ops: Any, names: str) -> None:
    with pytest.raises(PatchError) as info:
        json_patch(target, ops)
    assert names in str(info.value)


def test_json_patch_is_atomic_and_never_mutates() -> None:
    target = {"metadata": {"labels": {"a": "1"}}, "items": [1, 2]}
    before = copy.deepcopy(target)
    with pytest.raises(PatchError, match="operation 2"):
        json_patch(
            target,
            [
                {"op": "add", "path": "/metadata/labels/b", "value": "2"},
                {"op": "remove", "path": "/items/0"},
                {"op": "test", "path": "/items/0", "value": 99},
            ],
        )
    assert target == before
    result = json_patch(target, [{"op": "add", "path": "/metadata/labels/b", "value": "2"}])
    assert target == before
    assert result["metadata"]["labels"] == {"a": "1", "b": "2"}
    assert result["items"] is target["items"]


def test_json_patch_whole_document_and_pointer_escapes() -> None:
    assert json_patch({"a": 1}, [{"op": "replace", "path": "", "value": [1]}]) == [1]
    assert json_patch({"a": 1}, [{"op": "add", "path": "", "value": {"b": 2}}]) == {"b": 2}
    doc = {"metadata": {"annotations": {}}}
    out = json_patch(
        doc, [{"op": "add", "path": "/metadata/annotations/example.com~1owner~0x", "value": "me"}]
    )
    assert out["metadata"]["annotations"] == {"example.com/owner~x": "me"}


def test_json_patch_copy_is_independent_of_its_source() -> None:
    result = json_patch(
        {"a": {"x": [1]}},
        [
            {"op": "copy", "from": "/a", "path": "/b"},
            {"op": "add", "path": "/b/x/-", "value": 2},
        ],
    )
    assert result == {"a": {"x": [1]}, "b": {"x": [1, 2]}}


def test_json_patch_does_not_mutate_values_from_the_patch() -> None:
    value = {"k": "v"}
    ops = [
        {"op": "add", "path": "/a", "value": value},
        {"op": "add", "path": "/a/k2", "value": "v2"},
    ]
    assert json_patch({}, ops) == {"a": {"k": "v", "k2": "v2"}}
    assert value == {"k": "v"}


def test_json_patch_move_within_same_path_is_a_noop() -> None:
    assert json_patch({"a": 1}, [{"op": "move", "from": "/a", "path": "/a"}]) == {"a": 1}


def test_json_equal_distinguishes_booleans_from_numbers() -> None:
    assert json_equal(1, 1.0)
    assert not json_equal(True, 1)
    assert not json_equal("1", 1)
    assert json_equal({"a": [1, {"b": None}]}, {"a": [1.0, {"b": None}]})
    assert not json_equal({"a": 1}, {"b": 1})
    assert not json_equal([1, 2], [2, 1])


def test_copy_json_is_deep() -> None:
    src = {"a": [{"b": 1}]}
    dup = copy_json(src)
    dup["a"][0]["b"] = 2
    assert src == {"a": [{"b": 1}]}


# --- strategic merge patch ----------------------------------------------------------------


def _deployment() -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "finalizers": ["a.example.com/f"], "labels": {"app": "web"}},
        "spec": {
            "replicas": 1,
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "app",
                            "image": "app:1",
                            "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                            "ports": [{"containerPort": 80, "protocol": "TCP"}],
                            "args": ["--x"],
                        },
                        {"name": "sidecar", "image": "side:1"},
                    ],
                    "tolerations": [{"key": "k", "operator": "Exists"}],
                }
            },
        },
    }


def _containers(obj: dict[str, Any]) -> list[dict[str, Any]]:
    return obj["spec"]["template"]["spec"]["containers"]


def test_containers_merge_by_name_and_env_by_name() -> None:
    target = _deployment()
    before = copy.deepcopy(target)
    patch = {
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {"name": "app", "image": "app:2", "env": [{"name": "B", "value": "3"}]}
                    ]
                }
            }
        }
    }
    result = strategic_merge_patch(target, patch)
    assert target == before
    app, sidecar = _containers(result)
    assert app["image"] == "app:2"
    assert app["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "3"}]
    assert app["ports"] == [{"containerPort": 80, "protocol": "TCP"}]
    assert app["args"] == ["--x"]
    assert sidecar == {"name": "sidecar", "image": "side:1"}


def test_new_list_items_are_placed_like_kubernetes_places_them() -> None:
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "new", "image": "n:1"}]}}}}
    result = strategic_merge_patch(_deployment(), patch)
    assert [c["name"] for c in _containers(result)] == ["new", "app", "sidecar"]
    ordered = {
        "spec": {
            "template": {
                "spec": {
                    "$setElementOrder/containers": [
                        {"name": "app"},
                        {"name": "sidecar"},
                        {"name": "new"},
                    ],
                    "containers": [{"name": "new", "image": "n:1"}],
                }
            }
        }
    }
    result = strategic_merge_patch(_deployment(), ordered)
    assert [c["name"] for c in _containers(result)] == ["app", "sidecar", "new"]
    assert "$setElementOrder/containers" not in result["spec"]["template"]["spec"]


def test_finalizers_merge_as_a_set() -> None:
    result = strategic_merge_patch(
        _deployment(), {"metadata": {"finalizers": ["b.example.com/f", "a.example.com/f"]}}
    )
    assert sorted(result["metadata"]["finalizers"]) == ["a.example.com/f", "b.example.com/f"]
    assert len(result["metadata"]["finalizers"]) == 2


def test_delete_from_primitive_list_removes_finalizers() -> None:
    target = _deployment()
    target["metadata"]["finalizers"].append("b.example.com/f")
    result = strategic_merge_patch(
        target, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a.example.com/f"]}}
    )
    assert result["metadata"]["finalizers"] == ["b.example.com/f"]
    untouched = strategic_merge_patch(
        {"metadata": {}}, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["x"]}}
    )
    assert untouched == {"metadata": {}}


def test_patch_delete_removes_a_list_element_by_key() -> None:
    patch = {
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {"name": "sidecar", "$patch": "delete"},
                        {"name": "app", "env": [{"name": "A", "$patch": "delete"}]},
                    ]
                }
            }
        }
    }
    result = strategic_merge_patch(_deployment(), patch)
    (app,) = _containers(result)
    assert app["name"] == "app"
    assert app["env"] == [{"name": "B", "value": "2"}]


def test_patch_replace_replaces_a_list_or_a_map() -> None:
    patch = {
        "metadata": {"labels": {"$patch": "replace", "only": "this"}},
        "spec": {
            "template": {
                "spec": {"containers": [{"$patch": "replace"}, {"name": "solo", "image": "s:1"}]}
            }
        },
    }
    result = strategic_merge_patch(_deployment(), patch)
    assert result["metadata"]["labels"] == {"only": "this"}
    assert _containers(result) == [{"name": "solo", "image": "s:1"}]


def test_patch_delete_on_a_map_empties_it() -> None:
    result = strategic_merge_patch(_deployment(), {"metadata": {"labels": {"$patch": "delete"}}})
    assert result["metadata"]["labels"] == {}


def test_null_deletes_and_lists_without_strategy_are_replaced() -> None:
    patch = {
        "metadata": {"labels": None},
        "spec": {
            "template": {
                "spec": {
                    "tolerations": [{"key": "other", "operator": "Exists"}],
                    "containers": [{"name": "app", "args": ["--y"], "image": None}],
                }
            }
        },
    }
    result = strategic_merge_patch(_deployment(), patch)
    assert "labels" not in result["metadata"]
    spec = result["spec"]["template"]["spec"]
    assert spec["tolerations"] == [{"key": "other", "operator": "Exists"}]
    assert spec["containers"][0]["args"] == ["--y"]
    assert "image" not in spec["containers"][0]


def test_retain_keys_clears_fields_not_listed() -> None:
    target = {"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}}
    patch = {"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}}
    assert strategic_merge_patch(target, patch) == {"spec": {"strategy": {"type": "Recreate"}}}
    with pytest.raises(PatchError, match="'other' is set but not in \\$retainKeys"):
        strategic_merge_patch(target, {"spec": {"strategy": {"$retainKeys": [], "other": 1}}})


def test_service_ports_merge_by_port_container_ports_by_container_port() -> None:
    svc = {"spec": {"ports": [{"port": 80, "targetPort": 8080}, {"port": 443}]}}
    result = strategic_merge_patch(svc, {"spec": {"ports": [{"port": 80, "targetPort": 9090}]}})
    assert result["spec"]["ports"] == [{"port": 80, "targetPort": 9090}, {"port": 443}]
    patch = {
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {"name": "app", "ports": [{"containerPort": 80, "name": "http"}]}
                    ]
                }
            }
        }
    }
    (app, _) = _containers(strategic_merge_patch(_deployment(), patch))
    assert app["ports"] == [{"containerPort": 80, "protocol": "TCP", "name": "http"}]


def test_ports_outside_containers_and_services_are_replaced() -> None:
    policy = {"spec": {"ingress": [{"ports": [{"port": 80}]}]}}
    patch = {"spec": {"ingress": [{"ports": [{"port": 443}]}]}}
    assert strategic_merge_patch(policy, patch) == patch
    slice_ = {"ports": [{"port": 80, "name": "http"}]}
    assert strategic_merge_patch(slice_, {"ports": [{"port": 443}]}) == {"ports": [{"port": 443}]}


def test_conditions_merge_by_type() -> None:
    target = {"status": {"conditions": [{"type": "Ready", "status": "False"}]}}
    patch = {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    result = strategic_merge_patch(target, patch)
    assert result["status"]["conditions"] == [{"type": "Ready", "status": "True"}]


def test_custom_merge_keys_and_scoped_keys() -> None:
    target = {"spec": {"items": [{"id": 1, "v": "a"}], "other": {"items": [{"id": 1}]}}}
    patch = {"spec": {"items": [{"id": 1, "v": "b"}], "other": {"items": [{"id": 2}]}}}
    result = strategic_merge_patch(target, patch, {"spec.items": "id"})
    assert result["spec"]["items"] == [{"id": 1, "v": "b"}]
    assert result["spec"]["other"]["items"] == [{"id": 2}]
    assert strategic_merge_patch({"xs": [1]}, {"xs": [2]}, {}) == {"xs": [2]}


@pytest.mark.parametrize(
    ("patch", "names"),
    [
        ({"metadata": {"$patch": "bogus"}}, "metadata: invalid $patch directive 'bogus'"),
        (
            {"spec": {"template": {"spec": {"containers": [{"image": "x"}]}}}},
            "spec.template.spec.containers: element lacks merge key 'name'",
        ),
        (
            {"spec": {"template": {"spec": {"containers": [{"$patch": "delete"}]}}}},
            "lacks merge key 'name'",
        ),
        ({"metadata": {"finalizers": [{"a": 1}]}}, "metadata.finalizers"),
        ({"metadata": {"$retainKeys": "name"}}, "$retainKeys must be a list"),
        ({"metadata": {"$setElementOrder/finalizers": "x"}}, "$setElementOrder/finalizers"),
        (
            {
                "metadata": {
                    "$setElementOrder/finalizers": ["b", "a"],
                    "finalizers": ["a", "b"],
                }
            },
            "does not match its $setElementOrder",
        ),
    ],
)
def test_strategic_merge_errors_name_the_path(patch: dict, names: str) -> None:
    with pytest.raises(PatchError) as info:
        strategic_merge_patch(_deployment(), patch)
    assert names in str(info.value)


def test_an_item_without_the_merge_key_of_a_list_the_target_holds_is_merge_key_missing() -> None:
    # what kube's strategicpatch reports as ErrNoMergeKey (kube-apiserver's 500) carries the
    # item and the key
    item = {"$patch": "delete", "image": "x"}
    with pytest.raises(MergeKeyMissing) as info:
        strategic_merge_patch({"containers": [{"name": "a"}]}, {"containers": [item]})
    assert (info.value.item, info.value.key) == (item, "name")


def test_a_list_the_target_lacks_is_the_patch_list_as_it_is() -> None:
    # kube's mergeMap takes a value the original lacks as it is (removeDirectives and
    # discardNullValuesFromPatch): no merge key checked, no duplicates merged
    patch = {
        "containers": [
            {"image": "x", "args": None},
            {"name": "a", "env": [{"value": "1"}, {"name": "gone", "$patch": "delete"}]},
            {"name": "a"},
        ],
        "volumes": [{"name": "v", "$patch": "delete"}],
        "securityContext": {"$patch": "replace", "runAsUser": 1},
    }
    assert strategic_merge_patch({}, patch) == {
        "containers": [{"image": "x"}, {"name": "a", "env": [{"value": "1"}]}, {"name": "a"}],
        "volumes": [],
    }
    # kube's mergePatchIntoOriginal: ordered by $setElementOrder, but the merge key is needed
    ordered = {"$setElementOrder/env": [{"name": "b"}, {"name": "a"}]}
    env = [{"name": "b", "value": None}, {"name": "a", "value": "1"}]
    assert strategic_merge_patch({}, {**ordered, "env": env}) == {
        "env": [{"name": "b"}, {"name": "a", "value": "1"}]
    }
    with pytest.raises(MergeKeyMissing):
        strategic_merge_patch({}, {**ordered, "env": [{"value": "1"}]})


def test_strategic_merge_rejects_non_objects() -> None:
    with pytest.raises(PatchError, match="must be an object"):
        strategic_merge_patch({}, [1])
    with pytest.raises(PatchError, match="array"):
        strategic_merge_patch([1], {})
    assert strategic_merge_patch(None, {"a": 1}) == {"a": 1}


def test_strategic_merge_never_mutates_inputs() -> None:
    target = _deployment()
    patch = {
        "metadata": {"finalizers": ["z"], "labels": {"app": None}},
        "spec": {"template": {"spec": {"containers": [{"name": "app", "env": [{"name": "C"}]}]}}},
    }
    target_before, patch_before = copy.deepcopy(target), copy.deepcopy(patch)
    strategic_merge_patch(target, patch)
    assert target == target_before
    assert patch == patch_before


def test_top_level_patch_directives() -> None:
    assert strategic_merge_patch({"a": 1}, {"$patch": "replace", "b": 2}) == {"b": 2}
    assert strategic_merge_patch({"a": 1}, {"$patch": "delete"}) == {}


def test_merge_keys_for_built_in_kinds_only() -> None:
    assert merge_keys_for("Deployment") is DEFAULT_MERGE_KEYS
    assert merge_keys_for("Pod") is DEFAULT_MERGE_KEYS
    assert merge_keys_for("Widget") is None
