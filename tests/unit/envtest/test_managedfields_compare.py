"""What an update changed, as structured-merge-diff's ``TypedValue.Compare`` sees it."""

from __future__ import annotations

from typing import Any

from mcruntime.envtest import _managedfields as mf

BUILTIN = mf.shape_for(None, builtin=True)


def test_filling_an_empty_map_changes_only_the_new_key() -> None:
    changed, removed = mf.compare({"data": {}}, {"data": {"x": "1"}}, BUILTIN)
    assert (changed, removed) == ({("f:data", "f:x")}, set())


def test_emptying_a_map_removes_its_keys_and_changes_nothing() -> None:
    changed, removed = mf.compare({"data": {"x": "1"}}, {"data": {}}, BUILTIN)
    assert (changed, removed) == (set(), {("f:data", "f:x")})


def test_an_empty_map_on_one_side_only_is_a_leaf() -> None:
    assert mf.compare({}, {"data": {}}, BUILTIN) == ({("f:data",)}, set())
    assert mf.compare({"data": {}}, {}, BUILTIN) == (set(), {("f:data",)})
    assert mf.compare({"data": {}}, {"data": {}}, BUILTIN) == (set(), set())


def test_a_new_keyed_list_item_is_a_member_with_its_fields() -> None:
    old = {"spec": {"containers": [{"name": "a", "image": "x"}]}}
    new = {"spec": {"containers": [{"name": "a", "image": "y"}, {"name": "b", "image": "z"}]}}
    changed, removed = mf.compare(old, new, BUILTIN)
    b = ("f:spec", "f:containers", 'k:{"name":"b"}')
    a = ("f:spec", "f:containers", 'k:{"name":"a"}')
    assert changed == {(*a, "f:image"), b, (*b, "f:name"), (*b, "f:image")}
    assert removed == set()


def test_a_value_of_another_type_modifies_the_path() -> None:
    changed, removed = mf.compare({"spec": {"v": "s"}}, {"spec": {"v": {"k": 1}}}, BUILTIN)
    assert changed == {("f:spec", "f:v"), ("f:spec", "f:v", "f:k")}
    assert removed == set()


def test_the_owner_of_an_empty_map_keeps_it_when_another_manager_fills_it() -> None:
    def update(old: Any, new: Any, base: Any, manager: str) -> list[dict[str, Any]]:
        return mf.track_update(
            old,
            new,
            base,
            manager=manager,
            api_version="v1",
            subresource="",
            status="",
            shape=BUILTIN,
        )

    first = update(None, {"data": {}}, [], "maker")
    second = update({"data": {}}, {"data": {"x": "1"}}, first, "filler")
    owned = {e["manager"]: mf.from_fields_v1(e["fieldsV1"]) for e in second}
    assert owned == {"maker": {("f:data",)}, "filler": {("f:data", "f:x")}}
    third = update({"data": {"x": "1"}}, {"data": {}}, second, "emptier")
    assert [e["manager"] for e in third] == ["maker"]


def test_entries_sort_as_the_server_writes_them() -> None:
    entries = [
        {"manager": "b", "operation": "Update", "time": "2024-01-01T00:00:02Z"},
        {"manager": "a", "operation": "Update", "time": "2024-01-01T00:00:02Z"},
        {"manager": "z", "operation": "Update"},
        {"manager": "c", "operation": "Apply", "time": "2024-01-01T00:00:09Z"},
    ]
    assert [e["manager"] for e in mf.sort_entries(entries)] == ["c", "z", "a", "b"]
