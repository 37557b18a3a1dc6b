"""Field sets of server-side apply: the FieldsV1 wire form, paths as the server prints them."""

from __future__ import annotations

from mcruntime.envtest import _managedfields as mf


def test_fields_v1_round_trip_marks_members_with_children() -> None:
    obj = {
        "metadata": {"labels": {"app": "web"}},
        "spec": {"containers": [{"name": "web", "image": "nginx"}], "replicas": 2},
    }
    paths = mf.fieldset(obj, mf.shape_for(None, builtin=True))
    tree = mf.to_fields_v1(paths)
    assert tree == {
        "f:metadata": {"f:labels": {"f:app": {}}},
        "f:spec": {
            "f:containers": {'k:{"name":"web"}': {".": {}, "f:image": {}, "f:name": {}}},
            "f:replicas": {},
        },
    }
    assert mf.from_fields_v1(tree) == paths


def test_path_strings_match_the_servers() -> None:
    assert mf.path_string(("f:spec", "f:replicas")) == ".spec.replicas"
    key = ("f:spec", "f:ports", 'k:{"name":"http","port":80}', "f:protocol")
    assert mf.path_string(key) == '.spec.ports[name="http",port=80].protocol'
    assert mf.path_string(("f:metadata", "f:finalizers", 'v:"a"')) == '.metadata.finalizers[="a"]'


def test_schema_list_types_decide_how_items_are_owned() -> None:
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {
                    "set": {"type": "array", "x-kubernetes-list-type": "set"},
                    "atomic": {"type": "array"},
                    "keyed": {
                        "type": "array",
                        "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["id"],
                    },
                },
            }
        },
    }
    obj = {"spec": {"set": ["a"], "atomic": ["x"], "keyed": [{"id": 1, "v": 2}]}}
    assert mf.fieldset(obj, mf.shape_for(schema, builtin=False)) == {
        ("f:spec", "f:set", 'v:"a"'),
        ("f:spec", "f:atomic"),
        ("f:spec", "f:keyed", 'k:{"id":1}'),
        ("f:spec", "f:keyed", 'k:{"id":1}', "f:id"),
        ("f:spec", "f:keyed", 'k:{"id":1}', "f:v"),
    }


def test_removing_a_path_drops_containers_it_leaves_empty() -> None:
    obj = {"metadata": {"labels": {"a": "1"}}, "data": {"k": "v"}}
    out = mf.remove_paths(obj, [("f:metadata", "f:labels", "f:a")], keep=set())
    assert out == {"data": {"k": "v"}}
    assert obj == {"metadata": {"labels": {"a": "1"}}, "data": {"k": "v"}}  # a copy


def test_an_update_takes_changed_fields_from_other_managers() -> None:
    shape = mf.shape_for(None, builtin=True)
    old = {"data": {"a": "1", "b": "1"}}
    first = mf.track_update(
        None, old, [], manager="one", api_version="v1", subresource="", status="", shape=shape
    )
    new = {"data": {"a": "2", "b": "1"}}
    entries = mf.track_update(
        old, new, first, manager="two", api_version="v1", subresource="", status="", shape=shape
    )
    owned = {e["manager"]: mf.from_fields_v1(e["fieldsV1"]) for e in entries}
    assert owned == {"one": {("f:data", "f:b")}, "two": {("f:data", "f:a")}}


def test_built_in_lists_are_owned_by_the_list_types_kubernetes_declares() -> None:
    # k8s.io/api core/v1: PodStatus.HostIPs is +listType=atomic though strategic merge patch
    # merges it by ip; Container.Resources.Claims is +listType=map by name, which strategic
    # merge patch replaces
    status = {"status": {"hostIPs": [{"ip": "10.0.0.1"}]}}
    assert mf.fieldset(status, mf.shape_for(None, builtin=True)) == {("f:status", "f:hostIPs")}
    container = {"name": "c", "resources": {"claims": [{"name": "gpu"}]}}
    paths = mf.fieldset({"spec": {"containers": [container]}}, mf.shape_for(None, builtin=True))
    claim = ("f:spec", "f:containers", 'k:{"name":"c"}', "f:resources", "f:claims")
    assert (*claim, 'k:{"name":"gpu"}', "f:name") in paths


def test_a_jobs_conditions_are_atomic_and_a_deployments_keyed_by_type() -> None:
    # k8s.io/api batch/v1 JobStatus.Conditions is +listType=atomic; apps/v1
    # DeploymentStatus.Conditions is +listType=map +listMapKey=type
    status = {"status": {"conditions": [{"type": "Complete", "status": "True"}]}}
    job = mf.fieldset(status, mf.shape_for(None, builtin=True, kind="Job"))
    assert job == {("f:status", "f:conditions")}
    deployment = mf.fieldset(status, mf.shape_for(None, builtin=True, kind="Deployment"))
    assert ("f:status", "f:conditions", 'k:{"type":"Complete"}') in deployment
